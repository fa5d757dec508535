package fakees

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// compare orders two indexed values: integers exactly, an integer and a
// float as floats, strings by their UTF-8 bytes (as Lucene's terms), false
// before true. Values of different kinds compare equal.
func compare(a, b any) int {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, y)
		case float64:
			return cmp.Compare(float64(x), y)
		}
	case float64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, float64(y))
		case float64:
			return cmp.Compare(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok && x != y {
			if x {
				return 1
			}
			return -1
		}
	}
	return 0
}

// operand returns the one field and its argument of a leaf query such as
// {"term": {"status": {"value": "ready"}}}.
func operand(arg any) (string, any, *apiError) {
	m, ok := arg.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, badRequest("parsing_exception", "query malformed, expected one field")
	}
	for f, v := range m {
		return f, v, nil
	}
	panic("unreachable")
}

func clauses(v any) []any {
	if list, ok := v.([]any); ok {
		return list
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// match evaluates one query clause on d.
func (ix *index) match(sc Scripts, q any, d *doc) (bool, *apiError) {
	m, ok := q.(map[string]any)
	if !ok || len(m) != 1 {
		return false, badRequest("parsing_exception", "query malformed, must start with start_object")
	}
	for kind, arg := range m {
		switch kind {
		case "match_all":
			return true, nil
		case "exists":
			f, _ := arg.(map[string]any)["field"].(string)
			_, ok := d.vals[f]
			return ok, nil
		case "term", "terms", "range":
			return ix.matchField(kind, arg, d)
		case "bool":
			return ix.matchBool(sc, arg, d)
		case "script":
			return ix.matchScript(sc, arg, d)
		}
		return false, badRequest("parsing_exception", "fakees: unknown query [%s]", kind)
	}
	panic("unreachable")
}

// matchField evaluates a term, terms or range query.
func (ix *index) matchField(kind string, arg any, d *doc) (bool, *apiError) {
	f, arg, aerr := operand(arg)
	if aerr != nil {
		return false, aerr
	}
	have, ok := d.vals[f]
	if !ok {
		return false, nil
	}
	is := func(v any, want func(int) bool) bool {
		x, ok := indexed(ix.types[f], v)
		return ok && want(compare(have, x))
	}
	eq := func(c int) bool { return c == 0 }
	switch kind {
	case "term":
		if m, ok := arg.(map[string]any); ok {
			arg = m["value"]
		}
		return is(arg, eq), nil
	case "terms":
		return slices.ContainsFunc(clauses(arg), func(v any) bool { return is(v, eq) }), nil
	}
	bounds, _ := arg.(map[string]any)
	for op, v := range bounds {
		var want func(int) bool
		switch op {
		case "gt":
			want = func(c int) bool { return c > 0 }
		case "gte":
			want = func(c int) bool { return c >= 0 }
		case "lt":
			want = func(c int) bool { return c < 0 }
		case "lte":
			want = func(c int) bool { return c <= 0 }
		default:
			return false, badRequest("parsing_exception", "[range] query does not support [%s]", op)
		}
		if !is(v, want) {
			return false, nil
		}
	}
	return true, nil
}

// matchBool evaluates a bool query: every filter clause, no must_not
// clause, and at least minimum_should_match should clauses (default 1
// when there is no filter, else 0).
func (ix *index) matchBool(sc Scripts, arg any, d *doc) (bool, *apiError) {
	b, _ := arg.(map[string]any)
	for k := range b {
		if k != "filter" && k != "must_not" && k != "should" && k != "minimum_should_match" {
			return false, badRequest("parsing_exception", "fakees: [bool] query does not support [%s]", k)
		}
	}
	all := func(list []any, want bool) (bool, *apiError) {
		for _, c := range list {
			if ok, aerr := ix.match(sc, c, d); aerr != nil || ok != want {
				return false, aerr
			}
		}
		return true, nil
	}
	if ok, aerr := all(clauses(b["filter"]), true); !ok {
		return false, aerr
	}
	if ok, aerr := all(clauses(b["must_not"]), false); !ok {
		return false, aerr
	}
	should := clauses(b["should"])
	need := int64(0)
	if len(should) > 0 && b["filter"] == nil {
		need = 1
	}
	if n, ok := b["minimum_should_match"].(json.Number); ok {
		need, _ = n.Int64()
	}
	for _, c := range should {
		ok, aerr := ix.match(sc, c, d)
		if aerr != nil {
			return false, aerr
		}
		if ok {
			need--
		}
	}
	return need <= 0, nil
}

// matchScript runs the FieldCompare script query: fields a and b both
// have a value and compare as op says (longs exactly, otherwise numbers as
// doubles, dates at the millisecond).
func (ix *index) matchScript(sc Scripts, arg any, d *doc) (bool, *apiError) {
	m, _ := arg.(map[string]any)
	s, _ := m["script"].(map[string]any)
	if src, _ := s["source"].(string); sc.FieldCompare == "" || src != sc.FieldCompare {
		return false, fail(400, cause("script_exception", "fakees: unrecognized script source",
			map[string]any{"lang": "painless", "index": ix.name, "index_uuid": ix.uuid}))
	}
	p, _ := s["params"].(map[string]any)
	a, _ := p["a"].(string)
	b, _ := p["b"].(string)
	x, okA := d.vals[a]
	y, okB := d.vals[b]
	if !okA || !okB {
		return false, nil
	}
	c := compare(x, y)
	switch p["op"] {
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

// matching returns the visible documents matching query.
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
	slices.SortFunc(out, func(a, b *doc) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

// sortField is one clause of a sort: {"field": {"order": …, "missing": …}}.
type sortField struct {
	field, typ  string
	desc, first bool // descending; missing values first
}

// key returns the sort values of d, as Elasticsearch reports them in a
// hit's "sort": a boolean as 0 or 1, a date as epoch milliseconds, and a
// missing value as the extreme that puts it where "missing" asks (the
// largest or smallest long, ±Infinity for a double, null for a keyword).
func key(specs []sortField, d *doc) []any {
	k := make([]any, len(specs))
	for i, s := range specs {
		v, ok := d.vals[s.field]
		switch {
		case ok && s.typ == "boolean":
			k[i] = int64(0)
			if v.(bool) {
				k[i] = int64(1)
			}
		case ok:
			k[i] = v
		case s.typ == "double":
			k[i] = inf(s.first == s.desc)
		case s.typ != "keyword" && s.first == s.desc:
			k[i] = int64(math.MaxInt64)
		case s.typ != "keyword":
			k[i] = int64(math.MinInt64)
		}
	}
	return k
}

// compareKeys orders two keys; a null (missing keyword) sorts first or
// last as its clause asks, whatever the order.
func compareKeys(specs []sortField, a, b []any) int {
	for i, s := range specs {
		x, y := a[i], b[i]
		if x == nil || y == nil {
			if (x == nil) == (y == nil) {
				continue
			}
			if (x == nil) == s.first {
				return -1
			}
			return 1
		}
		c := compare(x, y)
		if s.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// inf returns +Inf, or -Inf when !positive.
func inf(positive bool) float64 {
	if positive {
		return math.Inf(1)
	}
	return math.Inf(-1)
}

// jsonKey renders a key for a hit: infinities as the strings Elasticsearch
// writes for them.
func jsonKey(k []any) []any {
	out := slices.Clone(k)
	for i, v := range out {
		if f, ok := v.(float64); ok && math.IsInf(f, 0) {
			out[i] = "-Infinity"
			if f > 0 {
				out[i] = "Infinity"
			}
		}
	}
	return out
}

// afterKey parses search_after values as key returns them.
func afterKey(specs []sortField, after []any) ([]any, *apiError) {
	if len(after) != len(specs) {
		return nil, badRequest("illegal_argument_exception", "search_after has %d value(s) but sort has %d", len(after), len(specs))
	}
	k := make([]any, len(after))
	for i, v := range after {
		switch x := v.(type) {
		case string:
			switch {
			case specs[i].typ == "keyword":
				k[i] = x
			case x == "Infinity" || x == "-Infinity":
				k[i] = inf(x == "Infinity")
			}
		case json.Number:
			if n, err := x.Int64(); err == nil && specs[i].typ != "double" {
				k[i] = n
			} else {
				k[i], _ = x.Float64()
			}
		}
	}
	return k, nil
}

func (ix *index) search(sc Scripts, body []byte) (int, any, *apiError) {
	var req struct {
		Query       any                                          `json:"query"`
		Sort        []map[string]struct{ Order, Missing string } `json:"sort"`
		Size        *int                                         `json:"size"`
		SearchAfter []any                                        `json:"search_after"`
		SeqNo       bool                                         `json:"seq_no_primary_term"`
		Source      *bool                                        `json:"_source"`
		TotalHits   *bool                                        `json:"track_total_hits"`
	}
	if aerr := decode(body, &req); aerr != nil {
		return 0, nil, aerr
	}
	docs, aerr := ix.matching(sc, req.Query)
	if aerr != nil {
		return 0, nil, aerr
	}
	var specs []sortField
	for _, clause := range req.Sort {
		for f, o := range clause {
			specs = append(specs, sortField{field: f, typ: ix.types[f], desc: o.Order == "desc", first: o.Missing == "_first"})
		}
	}
	keys := make(map[*doc][]any, len(docs))
	for _, d := range docs {
		keys[d] = key(specs, d)
	}
	slices.SortStableFunc(docs, func(a, b *doc) int { return compareKeys(specs, keys[a], keys[b]) })
	if req.SearchAfter != nil {
		after, aerr := afterKey(specs, req.SearchAfter)
		if aerr != nil {
			return 0, nil, aerr
		}
		docs = slices.DeleteFunc(docs, func(d *doc) bool { return compareKeys(specs, keys[d], after) <= 0 })
	}
	total := len(docs)
	size := 10
	if req.Size != nil {
		size = *req.Size
	}
	docs = docs[:min(size, len(docs))]
	hits := make([]any, len(docs))
	for i, d := range docs {
		h := map[string]any{"_index": ix.name, "_id": d.id, "_score": nil}
		if specs != nil {
			h["sort"] = jsonKey(keys[d])
		}
		if req.SeqNo {
			h["_seq_no"], h["_primary_term"] = d.seqNo, primaryTerm
		}
		if req.Source == nil || *req.Source {
			h["_source"] = d.source
		}
		hits[i] = h
	}
	res := map[string]any{"max_score": nil, "hits": hits}
	if req.TotalHits == nil || *req.TotalHits {
		res["total"] = map[string]any{"value": total, "relation": "eq"}
	}
	return 200, map[string]any{"took": 1, "timed_out": false, "_shards": shards(), "hits": res}, nil
}

func shards() map[string]any {
	return map[string]any{"total": 1, "successful": 1, "skipped": 0, "failed": 0}
}

func (ix *index) count(sc Scripts, body []byte) (int, any, *apiError) {
	var req struct {
		Query any `json:"query"`
	}
	if aerr := decode(body, &req); aerr != nil {
		return 0, nil, aerr
	}
	docs, aerr := ix.matching(sc, req.Query)
	if aerr != nil {
		return 0, nil, aerr
	}
	return 200, map[string]any{"count": len(docs), "_shards": shards()}, nil
}
