package fakees

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// fieldMapping is the mapping of one field.
type fieldMapping struct {
	typ     string // long, double, keyword, boolean, date, binary, object
	indexed bool
}

// doc is one stored document version. Documents are immutable once stored:
// a write replaces the pointer, so a refresh can share them.
type doc struct {
	id      string
	raw     json.RawMessage // _source as sent (or as re-serialized by a script)
	src     map[string]any  // _source decoded with json.Number
	seqNo   int64
	version int64
	norm    map[string][]fieldValue // indexed values by field, filled lazily
}

// index is one index with a single primary shard.
type index struct {
	name    string
	uuid    string
	strict  bool
	fields  map[string]fieldMapping
	live    map[string]*doc     // what GET and writes see
	visible map[string]*doc     // what searches see: the state at the last refresh
	dirty   map[string]struct{} // ids written since the last refresh
	tomb    map[string]int64    // _version of deleted documents
	maxSeq  int64               // last assigned _seq_no, -1 before the first write
}

type docMeta struct {
	id            string
	ifSeqNo       int64 // -1 when absent
	ifPrimaryTerm int64
}

const primaryTerm = 1

func newIndex(name, uuid string) *index {
	return &index{
		name: name, uuid: uuid, fields: map[string]fieldMapping{},
		live: map[string]*doc{}, visible: map[string]*doc{}, dirty: map[string]struct{}{},
		tomb: map[string]int64{}, maxSeq: -1,
	}
}

func (ix *index) mappingJSON() map[string]any {
	props := map[string]any{}
	for f, m := range ix.fields {
		p := map[string]any{"type": m.typ}
		if m.typ == "object" {
			p["enabled"] = false
		}
		if !m.indexed {
			p["index"] = false
		}
		props[f] = p
	}
	out := map[string]any{"properties": props}
	if ix.strict {
		out["dynamic"] = "strict"
	}
	return out
}

// refresh makes the live documents visible to searches.
func (ix *index) refresh() {
	for id := range ix.dirty {
		if d, ok := ix.live[id]; ok {
			ix.visible[id] = d
		} else {
			delete(ix.visible, id)
		}
	}
	clear(ix.dirty)
}

// refreshFor applies a write's refresh parameter and reports whether a
// refresh was forced (refresh=true). wait_for is answered once the write is
// visible, which here is at once.
func (ix *index) refreshFor(q url.Values) bool {
	if !q.Has("refresh") {
		return false
	}
	switch q.Get("refresh") {
	case "", "true":
		ix.refresh()
		return true
	case "wait_for":
		ix.refresh()
	}
	return false
}

func (ix *index) conflict(id, reason string) *apiError {
	return errBody(409, "version_conflict_engine_exception", "["+id+"]: version conflict, "+reason, map[string]any{
		"index_uuid": ix.uuid, "shard": "0", "index": ix.name,
	})
}

// checkSeq applies if_seq_no / if_primary_term to the current document.
func (ix *index) checkSeq(m docMeta, cur *doc) *apiError {
	if m.ifSeqNo < 0 {
		return nil
	}
	if cur == nil {
		return ix.conflict(m.id, fmt.Sprintf("required seqNo [%d], primary term [%d]. but no document was found", m.ifSeqNo, m.ifPrimaryTerm))
	}
	if cur.seqNo != m.ifSeqNo || m.ifPrimaryTerm != primaryTerm {
		return ix.conflict(m.id, fmt.Sprintf("required seqNo [%d], primary term [%d]. current document has seqNo [%d] and primary term [%d]", m.ifSeqNo, m.ifPrimaryTerm, cur.seqNo, primaryTerm))
	}
	return nil
}

func (ix *index) writeResult(id string, d *doc, result string, shardTotal int) map[string]any {
	ok := 1
	if shardTotal == 0 {
		ok = 0
	}
	return map[string]any{
		"_index": ix.name, "_id": id, "_version": d.version, "result": result,
		"_shards": shards(shardTotal, ok), "_seq_no": d.seqNo, "_primary_term": primaryTerm,
	}
}

