package fakees

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"strconv"
	"time"
)

// index is one index with a single primary shard.
type index struct {
	name, uuid string
	strict     bool
	types      map[string]string // field -> mapping type
	live       map[string]*doc   // what GET and writes see
	visible    map[string]*doc   // what searches see: the live documents at the last refresh
	seqNo      int64             // _seq_no of the last write, -1 before the first
}

// doc is one stored version of a document; a write replaces it whole, so
// the live and visible maps can share it.
type doc struct {
	id      string
	source  json.RawMessage
	fields  map[string]any // source decoded with json.Number
	vals    map[string]any // indexed value of every searchable field present (see indexed)
	seqNo   int64
	version int64
}

const primaryTerm = 1

// maxTermBytes is Lucene's limit on the length of one indexed term.
const maxTermBytes = 32766

// cond is the optimistic-concurrency condition of a write.
type cond struct {
	IfSeqNo       *int64 `json:"if_seq_no"`
	IfPrimaryTerm *int64 `json:"if_primary_term"`
}

func (ix *index) conflict(id, detail string) *apiError {
	return fail(409, ix.conflictCause(id, detail))
}

func (ix *index) conflictCause(id, detail string) map[string]any {
	return cause("version_conflict_engine_exception", "["+id+"]: version conflict, "+detail,
		map[string]any{"index_uuid": ix.uuid, "shard": "0", "index": ix.name})
}

// check applies c to the current version cur of document id.
func (ix *index) check(id string, c cond, cur *doc) *apiError {
	if c.IfSeqNo == nil && c.IfPrimaryTerm == nil {
		return nil
	}
	if c.IfSeqNo == nil || c.IfPrimaryTerm == nil {
		return badRequest("action_request_validation_exception", "Validation Failed: 1: if_seq_no and if_primary_term must be set together;")
	}
	want := fmt.Sprintf("required seqNo [%d], primary term [%d]. ", *c.IfSeqNo, *c.IfPrimaryTerm)
	if cur == nil {
		return ix.conflict(id, want+"but no document was found")
	}
	if cur.seqNo != *c.IfSeqNo || *c.IfPrimaryTerm != primaryTerm {
		return ix.conflict(id, want+fmt.Sprintf("current document has seqNo [%d] and primary term [%d]", cur.seqNo, primaryTerm))
	}
	return nil
}

// result is the answer of a single-document write.
func (ix *index) result(id string, d *doc, result string) map[string]any {
	return map[string]any{
		"_index": ix.name, "_id": id, "_version": d.version, "result": result,
		"_shards": map[string]any{"total": 2, "successful": 1, "failed": 0},
		"_seq_no": d.seqNo, "_primary_term": primaryTerm,
	}
}

// put stores a new version of document id (nil fields: a delete) and
// returns it.
func (ix *index) put(id string, source json.RawMessage, fields map[string]any) *doc {
	ix.seqNo++
	d := &doc{id: id, source: source, fields: fields, seqNo: ix.seqNo, version: 1}
	if cur := ix.live[id]; cur != nil {
		d.version = cur.version + 1
	}
	if fields == nil {
		delete(ix.live, id)
		return d
	}
	d.vals = map[string]any{}
	for f, v := range fields {
		if x, ok := indexed(ix.types[f], v); ok {
			d.vals[f] = x
		}
	}
	ix.live[id] = d
	return d
}

// parseSource decodes and checks a document against the mapping.
func (ix *index) parseSource(id string, raw []byte) (map[string]any, *apiError) {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, badRequest("document_parsing_exception", "[1:1] failed to parse: %v", err)
	}
	for f, v := range fields {
		typ, ok := ix.types[f]
		if !ok && ix.strict {
			return nil, badRequest("strict_dynamic_mapping_exception",
				"[1:2] mapping set to strict, dynamic introduction of [%s] within [_doc] is not allowed", f)
		}
		if s, ok := v.(string); ok && typ == "keyword" && len(s) > maxTermBytes {
			c := cause("illegal_argument_exception", fmt.Sprintf("Document contains at least one immense term in field=%q", f), nil)
			c["caused_by"] = cause("max_bytes_length_exceeded_exception", fmt.Sprintf("bytes can be at most %d in length; got %d", maxTermBytes, len(s)), nil)
			return nil, fail(400, c)
		}
	}
	return fields, nil
}

// write indexes source as document id: op "create" refuses an existing
// document, "index" replaces it; c must hold.
func (ix *index) write(id, op string, c cond, source []byte) (int, map[string]any, *apiError) {
	cur := ix.live[id]
	if op == "create" && cur != nil {
		return 0, nil, ix.conflict(id, fmt.Sprintf("document already exists (current version [%d])", cur.version))
	}
	if aerr := ix.check(id, c, cur); aerr != nil {
		return 0, nil, aerr
	}
	fields, aerr := ix.parseSource(id, source)
	if aerr != nil {
		return 0, nil, aerr
	}
	d := ix.put(id, bytes.TrimSpace(source), fields)
	if cur == nil {
		return 201, ix.result(id, d, "created"), nil
	}
	return 200, ix.result(id, d, "updated"), nil
}

