package esstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
)

// Get returns the document whose _id is key, the checked primary key,
// read in real time with the get API (no refresh needed). A missing
// document or index is an error wrapping dao.ErrNotFound and the 404
// *Error.
func (s *esDriver[T]) Get(ctx context.Context, key any) (T, error) {
	var zero T
	did, err := docID(key)
	if err != nil {
		return zero, err
	}
	op := "get API"
	_, body, esErr, err := s.do(ctx, op, esapi.GetRequest{Index: s.index, DocumentID: url.PathEscape(did)})
	if err != nil {
		return zero, err
	}
	if esErr != nil {
		return zero, wrapES(op, esErr)
	}
	var res struct {
		Found  bool            `json:"found"`
		Source json.RawMessage `json:"_source"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return zero, fmt.Errorf("%s: decode response: %w", op, err)
	}
	if !res.Found {
		return zero, fmt.Errorf("%s: %w", op, dao.ErrNotFound)
	}
	row, err := s.decodeDoc(res.Source)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", op, err)
	}
	return row, nil
}

// hit is one search hit.
type hit struct {
	ID          string            `json:"_id"`
	SeqNo       *int64            `json:"_seq_no"`
	PrimaryTerm *int64            `json:"_primary_term"`
	Source      json.RawMessage   `json:"_source"`
	Sort        []json.RawMessage `json:"sort"`
}

// search runs q (checked) and returns up to q.Limit hits (all when 0),
// paging with search_after over the total order of q.OrderBy. With
// onePage it sends a single request of at most the page size.
func (s *esDriver[T]) search(ctx context.Context, op string, q dao.Query, seqNo, source, onePage bool) ([]hit, error) {
	query, err := s.query(q.Where)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	sort, err := s.sort(q.OrderBy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out []hit
	var after []json.RawMessage
	for {
		size := s.pageSize
		if q.Limit > 0 && q.Limit-len(out) < size {
			size = q.Limit - len(out)
		}
		body := obj{"query": query, "sort": sort, "size": size, "track_total_hits": false, "seq_no_primary_term": seqNo}
		if !source {
			body["_source"] = false
		}
		if after != nil {
			body["search_after"] = after
		}
		r, err := jsonBody(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		_, resBody, esErr, err := s.do(ctx, op, esapi.SearchRequest{Index: []string{s.index}, Body: r})
		if err != nil {
			return nil, err
		}
		if esErr != nil {
			return nil, wrapES(op, esErr)
		}
		var res struct {
			Hits struct {
				Hits []hit `json:"hits"`
			} `json:"hits"`
		}
		if err := json.Unmarshal(resBody, &res); err != nil {
			return nil, fmt.Errorf("%s: decode response: %w", op, err)
		}
		out = append(out, res.Hits.Hits...)
		n := len(res.Hits.Hits)
		if onePage || n < size || (q.Limit > 0 && len(out) >= q.Limit) {
			return out, nil
		}
		after = res.Hits.Hits[n-1].Sort
		if len(after) == 0 {
			return nil, fmt.Errorf("%s: hit without sort values, cannot page", op)
		}
	}
}

// Select returns the documents matching q.Where in q.OrderBy order (the
// primary key breaking ties), at most q.Limit of them when it is > 0.
// Criteria and ordering on binary or object columns are
// dao.ErrInvalidArgument. Only refreshed documents are seen; the store's
// own writes refresh. Pages of the result are separate searches, so a
// read longer than one page is not a snapshot.
func (s *esDriver[T]) Select(ctx context.Context, q dao.Query) ([]T, error) {
	hits, err := s.search(ctx, "find", q, false, true, false)
	if err != nil {
		return nil, err
	}
	return s.decodeHits("find", hits)
}

func (s *esDriver[T]) decodeHits(op string, hits []hit) ([]T, error) {
	out := make([]T, len(hits))
	for i, h := range hits {
		row, err := s.decodeDoc(h.Source)
		if err != nil {
			return nil, fmt.Errorf("%s: document %s: %w", op, h.ID, err)
		}
		out[i] = row
	}
	return out, nil
}

// Count returns how many refreshed documents match where (the count API).
func (s *esDriver[T]) Count(ctx context.Context, where dao.Criteria) (int64, error) {
	query, err := s.query(where)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	r, err := jsonBody(obj{"query": query})
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	_, body, esErr, err := s.do(ctx, "count", esapi.CountRequest{Index: []string{s.index}, Body: r})
	if err != nil {
		return 0, err
	}
	if esErr != nil {
		return 0, wrapES("count", esErr)
	}
	var res struct {
		Count *int64 `json:"count"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Count == nil {
		return 0, fmt.Errorf("count: decode response %q: %v", body, err)
	}
	return *res.Count, nil
}