func decodeSource(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var src map[string]any
	if err := dec.Decode(&src); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("source is not an object")
	}
	return src, nil
}

// put stores src as the new version of document id.
func (ix *index) put(id string, raw json.RawMessage, src map[string]any) (*doc, string) {
	cur := ix.live[id]
	ix.maxSeq++
	d := &doc{id: id, raw: raw, src: src, seqNo: ix.maxSeq}
	result := "created"
	if cur != nil {
		d.version = cur.version + 1
		result = "updated"
	} else {
		d.version = ix.tomb[id] + 1
		delete(ix.tomb, id)
	}
	ix.live[id] = d
	ix.dirty[id] = struct{}{}
	return d, result
}

// index runs an index or create operation.
func (ix *index) index(m docMeta, opType string, body []byte) (int, map[string]any, *apiError) {
	if m.id == "" {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: an id is required;")
	}
	if len(m.id) > 512 {
		return 0, nil, badRequest("action_request_validation_exception", fmt.Sprintf("Validation Failed: 1: id [%s] is too long, must be no longer than 512 bytes but was: %d;", m.id, len(m.id)))
	}
	cur := ix.live[m.id]
	if opType == "create" && cur != nil {
		return 0, nil, ix.conflict(m.id, fmt.Sprintf("document already exists (current version [%d])", cur.version))
	}
	if aerr := ix.checkSeq(m, cur); aerr != nil {
		return 0, nil, aerr
	}
	src, err := decodeSource(body)
	if err != nil {
		return 0, nil, errBody(400, "document_parsing_exception", "[1:1] failed to parse: "+err.Error(), nil)
	}
	if aerr := ix.validate(m.id, src); aerr != nil {
		return 0, nil, aerr
	}
	d, result := ix.put(m.id, append(json.RawMessage(nil), bytes.TrimSpace(body)...), src)
	status := 200
	if result == "created" {
		status = 201
	}
	return status, ix.writeResult(m.id, d, result, 2), nil
}

func (ix *index) delete(m docMeta) (int, map[string]any, *apiError) {
	cur := ix.live[m.id]
	if aerr := ix.checkSeq(m, cur); aerr != nil {
		return 0, nil, aerr
	}
	ix.maxSeq++
	if cur == nil {
		d := &doc{seqNo: ix.maxSeq, version: ix.tomb[m.id] + 1}
		ix.tomb[m.id] = d.version
		return 404, ix.writeResult(m.id, d, "not_found", 2), nil
	}
	d := &doc{seqNo: ix.maxSeq, version: cur.version + 1}
	delete(ix.live, m.id)
	ix.dirty[m.id] = struct{}{}
	ix.tomb[m.id] = d.version
	return 200, ix.writeResult(m.id, d, "deleted", 2), nil
}

func (ix *index) get(id string) (int, any, *apiError) {
	d := ix.live[id]
	if d == nil {
		return 404, map[string]any{"_index": ix.name, "_id": id, "found": false}, nil
	}
	return 200, map[string]any{
		"_index": ix.name, "_id": id, "_version": d.version, "_seq_no": d.seqNo,
		"_primary_term": primaryTerm, "found": true, "_source": d.raw,
	}, nil
}

// validate checks a source against the mapping as document parsing does.
func (ix *index) validate(id string, src map[string]any) *apiError {
	for _, name := range sortedIDs(src) {
		v := src[name]
		fm, ok := ix.fields[name]
		if !ok {
			if ix.strict {
				return errBody(400, "strict_dynamic_mapping_exception", "[1:2] mapping set to strict, dynamic introduction of ["+name+"] within [_doc] is not allowed", nil)
			}
			continue
		}
		if fm.typ == "object" || v == nil {
			continue
		}
		vals := []any{v}
		if arr, ok := v.([]any); ok {
			vals = arr
		}
		for _, x := range vals {
			if err := checkType(fm.typ, x); err != nil {
				e := errBody(400, "document_parsing_exception", fmt.Sprintf("[1:2] failed to parse field [%s] of type [%s] in document with id '%s'. Preview of field's value: '%v'", name, fm.typ, id, x), nil)
				cause := e.body["error"].(map[string]any)
				cause["caused_by"] = map[string]any{"type": "illegal_argument_exception", "reason": err.Error()}
				return e
			}
		}
	}
	return nil
}

