package esstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
)

// bulkItem is one item of a bulk response.
type bulkItem struct {
	ID     string      `json:"_id"`
	Status int         `json:"status"`
	Result string      `json:"result"`
	Error  *errorCause `json:"error"`
	raw    json.RawMessage
}

// bulk sends NDJSON lines to the bulk API with the store's refresh and
// returns the items in request order.
func (s *esDriver[T]) bulk(ctx context.Context, op string, lines [][]byte) ([]bulkItem, error) {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	_, body, esErr, err := s.do(ctx, op, esapi.BulkRequest{Index: s.index, Body: &buf, Refresh: string(s.refresh)})
	if err != nil {
		return nil, err
	}
	if esErr != nil {
		return nil, wrapES(op, esErr)
	}
	var res struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("%s: decode response: %w", op, err)
	}
	items := make([]bulkItem, len(res.Items))
	for i, m := range res.Items {
		for _, raw := range m {
			if err := json.Unmarshal(raw, &items[i]); err != nil {
				return nil, fmt.Errorf("%s: decode item: %w", op, err)
			}
			items[i].raw = raw
		}
	}
	return items, nil
}

func action(name string, meta obj) []byte {
	b, _ := json.Marshal(obj{name: meta})
	return b
}

// Insert indexes items as new documents with the bulk API (op_type create)
// and the store's refresh. An item whose integer primary key is zero gets
// the next value of the index's counter, written back into the item. A
// document whose _id exists already is dao.ErrDuplicate. Bulk writes are
// not atomic: when any item fails, the documents this call created are
// deleted again before the error is returned, and assigned keys are reset
// to zero in the items; other readers may see them in between. Unique
// indexes of the model other than the primary key are not enforced. A nil
// item is refused by the portable layer before anything is sent.
func (s *esDriver[T]) Insert(ctx context.Context, items []*T) error {
	docs := make([]map[string]any, len(items))
	var zeros []int
	var maxExplicit int64
	seen := map[string]bool{}
	for i, it := range items {
		doc, err := s.encodeDoc(it)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		docs[i] = doc
		id := s.model.ID(it)
		switch x := id.(type) {
		case int64:
			if x == 0 {
				zeros = append(zeros, i)
				continue
			}
			maxExplicit = max(maxExplicit, x)
		case uint64:
			if x == 0 {
				zeros = append(zeros, i)
				continue
			}
			if x > math.MaxInt64 {
				return fmt.Errorf("create: %w: primary key %d exceeds the long range", dao.ErrInvalidArgument, x)
			}
			maxExplicit = max(maxExplicit, int64(x))
		}
		did, err := docID(id)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		if seen[did] {
			return fmt.Errorf("create: %w: primary key %s twice in one batch", dao.ErrDuplicate, did)
		}
		seen[did] = true
	}
	if !s.pk.kind.textual() {
		first, err := s.allocate(ctx, int64(len(zeros)), maxExplicit)
		if err != nil {
			return err
		}
		for j, i := range zeros {
			if err := s.model.Apply(items[i], dao.Set{s.pk.name: first + int64(j)}); err != nil {
				return fmt.Errorf("create: assign id: %w", err)
			}
			docs[i][s.pk.name] = first + int64(j)
		}
	}
	resetIDs := func() {
		for _, i := range zeros {
			_ = s.model.Apply(items[i], dao.Set{s.pk.name: int64(0)})
		}
	}
	lines := make([][]byte, 0, 2*len(items))
	for i, it := range items {
		did, _ := docID(s.model.ID(it))
		src, err := json.Marshal(docs[i])
		if err != nil {
			resetIDs()
			return fmt.Errorf("create: %w: %w", dao.ErrInvalidArgument, err)
		}
		lines = append(lines, action("create", obj{"_id": did}), src)
	}
	res, err := s.bulk(ctx, "create", lines)
	if err != nil {
		resetIDs()
		return err
	}
	var failed *bulkItem
	var undo [][]byte
	for i := range res {
		if res[i].Error != nil || res[i].Status >= 300 {
			if failed == nil {
				failed = &res[i]
			}
			continue
		}
		undo = append(undo, action("delete", obj{"_id": res[i].ID}))
	}
	if failed == nil {
		return nil
	}
	resetIDs()
	var cause errorCause
	if failed.Error != nil {
		cause = *failed.Error
	}
	esErr := causeError(failed.Status, cause, failed.raw)
	op := "create " + failed.ID
	var result error
	if esErr.Status == 409 {
		result = fmt.Errorf("%s: %w: %w", op, dao.ErrDuplicate, esErr)
	} else {
		result = wrapES(op, esErr)
	}
	if len(undo) > 0 {
		if _, err := s.bulk(ctx, "create: undo", undo); err != nil {
			return fmt.Errorf("%w (and the documents created before it could not be deleted: %w)", result, err)
		}
	}
	return result
}

// allocate reserves n consecutive integer keys above both the counter and
// floor, and returns the first. The counter is one document of the sequence
// index updated with optimistic concurrency: read it (a real-time get, with
// its _seq_no and _primary_term), write the new value with if_seq_no and
// if_primary_term, and on a version conflict read again. One Create costs
// two round trips for the counter, whatever the batch size. With n == 0 it
// only raises the counter to floor, so later keys never collide with keys
// the caller chose.
func (s *esDriver[T]) allocate(ctx context.Context, n, floor int64) (int64, error) {
	const op = "create: allocate ids"
	for attempt := 0; ; attempt++ {
		_, body, esErr, err := s.do(ctx, op, esapi.GetRequest{Index: s.seqIndex, DocumentID: url.PathEscape(s.index)})
		if err != nil {
			return 0, err
		}
		var cur struct {
			Found       bool `json:"found"`
			SeqNo       int  `json:"_seq_no"`
			PrimaryTerm int  `json:"_primary_term"`
			Source      struct {
				Next int64 `json:"next"`
			} `json:"_source"`
		}
		if esErr != nil && esErr.Type != "" {
			return 0, fmt.Errorf("%w (has Migrate run?)", wrapES(op, esErr))
		}
		if err := json.Unmarshal(body, &cur); err != nil {
			return 0, fmt.Errorf("%s: decode response: %w", op, err)
		}
		base := max(cur.Source.Next, floor)
		if cur.Found && base+n == cur.Source.Next {
			return base + 1, nil
		}
		if n == 0 && base == 0 {
			return 1, nil
		}
		req := esapi.IndexRequest{Index: s.seqIndex, DocumentID: url.PathEscape(s.index)}
		if cur.Found {
			req.IfSeqNo, req.IfPrimaryTerm = ptr(cur.SeqNo), ptr(cur.PrimaryTerm)
		} else {
			req.OpType = "create"
		}
		if req.Body, err = jsonBody(obj{"next": base + n}); err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		_, _, esErr, err = s.do(ctx, op, req)
		if err != nil {
			return 0, err
		}
		if esErr == nil {
			return base + 1, nil
		}
		if esErr.Status != 409 || attempt >= 100 {
			return 0, wrapES(op, esErr)
		}
		// Another writer moved the counter: back off a little, then retry.
		d := time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(attempt+1, 20))))
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: %w", op, ctx.Err())
		case <-time.After(d):
		}
	}
}
