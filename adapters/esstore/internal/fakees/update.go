package fakees

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// runWrite runs the recognized Write script on a copy of src. It returns
// the new source, or noop when the script set ctx.op = 'noop'.
//
// Semantics (those of the painless source the adapter sends): when
// params.where is not null, evaluate it as a postfix program on the
// source; leaves push a boolean, "and"/"or" pop n values and push their
// conjunction/disjunction. A leaf on a null or missing field is false
// (except "null"). Comparisons: kind "date" compares instants truncated to
// milliseconds; kind "num" compares as longs when both values are
// integral JSON numbers, else as doubles; any other kind uses compareTo on
// strings or booleans. A comparison of mismatched types is a
// ClassCastException in painless, a 400 script_exception here. If the
// program is false: noop. Otherwise set every params.set entry and add
// every params.incr entry to its non-null current value (long arithmetic
// unless the current value is not integral).
func (ix *index) runWrite(sc Scripts, scriptBody any, src map[string]any) (map[string]any, bool, *apiError) {
	text, params, aerr := script(scriptBody)
	if aerr != nil {
		return nil, false, aerr
	}
	if sc.Write == "" || text != sc.Write {
		return nil, false, scriptError(ix, "fakees: unrecognized update script source")
	}
	if w := params["where"]; w != nil {
		prog, ok := w.([]any)
		if !ok {
			return nil, false, scriptError(ix, "runtime error: class_cast_exception: params.where is not a list")
		}
		ok, err := evalProgram(prog, src)
		if err != nil {
			return nil, false, scriptError(ix, "runtime error: "+err.Error())
		}
		if !ok {
			return nil, true, nil
		}
	}
	out := make(map[string]any, len(src))
	for k, v := range src {
		out[k] = v
	}
	set, _ := params["set"].(map[string]any)
	for k, v := range set {
		out[k] = v
	}
	incr, _ := params["incr"].(map[string]any)
	for k, v := range incr {
		cur := out[k]
		if cur == nil {
			continue
		}
		n, ok := toNumber(v)
		c, ok2 := toNumber(cur)
		if _, isStr := cur.(string); !ok || !ok2 || !n.isInt || isStr {
			return nil, false, scriptError(ix, "runtime error: class_cast_exception in increment of ["+k+"]")
		}
		if c.isInt {
			out[k] = json.Number(strconv.FormatInt(c.i+n.i, 10))
		} else {
			out[k] = json.Number(strconv.FormatFloat(c.f+float64(n.i), 'g', -1, 64))
		}
	}
	return out, false, nil
}

func evalProgram(prog []any, src map[string]any) (bool, error) {
	var st []bool
	for _, raw := range prog {
		ins, ok := raw.(map[string]any)
		if !ok {
			return false, fmt.Errorf("instruction is not a map")
		}
		op, _ := ins["op"].(string)
		if op == "and" || op == "or" {
			n, ok := toNumber(ins["n"])
			if !ok || !n.isInt || int(n.i) > len(st) {
				return false, fmt.Errorf("array_index_out_of_bounds_exception")
			}
			r := op == "and"
			for i := 0; i < int(n.i); i++ {
				v := st[len(st)-1]
				st = st[:len(st)-1]
				if op == "and" {
					r = r && v
				} else {
					r = r || v
				}
			}
			st = append(st, r)
			continue
		}
		f, _ := ins["f"].(string)
		k, _ := ins["k"].(string)
		x := src[f]
		r := false
		switch {
		case op == "null":
			r = x == nil
		case op == "notnull":
			r = x != nil
		case x != nil && op == "in":
			vs, _ := ins["vs"].([]any)
			for _, v := range vs {
				c, err := cmpv(x, v, k)
				if err != nil {
					return false, err
				}
				if c == 0 {
					r = true
				}
			}
		case x != nil:
			var y any
			if g, ok := ins["g"].(string); ok {
				y = src[g]
			} else {
				y = ins["v"]
			}
			if y != nil {
				c, err := cmpv(x, y, k)
				if err != nil {
					return false, err
				}
				r, _ = compareOp(op, c)
			}
		}
		st = append(st, r)
	}
	if len(st) == 0 {
		return false, fmt.Errorf("array_index_out_of_bounds_exception")
	}
	return st[0], nil
}

// cmpv is the cmpv function of the Write script.
func cmpv(x, y any, k string) (int, error) {
	switch k {
	case "date":
		xs, ok1 := x.(string)
		ys, ok2 := y.(string)
		if !ok1 || !ok2 {
			return 0, fmt.Errorf("class_cast_exception: Instant.parse needs strings")
		}
		a, err := instantMillis(xs)
		if err != nil {
			return 0, err
		}
		b, err := instantMillis(ys)
		if err != nil {
			return 0, err
		}
		return cmpOrdered(a, b), nil
	case "num":
		_, xs := x.(string)
		_, ys := y.(string)
		a, ok1 := toNumber(x)
		b, ok2 := toNumber(y)
		if !ok1 || !ok2 || xs || ys {
			return 0, fmt.Errorf("class_cast_exception: not a number")
		}
		return cmpNumber(a, b), nil
	}
	switch a := x.(type) {
	case string:
		if b, ok := y.(string); ok {
			return strings.Compare(a, b), nil
		}
	case bool:
		if b, ok := y.(bool); ok {
			return compareValues(a, b), nil
		}
	}
	return 0, fmt.Errorf("class_cast_exception: cannot compare %T with %T", x, y)
}