// maxTermBytes is Lucene's limit on the length of one indexed term.
const maxTermBytes = 32766

func checkType(typ string, v any) error {
	switch typ {
	case "long":
		switch x := v.(type) {
		case json.Number:
			if _, err := strconv.ParseInt(x.String(), 10, 64); err != nil {
				f, ferr := x.Float64()
				if ferr != nil || f < math.MinInt64 || f > math.MaxInt64 {
					return reasonf("Value [%s] is out of range for a long", x)
				}
			}
			return nil
		case string:
			if _, err := strconv.ParseInt(x, 10, 64); err != nil {
				return reasonf("For input string: %q", x)
			}
			return nil
		}
	case "double":
		switch x := v.(type) {
		case json.Number:
			return nil
		case string:
			if _, err := strconv.ParseFloat(x, 64); err != nil {
				return reasonf("For input string: %q", x)
			}
			return nil
		}
	case "keyword":
		switch x := v.(type) {
		case string:
			if len(x) > maxTermBytes {
				return reasonf("Document contains at least one immense term (whose UTF8 encoding is longer than the max length %d)", maxTermBytes)
			}
			return nil
		case json.Number, bool:
			return nil
		}
	case "boolean":
		switch x := v.(type) {
		case bool:
			return nil
		case string:
			if x == "true" || x == "false" || x == "" {
				return nil
			}
			return reasonf("Failed to parse value [%s] as only [true] or [false] are allowed.", x)
		}
	case "date":
		if _, err := dateMillis(v); err != nil {
			return err
		}
		return nil
	case "binary":
		if s, ok := v.(string); ok {
			if _, err := base64.StdEncoding.DecodeString(s); err != nil {
				return fmt.Errorf("failed to decode base64: %v", err)
			}
			return nil
		}
	}
	return fmt.Errorf("cannot parse %T as %s", v, typ)
}

// dateLayouts are the forms of strict_date_optional_time the server
// accepts (the fraction, up to nine digits, is optional in each).
var dateLayouts = []string{
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// dateMillis parses a date value (strict_date_optional_time or
// epoch_millis) to milliseconds since the epoch, truncating any finer
// fraction, which is the resolution of a date field.
func dateMillis(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(x.String(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("failed to parse date field [%s] with format [strict_date_optional_time||epoch_millis]", x)
		}
		return n, nil
	case string:
		for _, l := range dateLayouts {
			if t, err := time.Parse(l, x); err == nil {
				return t.UnixMilli(), nil
			}
		}
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, nil
		}
		return 0, fmt.Errorf("failed to parse date field [%s] with format [strict_date_optional_time||epoch_millis]", x)
	}
	return 0, fmt.Errorf("failed to parse date field [%v] with format [strict_date_optional_time||epoch_millis]", v)
}

// number is a numeric value with its JSON form: integral or not.
type number struct {
	isInt bool
	i     int64
	f     float64
}

func toNumber(v any) (number, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	case int64:
		return number{isInt: true, i: x, f: float64(x)}, true
	case float64:
		return number{f: x}, true
	default:
		return number{}, false
	}
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return number{isInt: true, i: i, f: float64(i)}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return number{}, false
	}
	return number{f: f}, true
}

func cmpNumber(a, b number) int {
	if a.isInt && b.isInt {
		return cmpOrdered(a.i, b.i)
	}
	return cmpOrdered(a.f, b.f)
}

func cmpOrdered[V int64 | float64 | string](a, b V) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reasonError is an error whose text is an Elasticsearch reason, quoted as
// Elasticsearch writes it (capitalized, sometimes with a final period).
type reasonError string

func (e reasonError) Error() string { return string(e) }

func reasonf(format string, args ...any) error { return reasonError(fmt.Sprintf(format, args...)) }
