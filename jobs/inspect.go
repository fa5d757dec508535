package jobs

import (
	"cmp"
	"context"
	"fmt"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// BatchInfo is the state of one batch ([Client.Batch]).
type BatchInfo struct {
	// ID is the batch's id.
	ID string
	// Total is the number of jobs inserted in the batch, as its callback
	// records it (0 when the callback was deleted).
	Total int
	// Counts are the batch's jobs by state (running told apart from
	// available); deleted jobs are in none. They are read one state
	// after another, not at one instant: a job whose state changes
	// meanwhile may be counted in two states or in none. Once the batch
	// ended, the callback's [Row.BatchCounts] holds counts taken when
	// every job was final.
	Counts map[State]int64
	// Callback is the batch's callback job, nil when it was deleted; its
	// [Row.BatchCounts] has Done set once the batch ended.
	Callback *Row
}

// Batch returns the state of batch id: its jobs counted by state and its
// callback job. It reads one count per state through the batch index,
// and the callback. Errors: dao.ErrInvalidArgument for an empty id;
// dao.ErrNotFound when the table holds neither a job nor the callback of
// batch id; the store's errors, mapped.
func (c *Client) Batch(ctx context.Context, id string) (*BatchInfo, error) {
	if id == "" {
		return nil, fmt.Errorf("jobs: batch: %w", argerr.Errorf("empty batch id"))
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: batch %s: %w", id, err)
	}
	info := &BatchInfo{ID: id, Counts: map[State]int64{}}
	cbs, err := c.store.Find(ctx, dao.Query{Where: dao.Eq(ColBatchCallback, id), Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("jobs: batch %s: %w", id, err)
	}
	if len(cbs) > 0 {
		info.Callback = &cbs[0]
		info.Callback.present(now)
		if bc := info.Callback.BatchCounts(); bc != nil {
			info.Total = bc.Total
		}
	}
	var jobs int64
	for _, s := range States() {
		where, _ := stateCriteria(s, now)
		n, err := c.store.Count(ctx, dao.And(dao.Eq(ColBatchID, id), where))
		if err != nil {
			return nil, fmt.Errorf("jobs: batch %s: count %s: %w", id, s, err)
		}
		if n > 0 {
			info.Counts[s] = n
		}
		jobs += n
	}
	if jobs == 0 && info.Callback == nil {
		return nil, fmt.Errorf("jobs: batch %s: %w", id, dao.ErrNotFound)
	}
	return info, nil
}

// SequenceInfo is the state of one sequence ([Client.Sequences]).
type SequenceInfo struct {
	// Key is the sequence's key.
	Key string
	// Head is the job that holds the sequence: it runs, waits for its
	// retry, or ended in a state the sequence does not go on after (a
	// discarded job without ContinueOnDiscarded: the sequence is blocked
	// until it is retried or deleted). Nil when no job holds it.
	Head *Row
	// Waiting is the number of the sequence's pending jobs, which run
	// one at a time after the head.
	Waiting int64
}

// SequenceParams selects the sequences [Client.Sequences] lists.
type SequenceParams struct {
	// Key, when set, lists this sequence only (also when no job holds
	// it).
	Key string
	// Queue, when set, lists the sequences whose head is in this queue.
	Queue string
	// Limit is the most sequences listed; default 100, at most
	// [MaxListLimit].
	Limit int
}

// Sequences lists the sequences that a job holds, oldest head first
// (lowest id), with the number of their jobs waiting behind it: one read
// of the heads through the sequence-head index, then one count of the
// pending jobs per sequence through the sequence index. A sequence whose
// jobs all ended, or that waits between a head's end and the next
// promotion, has no head and is listed only when p.Key names it. Errors:
// dao.ErrInvalidArgument for a limit out of range or an invalid queue
// name; the store's errors, mapped.
func (c *Client) Sequences(ctx context.Context, p SequenceParams) ([]SequenceInfo, error) {
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return nil, fmt.Errorf("jobs: sequences: %w", argerr.Errorf("limit %d: use 0 to %d", p.Limit, MaxListLimit))
	}
	if p.Queue != "" {
		if err := CheckQueue(p.Queue); err != nil {
			return nil, fmt.Errorf("jobs: sequences: %w", err)
		}
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: sequences: %w", err)
	}
	where := []dao.Criteria{dao.NotNull(ColSequenceHead)}
	if p.Key != "" {
		where = []dao.Criteria{dao.Eq(ColSequenceHead, p.Key)}
	}
	if p.Queue != "" {
		where = append(where, dao.Eq(ColQueue, p.Queue))
	}
	heads, err := c.store.Find(ctx, dao.Query{Where: dao.And(where...), OrderBy: []dao.Order{dao.Asc(ColID)}, Limit: cmp.Or(p.Limit, 100)})
	if err != nil {
		return nil, fmt.Errorf("jobs: sequences: %w", err)
	}
	out := make([]SequenceInfo, 0, len(heads))
	for i := range heads {
		h := &heads[i]
		h.present(now)
		out = append(out, SequenceInfo{Key: *h.SequenceHead, Head: h})
	}
	if p.Key != "" && len(out) == 0 {
		out = append(out, SequenceInfo{Key: p.Key})
	}
	for i := range out {
		n, err := c.store.Count(ctx, dao.And(dao.Eq(ColSequenceKey, out[i].Key), dao.Eq(ColState, string(StatePending))))
		if err != nil {
			return nil, fmt.Errorf("jobs: sequences: count %s: %w", out[i].Key, err)
		}
		out[i].Waiting = n
	}
	if p.Key != "" && out[0].Head == nil && out[0].Waiting == 0 {
		return []SequenceInfo{}, nil
	}
	return out, nil
}
