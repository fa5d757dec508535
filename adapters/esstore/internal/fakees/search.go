package fakees

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// fieldValue is an indexed value of a field, normalized by its type:
// long -> number (integral), double -> number, keyword -> string,
// boolean -> bool, date -> int64 milliseconds.
type fieldValue any

// normalize converts a JSON value (from a document or a query) to the
// indexed form of a field of type typ.
func normalize(typ string, v any) (fieldValue, error) {
	switch typ {
	case "long":
		n, ok := toNumber(v)
		if !ok {
			return nil, reasonf("For input string: \"%v\"", v)
		}
		if n.isInt {
			return n, nil
		}
		if n.f == math.Trunc(n.f) && math.Abs(n.f) < 1<<63 {
			return number{isInt: true, i: int64(n.f), f: n.f}, nil
		}
		return n, nil
	case "double":
		n, ok := toNumber(v)
		if !ok {
			return nil, reasonf("For input string: \"%v\"", v)
		}
		return number{f: n.f}, nil
	case "keyword":
		switch x := v.(type) {
		case string:
			return x, nil
		case json.Number:
			return x.String(), nil
		case bool:
			return strconv.FormatBool(x), nil
		}
	case "boolean":
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			switch x {
			case "true":
				return true, nil
			case "false", "":
				return false, nil
			}
		}
	case "date":
		ms, err := dateMillis(v)
		if err != nil {
			return nil, err
		}
		return ms, nil
	}
	return nil, fmt.Errorf("cannot use %v as %s", v, typ)
}

// compareValues orders two normalized values of the same field type.
func compareValues(a, b fieldValue) int {
	switch x := a.(type) {
	case number:
		return cmpNumber(x, b.(number))
	case string:
		return strings.Compare(x, b.(string)) // UTF-8 byte order, as Lucene's BytesRef
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case int64:
		return cmpOrdered(x, b.(int64))
	}
	return 0
}

// values returns the normalized values of field f in d (none when missing
// or null).
func (ix *index) values(d *doc, f string) []fieldValue {
	if vs, ok := d.norm[f]; ok {
		return vs
	}
	vs := ix.normValues(d, f)
	if d.norm == nil {
		d.norm = map[string][]fieldValue{}
	}
	d.norm[f] = vs
	return vs
}

