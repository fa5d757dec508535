package esstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
)

// Update applies set to every refreshed document matching where, with the
// update-by-query API, the fixed WriteScript and the values as params, and
// refresh=true. It returns the number of documents updated. Set values and
// increments are applied by the script on the server: update by query
// changes documents only through a script, and an increment must add to
// each document's current value. The script guards nothing: a document
// changed by someone else while the update runs (update by query's own
// version check) aborts it with an error wrapping dao.ErrConflict; the
// documents updated before stay updated and are counted in the returned
// number.
func (s *esDriver[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	query, err := s.query(where)
	if err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	plain, incr, err := s.setParams(set)
	if err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	r, err := jsonBody(obj{"query": query, "script": obj{
		"source": WriteScript, "lang": "painless",
		"params": obj{"set": plain, "incr": incr},
	}})
	if err != nil {
		return 0, fmt.Errorf("update: %w", err)
	}
	status, body, esErr, err := s.do(ctx, "update", esapi.UpdateByQueryRequest{
		Index: []string{s.index}, Body: r, Refresh: ptr(true), Conflicts: "abort",
	})
	if err != nil {
		return 0, err
	}
	var res struct {
		Updated  int64 `json:"updated"`
		TimedOut bool  `json:"timed_out"`
		Failures []struct {
			ID     string     `json:"id"`
			Status int        `json:"status"`
			Cause  errorCause `json:"cause"`
		} `json:"failures"`
	}
	if esErr != nil && esErr.Type != "" {
		return 0, wrapES("update", esErr)
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return 0, fmt.Errorf("update: decode response: %w", err)
	}
	if len(res.Failures) > 0 {
		f := res.Failures[0]
		st := f.Status
		if st == 0 {
			st = status
		}
		return res.Updated, wrapES("update "+f.ID, causeError(st, f.Cause, body))
	}
	if esErr != nil {
		return res.Updated, wrapES("update", esErr)
	}
	if res.TimedOut {
		return res.Updated, fmt.Errorf("update: timed out after %d documents", res.Updated)
	}
	return res.Updated, nil
}

// Delete removes at most limit documents matching where, smallest primary
// keys first: it searches the victims' _id, _seq_no and _primary_term
// (sorted by primary key, at most one page) and deletes them with one bulk
// request, each delete guarded by if_seq_no and if_primary_term so that a
// document changed since the search (and perhaps no longer matching) is
// left alone; it repeats while the limit is not reached and more may match.
// Documents already gone or changed are not counted; after a round with
// changed documents it searches again (at most eight such rounds). It is
// idempotent.
func (s *esDriver[T]) Delete(ctx context.Context, where dao.Criteria, limit int) (int64, error) {
	var deleted int64
	for conflictRounds := 0; deleted < int64(limit) && conflictRounds < 8; {
		want := min(limit-int(deleted), s.pageSize)
		q := dao.Query{Where: where, OrderBy: []dao.Order{{Field: s.pk.name}}, Limit: want}
		hits, err := s.search(ctx, "delete: search", q, true, false, true)
		if err != nil {
			return deleted, err
		}
		if len(hits) == 0 {
			break
		}
		lines := make([][]byte, len(hits))
		for i, h := range hits {
			if h.SeqNo == nil || h.PrimaryTerm == nil {
				return deleted, fmt.Errorf("delete: hit %s without _seq_no", h.ID)
			}
			lines[i] = action("delete", obj{"_id": h.ID, "if_seq_no": *h.SeqNo, "if_primary_term": *h.PrimaryTerm})
		}
		items, err := s.bulk(ctx, "delete", lines)
		if err != nil {
			return deleted, err
		}
		conflicts := 0
		for _, it := range items {
			switch {
			case it.Status == 200 && it.Result == "deleted":
				deleted++
			case it.Status == 404:
			case it.Status == 409:
				conflicts++
			default:
				var cause errorCause
				if it.Error != nil {
					cause = *it.Error
				}
				return deleted, wrapES("delete "+it.ID, causeError(it.Status, cause, it.raw))
			}
		}
		if conflicts > 0 {
			conflictRounds++
		} else if len(hits) < want {
			break // no more matching documents
		}
	}
	return deleted, nil
}