// instantMillis parses an ISO-8601 instant as java.time.Instant.parse does
// (date, time, optional fraction, zone) and truncates it to milliseconds.
func instantMillis(s string) (int64, error) {
	if !strings.Contains(s, "T") {
		return 0, fmt.Errorf("date_time_parse_exception: Text '%s' could not be parsed", s)
	}
	ms, err := dateMillis(s)
	if err != nil {
		return 0, fmt.Errorf("date_time_parse_exception: Text '%s' could not be parsed", s)
	}
	return ms, nil
}

// update runs the update API with a script.
func (ix *index) update(sc Scripts, m docMeta, body []byte) (int, map[string]any, *apiError) {
	req, aerr := decodeBody(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	if _, ok := req["script"]; !ok {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: script or doc is missing;")
	}
	for k := range req {
		if k != "script" {
			return 0, nil, badRequest("illegal_argument_exception", "fakees: unsupported update key ["+k+"]")
		}
	}
	cur := ix.live[m.id]
	if cur == nil {
		return 0, nil, errBody(404, "document_missing_exception", "["+m.id+"]: document missing", map[string]any{
			"index_uuid": ix.uuid, "shard": "0", "index": ix.name,
		})
	}
	if aerr := ix.checkSeq(m, cur); aerr != nil {
		return 0, nil, aerr
	}
	out, noop, aerr := ix.runWrite(sc, req["script"], cur.src)
	if aerr != nil {
		return 0, nil, aerr
	}
	if noop {
		return 200, ix.writeResult(m.id, cur, "noop", 0), nil
	}
	if aerr := ix.validate(m.id, out); aerr != nil {
		return 0, nil, aerr
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return 0, nil, scriptError(ix, err.Error())
	}
	d, _ := ix.put(m.id, raw, out)
	return 200, ix.writeResult(m.id, d, "updated", 2), nil
}

// updateByQuery runs the script on every visible document matching the
// query, checking each against its live version (internal versioning).
func (ix *index) updateByQuery(sc Scripts, q url.Values, body []byte) (int, any, *apiError) {
	req, aerr := decodeBody(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	for k := range req {
		if k != "query" && k != "script" && k != "conflicts" && k != "max_docs" {
			return 0, nil, parsingError("fakees: unsupported update_by_query key [" + k + "]")
		}
	}
	if _, ok := req["script"]; !ok {
		return 0, nil, badRequest("illegal_argument_exception", "fakees: update_by_query without a script is not supported")
	}
	proceed := q.Get("conflicts") == "proceed" || fmt.Sprint(req["conflicts"]) == "proceed"
	docs, aerr := ix.matching(sc, req["query"])
	if aerr != nil {
		return 0, nil, aerr
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].id < docs[j].id })
	var updated, noops, conflicts int
	var failures []any
	for _, d := range docs {
		cur := ix.live[d.id]
		if cur == nil || cur.seqNo != d.seqNo {
			conflicts++
			if proceed {
				continue
			}
			reason := fmt.Sprintf("[%s]: version conflict, required seqNo [%d], primary term [%d]. ", d.id, d.seqNo, primaryTerm)
			if cur == nil {
				reason += "but no document was found"
			} else {
				reason += fmt.Sprintf("current document has seqNo [%d] and primary term [%d]", cur.seqNo, primaryTerm)
			}
			failures = append(failures, map[string]any{
				"index": ix.name, "id": d.id, "status": 409,
				"cause": map[string]any{"type": "version_conflict_engine_exception", "reason": reason, "index_uuid": ix.uuid, "shard": "0", "index": ix.name},
			})
			break
		}
		out, noop, aerr := ix.runWrite(sc, req["script"], cur.src)
		if aerr != nil {
			return 0, nil, aerr
		}
		if noop {
			noops++
			continue
		}
		if aerr := ix.validate(d.id, out); aerr != nil {
			return 0, nil, aerr
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return 0, nil, scriptError(ix, err.Error())
		}
		ix.put(d.id, raw, out)
		updated++
	}
	if q.Get("refresh") == "true" || (q.Has("refresh") && q.Get("refresh") == "") {
		ix.refresh()
	}
	if failures == nil {
		failures = []any{}
	}
	res := map[string]any{
		"took": 1, "timed_out": false, "total": len(docs), "updated": updated, "deleted": 0,
		"batches": 1, "version_conflicts": conflicts, "noops": noops,
		"retries":          map[string]any{"bulk": 0, "search": 0},
		"throttled_millis": 0, "requests_per_second": -1.0, "throttled_until_millis": 0,
		"failures": failures,
	}
	status := 200
	if len(failures) > 0 {
		status = 409
	}
	return status, res, nil
}