func (ix *index) normValues(d *doc, f string) []fieldValue {
	fm, ok := ix.fields[f]
	if !ok {
		return nil
	}
	raw := d.src[f]
	if raw == nil {
		return nil
	}
	items := []any{raw}
	if arr, ok := raw.([]any); ok {
		items = arr
	}
	var out []fieldValue
	for _, it := range items {
		if it == nil {
			continue
		}
		if v, err := normalize(fm.typ, it); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func shardFailure(ix *index, typ, reason string) *apiError {
	cause := map[string]any{"type": typ, "reason": reason, "index_uuid": ix.uuid, "index": ix.name}
	return &apiError{status: 400, body: map[string]any{
		"error": map[string]any{
			"root_cause": []any{cause},
			"type":       "search_phase_execution_exception", "reason": "all shards failed",
			"phase": "query", "grouped": true,
			"failed_shards": []any{map[string]any{"shard": 0, "index": ix.name, "node": "fakenode", "reason": cause}},
			"caused_by":     cause,
		},
		"status": 400,
	}}
}

func parsingError(reason string) *apiError {
	return badRequest("parsing_exception", reason)
}

// searchableField returns the mapping of a field a query may use.
func (ix *index) searchableField(f string) (fieldMapping, *apiError) {
	fm, ok := ix.fields[f]
	if !ok {
		return fm, nil // unmapped: matches nothing, as in Elasticsearch
	}
	if fm.typ == "binary" || fm.typ == "object" || !fm.indexed {
		return fm, shardFailure(ix, "query_shard_exception", fmt.Sprintf("failed to create query: Cannot search on field [%s] since it is not indexed.", f))
	}
	return fm, nil
}

// match evaluates a query clause on document d.
func (ix *index) match(sc Scripts, q any, d *doc) (bool, *apiError) {
	m, ok := q.(map[string]any)
	if !ok || len(m) != 1 {
		return false, parsingError("query malformed, must start with start_object")
	}
	for kind, body := range m {
		switch kind {
		case "match_all":
			return true, nil
		case "term", "terms", "range", "exists":
			return ix.matchLeaf(kind, body, d)
		case "bool":
			return ix.matchBool(sc, body, d)
		case "script":
			return ix.matchScript(sc, body, d)
		default:
			return false, parsingError("unknown query [" + kind + "]")
		}
	}
	return false, nil
}

func singleField(kind string, body any) (string, any, *apiError) {
	m, ok := body.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, parsingError("[" + kind + "] query malformed")
	}
	for f, v := range m {
		return f, v, nil
	}
	return "", nil, nil
}

func (ix *index) matchLeaf(kind string, body any, d *doc) (bool, *apiError) {
	if kind == "exists" {
		m, _ := body.(map[string]any)
		f, _ := m["field"].(string)
		if f == "" {
			return false, parsingError("[exists] must be provided with a [field]")
		}
		if _, aerr := ix.searchableField(f); aerr != nil {
			return false, aerr
		}
		return len(ix.values(d, f)) > 0, nil
	}
	f, arg, aerr := singleField(kind, body)
	if aerr != nil {
		return false, aerr
	}
	fm, aerr := ix.searchableField(f)
	if aerr != nil {
		return false, aerr
	}
	if fm.typ == "" {
		return false, nil
	}
	norm := func(v any) (fieldValue, *apiError) {
		n, err := normalize(fm.typ, v)
		if err != nil {
			return nil, shardFailure(ix, "query_shard_exception", fmt.Sprintf("failed to create query: %v", err))
		}
		return n, nil
	}
	vals := ix.values(d, f)
	switch kind {
	case "term":
		if m, ok := arg.(map[string]any); ok {
			arg = m["value"]
		}
		want, aerr := norm(arg)
		if aerr != nil {
			return false, aerr
		}
		for _, v := range vals {
			if compareValues(v, want) == 0 {
				return true, nil
			}
		}
		return false, nil
	case "terms":
		list, ok := arg.([]any)
		if !ok {
			return false, parsingError("[terms] query does not support [" + f + "]")
		}
		for _, x := range list {
			want, aerr := norm(x)
			if aerr != nil {
				return false, aerr
			}
			for _, v := range vals {
				if compareValues(v, want) == 0 {
					return true, nil
				}
			}
		}
		return false, nil
	case "range":
		bounds, ok := arg.(map[string]any)
		if !ok {
			return false, parsingError("[range] query malformed, no start_object after query name")
		}
		type bound struct {
			v  fieldValue
			op string
		}
		var bs []bound
		for _, op := range sortedIDs(bounds) {
			switch op {
			case "gt", "gte", "lt", "lte":
				b, aerr := norm(bounds[op])
				if aerr != nil {
					return false, aerr
				}
				bs = append(bs, bound{b, op})
			case "format", "time_zone", "boost":
			default:
				return false, parsingError("[range] query does not support [" + op + "]")
			}
		}
		for _, v := range vals {
			ok := true
			for _, b := range bs {
				c := compareValues(v, b.v)
				switch b.op {
				case "gt":
					ok = ok && c > 0
				case "gte":
					ok = ok && c >= 0
				case "lt":
					ok = ok && c < 0
				case "lte":
					ok = ok && c <= 0
				}
			}
			if ok {
				return true, nil
			}
		}
		return false, nil
	}
	return false, nil
}

func clauses(v any) []any {
	if v == nil {
		return nil
	}
	if arr, ok := v.([]any); ok {
		return arr
	}
	return []any{v}
}

func (ix *index) matchBool(sc Scripts, body any, d *doc) (bool, *apiError) {
	m, ok := body.(map[string]any)
	if !ok {
		return false, parsingError("[bool] malformed query")
	}
	for k := range m {
		switch k {
		case "filter", "must", "should", "must_not", "minimum_should_match", "boost":
		default:
			return false, parsingError("[bool] query does not support [" + k + "]")
		}
	}
	for _, key := range []string{"filter", "must"} {
		for _, c := range clauses(m[key]) {
			ok, aerr := ix.match(sc, c, d)
			if aerr != nil || !ok {
				return false, aerr
			}
		}
	}
	for _, c := range clauses(m["must_not"]) {
		ok, aerr := ix.match(sc, c, d)
		if aerr != nil || ok {
			return false, aerr
		}
	}
	should := clauses(m["should"])
	if len(should) == 0 {
		return true, nil
	}
	// Without must or filter clauses, at least one should clause must match.
	min := 0
	if len(clauses(m["filter"])) == 0 && len(clauses(m["must"])) == 0 {
		min = 1
	}
	if msm, ok := m["minimum_should_match"]; ok {
		n, err := strconv.Atoi(fmt.Sprint(msm))
		if err != nil {
			return false, parsingError("fakees: minimum_should_match must be an integer")
		}
		min = n
	}
	hits := 0
	for _, c := range should {
		ok, aerr := ix.match(sc, c, d)
		if aerr != nil {
			return false, aerr
		}
		if ok {
			hits++
		}
	}
	return hits >= min, nil
}

// script extracts the source and params of a script object.
func script(body any) (string, map[string]any, *apiError) {
	switch x := body.(type) {
	case string:
		return x, map[string]any{}, nil
	case map[string]any:
		src, _ := x["source"].(string)
		if lang, ok := x["lang"]; ok && lang != "painless" {
			return "", nil, badRequest("illegal_argument_exception", fmt.Sprintf("script_lang not supported [%v]", lang))
		}
		params, _ := x["params"].(map[string]any)
		if params == nil {
			params = map[string]any{}
		}
		return src, params, nil
	}
	return "", nil, parsingError("[script] malformed")
}

func scriptError(ix *index, reason string) *apiError {
	return errBody(400, "script_exception", reason, map[string]any{"lang": "painless", "index": ix.name, "index_uuid": ix.uuid})
}

// matchScript runs a script query; only the FieldCompare script is known.
func (ix *index) matchScript(sc Scripts, body any, d *doc) (bool, *apiError) {
	m, _ := body.(map[string]any)
	src, params, aerr := script(m["script"])
	if aerr != nil {
		return false, aerr
	}
	if sc.FieldCompare == "" || src != sc.FieldCompare {
		return false, scriptError(ix, "fakees: unrecognized script query source")
	}
	a, _ := params["a"].(string)
	b, _ := params["b"].(string)
	op, _ := params["op"].(string)
	for _, f := range []string{a, b} {
		if _, ok := ix.fields[f]; !ok {
			return false, scriptError(ix, "runtime error: No field found for ["+f+"] in mapping")
		}
		if _, aerr := ix.searchableField(f); aerr != nil {
			return false, aerr
		}
	}
	va, vb := ix.values(d, a), ix.values(d, b)
	if len(va) == 0 || len(vb) == 0 {
		return false, nil
	}
	x, y := va[0], vb[0]
	var c int
	switch xv := x.(type) {
	case number:
		yv, ok := y.(number)
		if !ok {
			return false, scriptError(ix, "runtime error: class_cast_exception")
		}
		// Long.compare when both are longs, else Double.compare.
		if ix.fields[a].typ == "long" && ix.fields[b].typ == "long" {
			c = cmpOrdered(xv.i, yv.i)
		} else {
			c = cmpOrdered(xv.f, yv.f)
		}
	default:
		if fmt.Sprintf("%T", x) != fmt.Sprintf("%T", y) {
			return false, scriptError(ix, "runtime error: class_cast_exception")
		}
		c = compareValues(x, y)
	}
	return compareOp(op, c)
}

func compareOp(op string, c int) (bool, *apiError) {
	switch op {
	case "eq":
		return c == 0, nil
	case "ne":
		return c != 0, nil
	case "lt":
		return c < 0, nil
	case "le":
		return c <= 0, nil
	case "gt":
		return c > 0, nil
	}
	return c >= 0, nil
}

// sortSpec is one parsed sort clause.
type sortSpec struct {
	field     string
	typ       string
	desc      bool
	missFirst bool
}

func (ix *index) parseSort(v any) ([]sortSpec, *apiError) {
	var specs []sortSpec
	for _, c := range clauses(v) {
		var f string
		var opts map[string]any
		switch x := c.(type) {
		case string:
			f = x
		case map[string]any:
			if len(x) != 1 {
				return nil, parsingError("[sort] malformed")
			}
			for k, o := range x {
				f = k
				switch ov := o.(type) {
				case string:
					opts = map[string]any{"order": ov}
				case map[string]any:
					opts = ov
				}
			}
		default:
			return nil, parsingError("[sort] malformed")
		}
		fm, ok := ix.fields[f]
		if !ok {
			return nil, shardFailure(ix, "query_shard_exception", "No mapping found for ["+f+"] in order to sort on")
		}
		if fm.typ == "binary" || fm.typ == "object" {
			return nil, shardFailure(ix, "illegal_argument_exception", "Field ["+f+"] of type ["+fm.typ+"] does not support sorting")
		}
		sp := sortSpec{field: f, typ: fm.typ}
		switch opts["order"] {
		case nil, "asc":
		case "desc":
			sp.desc = true
		default:
			return nil, parsingError(fmt.Sprintf("[sort] unknown order [%v]", opts["order"]))
		}
		switch opts["missing"] {
		case nil, "_last":
		case "_first":
			sp.missFirst = true
		default:
			return nil, parsingError("fakees: only _first and _last are supported for missing")
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

// sortKey is the value of one sort clause for a document; nil is missing.
type sortKey []fieldValue

func (ix *index) keyOf(specs []sortSpec, d *doc) sortKey {
	k := make(sortKey, len(specs))
	for i, sp := range specs {
		vals := ix.values(d, sp.field)
		if len(vals) == 0 {
			continue
		}
		best := vals[0]
		for _, v := range vals[1:] { // multi-valued: min ascending, max descending
			c := compareValues(v, best)
			if (c < 0) != sp.desc && c != 0 {
				best = v
			}
		}
		k[i] = best
	}
	return k
}

func compareKeys(specs []sortSpec, a, b sortKey) int {
	for i, sp := range specs {
		x, y := a[i], b[i]
		switch {
		case x == nil && y == nil:
			continue
		case x == nil || y == nil:
			if (x == nil) == sp.missFirst {
				return -1
			}
			return 1
		}
		c := compareValues(x, y)
		if sp.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// missingSentinel is the sort value Elasticsearch returns for a document
// without a value in a long, date or boolean sort: the extreme that puts it
// where "missing" asks.
func missingSentinel(sp sortSpec) any {
	last := !sp.missFirst
	if last != sp.desc {
		return int64(math.MaxInt64)
	}
	return int64(math.MinInt64)
}

// sortJSON renders a key as the "sort" array of a hit.
func sortJSON(specs []sortSpec, k sortKey) []any {
	out := make([]any, len(specs))
	for i, sp := range specs {
		v := k[i]
		switch x := v.(type) {
		case nil:
			switch sp.typ {
			case "long", "date", "boolean":
				out[i] = missingSentinel(sp)
			case "double":
				if missingSentinel(sp) == int64(math.MaxInt64) {
					out[i] = "Infinity"
				} else {
					out[i] = "-Infinity"
				}
			default:
				out[i] = nil
			}
		case number:
			if sp.typ == "long" {
				out[i] = x.i
			} else {
				out[i] = x.f
			}
		case bool:
			if x {
				out[i] = 1
			} else {
				out[i] = 0
			}
		default:
			out[i] = x
		}
	}
	return out
}

// parseAfter turns a search_after array into a key, recognizing the
// missing-value forms sortJSON emits.
func parseAfter(specs []sortSpec, after []any) (sortKey, error) {
	if len(after) != len(specs) {
		return nil, fmt.Errorf("search_after has %d value(s) but sort has %d", len(after), len(specs))
	}
	k := make(sortKey, len(specs))
	for i, sp := range specs {
		v := after[i]
		if v == nil {
			continue
		}
		if s, ok := v.(string); ok && sp.typ == "double" && (s == "Infinity" || s == "-Infinity") {
			continue
		}
		if n, ok := toNumber(v); ok && n.isInt && (sp.typ == "long" || sp.typ == "date" || sp.typ == "boolean") {
			if n.i == math.MaxInt64 || n.i == math.MinInt64 {
				continue
			}
			switch sp.typ {
			case "date":
				k[i] = n.i
				continue
			case "boolean":
				k[i] = n.i != 0
				continue
			}
		}
		nv, err := normalize(sp.typ, v)
		if err != nil {
			return nil, reasonf("Failed to parse search_after value for field [%s].", sp.field)
		}
		k[i] = nv
	}
	return k, nil
}

func decodeBody(body []byte) (map[string]any, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, badRequest("x_content_parse_exception", err.Error())
	}
	return m, nil
}

// matching returns the visible documents matching the body's query, in
// no particular order.
func (ix *index) matching(sc Scripts, query any) ([]*doc, *apiError) {
	var out []*doc
	for _, d := range ix.visible {
		ok := true
		if query != nil {
			var aerr *apiError
			if ok, aerr = ix.match(sc, query, d); aerr != nil {
				return nil, aerr
			}
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// maxResultWindow is the default index.max_result_window.
const maxResultWindow = 10000

func intParam(v any, def int) (int, bool) {
	if v == nil {
		return def, true
	}
	n, err := strconv.Atoi(fmt.Sprint(v))
	return n, err == nil
}

func (ix *index) search(sc Scripts, q url.Values, body []byte) (int, any, *apiError) {
	req, aerr := decodeBody(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	for k := range req {
		switch k {
		case "query", "sort", "size", "from", "search_after", "seq_no_primary_term", "_source", "track_total_hits":
		default:
			return 0, nil, parsingError("fakees: unsupported search key [" + k + "]")
		}
	}
	size, ok1 := intParam(req["size"], 10)
	from, ok2 := intParam(req["from"], 0)
	if !ok1 || !ok2 || size < 0 || from < 0 {
		return 0, nil, parsingError("[size] and [from] must be non-negative integers")
	}
	if from+size > maxResultWindow {
		return 0, nil, shardFailure(ix, "illegal_argument_exception", fmt.Sprintf("Result window is too large, from + size must be less than or equal to: [%d] but was [%d]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting.", maxResultWindow, from+size))
	}
	docs, aerr := ix.matching(sc, req["query"])
	if aerr != nil {
		return 0, nil, aerr
	}
	specs, aerr := ix.parseSort(req["sort"])
	if aerr != nil {
		return 0, nil, aerr
	}
	keys := make(map[*doc]sortKey, len(docs))
	for _, d := range docs {
		keys[d] = ix.keyOf(specs, d)
	}
	// Equal keys fall back to _id order (Elasticsearch uses the internal
	// Lucene document number, which callers cannot rely on either).
	sort.Slice(docs, func(i, j int) bool {
		if c := compareKeys(specs, keys[docs[i]], keys[docs[j]]); c != 0 {
			return c < 0
		}
		return docs[i].id < docs[j].id
	})
	if sa, ok := req["search_after"]; ok {
		if len(specs) == 0 {
			return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: [search_after] requires a sort;")
		}
		arr, _ := sa.([]any)
		after, err := parseAfter(specs, arr)
		if err != nil {
			return 0, nil, shardFailure(ix, "illegal_argument_exception", err.Error())
		}
		var rest []*doc
		for _, d := range docs {
			if compareKeys(specs, keys[d], after) > 0 {
				rest = append(rest, d)
			}
		}
		docs = rest
	}
	total := len(docs)
	if from > len(docs) {
		from = len(docs)
	}
	docs = docs[from:]
	if len(docs) > size {
		docs = docs[:size]
	}
	withSeq := fmt.Sprint(req["seq_no_primary_term"]) == "true"
	withSource := fmt.Sprint(req["_source"]) != "false"
	hits := make([]any, len(docs))
	for i, d := range docs {
		h := map[string]any{"_index": ix.name, "_id": d.id}
		if len(specs) > 0 {
			h["_score"] = nil
			h["sort"] = sortJSON(specs, keys[d])
		} else {
			h["_score"] = 1.0
		}
		if withSeq {
			h["_seq_no"], h["_primary_term"] = d.seqNo, primaryTerm
		}
		if withSource {
			h["_source"] = d.raw
		}
		hits[i] = h
	}
	hitsObj := map[string]any{"max_score": nil, "hits": hits}
	if len(specs) == 0 && len(hits) > 0 {
		hitsObj["max_score"] = 1.0
	}
	if fmt.Sprint(req["track_total_hits"]) != "false" {
		rel := "eq"
		if total > 10000 {
			total, rel = 10000, "gte"
		}
		hitsObj["total"] = map[string]any{"value": total, "relation": rel}
	}
	return 200, map[string]any{
		"took": 1, "timed_out": false,
		"_shards": map[string]any{"total": 1, "successful": 1, "skipped": 0, "failed": 0},
		"hits":    hitsObj,
	}, nil
}

func (ix *index) count(sc Scripts, body []byte) (int, any, *apiError) {
	req, aerr := decodeBody(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	for k := range req {
		if k != "query" {
			return 0, nil, parsingError("request does not support [" + k + "]")
		}
	}
	docs, aerr := ix.matching(sc, req["query"])
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, map[string]any{
		"count":   len(docs),
		"_shards": map[string]any{"total": 1, "successful": 1, "skipped": 0, "failed": 0},
	}, nil
}