// refresh applies a write's refresh parameter and reports whether the
// answer says forced_refresh: refresh=true (or empty) refreshes at once;
// wait_for answers once a refresh has made the write visible, which here
// is now.
func (ix *index) refresh(q url.Values) (forced bool) {
	if !q.Has("refresh") || q.Get("refresh") == "false" {
		return false
	}
	ix.visible = maps.Clone(ix.live)
	return q.Get("refresh") != "wait_for"
}

func (ix *index) indexDoc(id string, q url.Values, body []byte) (int, any, *apiError) {
	var c cond
	for _, p := range []struct {
		name string
		dst  **int64
	}{{"if_seq_no", &c.IfSeqNo}, {"if_primary_term", &c.IfPrimaryTerm}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, nil, badRequest("illegal_argument_exception", "invalid %s [%s]", p.name, v)
			}
			*p.dst = &n
		}
	}
	op := q.Get("op_type")
	if op == "" {
		op = "index"
	}
	status, res, aerr := ix.write(id, op, c, body)
	if aerr == nil && ix.refresh(q) {
		res["forced_refresh"] = true
	}
	return status, res, aerr
}

func (ix *index) get(id string) (int, any, *apiError) {
	d := ix.live[id]
	if d == nil {
		return 404, map[string]any{"_index": ix.name, "_id": id, "found": false}, nil
	}
	return 200, map[string]any{
		"_index": ix.name, "_id": id, "_version": d.version, "_seq_no": d.seqNo,
		"_primary_term": primaryTerm, "found": true, "_source": d.source,
	}, nil
}

// bulk runs NDJSON pairs of a create action and its source, and delete
// actions, in order; a failed item does not stop the others.
func (ix *index) bulk(q url.Values, body []byte) (int, any, *apiError) {
	var lines [][]byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	items := []any{}
	failed := false
	for i := 0; i < len(lines); i++ {
		var action map[string]struct {
			ID string `json:"_id"`
			cond
		}
		if aerr := decode(lines[i], &action); aerr != nil || len(action) != 1 {
			return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line [%d]", i+1)
		}
		for name, meta := range action {
			var status int
			var res map[string]any
			var aerr *apiError
			switch name {
			case "create":
				if i++; i == len(lines) {
					return 0, nil, badRequest("illegal_argument_exception", "The bulk request must be terminated by a newline [\\n]")
				}
				status, res, aerr = ix.write(meta.ID, "create", meta.cond, lines[i])
			case "delete":
				status, res, aerr = ix.delete(meta.ID, meta.cond)
			default:
				return 0, nil, badRequest("illegal_argument_exception", "fakees: unsupported bulk action [%s]", name)
			}
			if aerr != nil {
				failed = true
				c := maps.Clone(aerr.body["error"].(map[string]any))
				delete(c, "root_cause")
				res, status = map[string]any{"_index": ix.name, "_id": meta.ID, "error": c}, aerr.status
			}
			res["status"] = status
			items = append(items, map[string]any{name: res})
		}
	}
	ix.refresh(q)
	return 200, map[string]any{"took": 1, "errors": failed, "items": items}, nil
}

// delete removes document id if c holds; a missing one is a 404 answer
// with result not_found, not an error.
func (ix *index) delete(id string, c cond) (int, map[string]any, *apiError) {
	cur := ix.live[id]
	if aerr := ix.check(id, c, cur); aerr != nil {
		return 0, nil, aerr
	}
	d := ix.put(id, nil, nil)
	if cur == nil {
		return 404, ix.result(id, d, "not_found"), nil
	}
	return 200, ix.result(id, d, "deleted"), nil
}

// indexed returns the value a field of mapping type typ indexes for the
// JSON value v: int64 for long, float64 for double, string for keyword,
// bool for boolean, int64 milliseconds for date (truncating any finer
// fraction). Binary and object fields, nulls and values that do not parse
// index nothing.
func indexed(typ string, v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		switch typ {
		case "long", "date":
			if n, err := x.Int64(); err == nil {
				return n, true
			}
			f, err := x.Float64() // a long keeps the integer part of a fraction
			return int64(f), err == nil && typ == "long" && math.Abs(f) < math.MaxInt64
		case "double":
			f, err := x.Float64()
			return f, err == nil
		}
	case string:
		switch typ {
		case "keyword":
			return x, true
		case "date":
			t, err := time.Parse(time.RFC3339Nano, x)
			return t.UnixMilli(), err == nil
		}
	case bool:
		return x, typ == "boolean"
	}
	return nil, false
}
