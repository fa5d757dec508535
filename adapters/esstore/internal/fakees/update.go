package fakees

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"strconv"
)

// updateByQuery runs the Write script on every visible document matching
// the query, in _id order. A document whose live version is no longer the
// visible one (written or deleted since the last refresh) is a version
// conflict: with conflicts=proceed it is counted and skipped; otherwise
// the request stops there and answers 409 with the failure, the documents
// updated before it staying updated.
func (ix *index) updateByQuery(sc Scripts, q url.Values, body []byte) (int, any, *apiError) {
	var req struct {
		Query  any `json:"query"`
		Script struct {
			Source string `json:"source"`
			Lang   string `json:"lang"`
			Params struct {
				Set  map[string]any         `json:"set"`
				Incr map[string]json.Number `json:"incr"`
			} `json:"params"`
		} `json:"script"`
	}
	if aerr := decode(body, &req); aerr != nil {
		return 0, nil, aerr
	}
	if sc.Write == "" || req.Script.Source != sc.Write {
		return 0, nil, fail(400, cause("script_exception", "fakees: unrecognized update script source",
			map[string]any{"lang": "painless", "index": ix.name, "index_uuid": ix.uuid}))
	}
	docs, aerr := ix.matching(sc, req.Query)
	if aerr != nil {
		return 0, nil, aerr
	}
	updated, conflicts, failures := 0, 0, []any{}
	for _, d := range docs {
		if cur := ix.live[d.id]; cur != d {
			conflicts++
			if q.Get("conflicts") == "proceed" {
				continue
			}
			detail := fmt.Sprintf("required seqNo [%d], primary term [%d]. but no document was found", d.seqNo, primaryTerm)
			if cur != nil {
				detail = fmt.Sprintf("required seqNo [%d], primary term [%d]. current document has seqNo [%d] and primary term [%d]",
					d.seqNo, primaryTerm, cur.seqNo, primaryTerm)
			}
			failures = append(failures, map[string]any{
				"index": ix.name, "id": d.id, "status": 409, "cause": ix.conflictCause(d.id, detail),
			})
			break
		}
		fields := maps.Clone(d.fields)
		maps.Copy(fields, req.Script.Params.Set)
		for f, n := range req.Script.Params.Incr {
			if fields[f] == nil {
				continue // null + n stays null
			}
			if fields[f], aerr = ix.add(fields[f], n); aerr != nil {
				return 0, nil, aerr
			}
		}
		source, err := json.Marshal(fields)
		if err != nil {
			return 0, nil, badRequest("illegal_argument_exception", "%v", err)
		}
		if _, aerr := ix.parseSource(d.id, source); aerr != nil {
			return 0, nil, aerr
		}
		ix.put(d.id, source, fields)
		updated++
	}
	if q.Has("refresh") && q.Get("refresh") != "false" {
		ix.refresh(url.Values{"refresh": {"true"}})
	}
	status := 200
	if len(failures) > 0 {
		status = 409
	}
	return status, map[string]any{
		"took": 1, "timed_out": false, "total": len(docs), "updated": updated, "deleted": 0, "batches": 1,
		"version_conflicts": conflicts, "noops": 0, "retries": map[string]any{"bulk": 0, "search": 0},
		"throttled_millis": 0, "requests_per_second": -1.0, "throttled_until_millis": 0, "failures": failures,
	}, nil
}

// add is the script's cur + n for a long n: long arithmetic on an integral
// current value, double arithmetic otherwise.
func (ix *index) add(cur any, n json.Number) (any, *apiError) {
	c, ok := cur.(json.Number)
	inc, err := n.Int64()
	if !ok || err != nil {
		return nil, fail(400, cause("script_exception", fmt.Sprintf("runtime error: cannot add %v to %v", n, cur),
			map[string]any{"lang": "painless", "index": ix.name, "index_uuid": ix.uuid}))
	}
	if i, err := c.Int64(); err == nil {
		return json.Number(strconv.FormatInt(i+inc, 10)), nil
	}
	f, _ := c.Float64()
	return json.Number(strconv.FormatFloat(f+float64(inc), 'g', -1, 64)), nil
}
