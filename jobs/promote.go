package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// A pending job ([StatePending]) waits for other jobs: a job of a
// sequence for the sequence's job before it, a batch's callback for the
// batch's jobs, a workflow's task for its dependencies. Promotion makes
// it available once what it waits for is final (or, for a workflow's
// task whose dependency did not complete, cancels it). It runs twice
// over: right after the outcomes that finalize jobs are written (the
// client's written hook queues their sequences, batches and workflows,
// and promoteLoop promotes them, batched), and as a maintenance
// task every [PromoteInterval] ([Client.Promote]), so that a client that died between
// the outcome write and the promotion leaves no job pending for ever.
// Each promotion is a conditional write the database enforces — the
// sequence's unique head index, the guard on the pending state — so that
// promotions that race, in one process or several, promote a job once.

// PromoteInterval is the period of the maintenance's promotion
// ([Client.Promote]), at least the client's tick: the promotion that
// follows each outcome write does the work, the maintenance's catches up
// after a client that stopped before it, after a job deleted or a
// transaction committed, at the cost of reading every pending job.
const PromoteInterval = time.Second

// waits are the sequences, batches and workflows whose pending jobs may
// be promoted, by key or id.
type waits struct {
	seqs, batches, flows map[string]bool
}

func newWaits() waits {
	return waits{seqs: map[string]bool{}, batches: map[string]bool{}, flows: map[string]bool{}}
}

// promotions collects the sequences, batches and workflows whose pending
// jobs may be promoted, for promoteLoop.
type promotions struct {
	mu    sync.Mutex
	w     waits
	ready chan struct{} // capacity 1: something was added
}

func newPromotions() *promotions {
	return &promotions{w: newWaits(), ready: make(chan struct{}, 1)}
}

// waitsOn reports whether r, a job that became final, may end another
// job's wait: it is in a sequence, a batch or a workflow.
func waitsOn(r *Row) bool {
	return r.SequenceKey != nil || r.BatchID != nil || r.WorkflowID != nil
}

// add adds the sequence, the batch and the workflow of r, a job that
// became final; it never blocks.
func (p *promotions) add(r *Row) {
	if !waitsOn(r) {
		return
	}
	p.mu.Lock()
	if r.SequenceKey != nil {
		p.w.seqs[*r.SequenceKey] = true
	}
	if r.BatchID != nil {
		p.w.batches[*r.BatchID] = true
	}
	if r.WorkflowID != nil {
		p.w.flows[*r.WorkflowID] = true
	}
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// take returns the sequences, batches and workflows added since the
// last take.
func (p *promotions) take() waits {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.w
	p.w = newWaits()
	return w
}

// promoteLoop promotes the sequences, batches and workflows add
// collected, until ctx ends; what is left then the maintenance
// promotes.
func (c *Client) promoteLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.promos.ready:
		}
		if _, err := c.promoteAll(ctx, c.promos.take()); err != nil && ctx.Err() == nil {
			c.log.Warn("promoting pending jobs failed; the maintenance will", "err", err)
		}
	}
}

// promoteAll promotes the sequences, batches and workflows of w and
// returns how many jobs it moved on (made available or scheduled, or
// cancelled: a workflow's task whose dependency did not complete).
// Errors: the store's, mapped; it goes on with the others after one and
// returns the first.
func (c *Client) promoteAll(ctx context.Context, w waits) (int64, error) {
	var n int64
	var first error
	for key := range w.seqs {
		r, err := c.promoteSequence(ctx, key)
		if err != nil && first == nil {
			first = err
		}
		if r != nil {
			n++
		}
	}
	for id := range w.batches {
		ok, err := c.promoteBatch(ctx, id)
		if err != nil && first == nil {
			first = err
		}
		if ok {
			n++
		}
	}
	for id := range w.flows {
		m, err := c.promoteWorkflow(ctx, id)
		if err != nil && first == nil {
			first = err
		}
		n += m
	}
	return n, first
}

// Promote makes available the pending jobs whose wait is over — the
// first pending job of each sequence no job holds, the callback of each
// batch whose jobs are all final, each task of a workflow whose
// dependencies completed — and cancels the tasks of a workflow whose
// dependency was cancelled or discarded (unless they ignore it), and
// returns how many jobs it moved on so. It
// reads every pending job (in pages of [MaintenanceBatch], by id), so it
// costs in proportion to the pending jobs. It is what the client's
// maintenance runs every [PromoteInterval] besides the promotion that follows each
// outcome write; calling it yourself is safe at any time (each promotion
// is a conditional write the database enforces). Errors: the store's,
// mapped.
func (c *Client) Promote(ctx context.Context) (int64, error) {
	var total int64
	var after int64
	for {
		rows, err := c.store.Find(ctx, dao.Query{
			Where:   dao.And(dao.Eq(ColState, string(StatePending)), dao.Gt(ColID, after)),
			OrderBy: []dao.Order{dao.Asc(ColID)},
			Limit:   MaintenanceBatch,
		})
		if err != nil || len(rows) == 0 {
			return total, err
		}
		after = rows[len(rows)-1].ID
		w := newWaits()
		for _, r := range rows {
			if r.SequenceKey != nil {
				w.seqs[*r.SequenceKey] = true
			}
			if r.BatchCallback != nil {
				w.batches[*r.BatchCallback] = true
			}
			if r.WorkflowID != nil {
				w.flows[*r.WorkflowID] = true
			}
		}
		if err := c.dropHeld(ctx, w.seqs); err != nil {
			return total, err
		}
		n, err := c.promoteAll(ctx, w)
		total += n
		if err != nil || len(rows) < MaintenanceBatch {
			return total, err
		}
	}
}

// dropHeld removes from seqs the sequences a job holds, in one read per
// [MaintenanceBatch] keys. Errors: the store's, mapped.
func (c *Client) dropHeld(ctx context.Context, seqs map[string]bool) error {
	keys := make([]any, 0, len(seqs))
	for k := range seqs {
		keys = append(keys, k)
	}
	for len(keys) > 0 {
		n := min(len(keys), MaintenanceBatch)
		held, err := c.store.Find(ctx, dao.Query{Where: dao.In(ColSequenceHead, keys[:n]...)})
		if err != nil {
			return err
		}
		for _, r := range held {
			delete(seqs, *r.SequenceHead)
		}
		keys = keys[n:]
	}
	return nil
}

// promoteNow promotes the sequence, batch and workflow of r, a job this
// client finalized outside an outcome write (a cancel, the rescuer), at
// once; a failure is logged, and the maintenance promotes at its next
// tick.
func (c *Client) promoteNow(ctx context.Context, r *Row) {
	if !waitsOn(r) {
		return
	}
	p := newPromotions()
	p.add(r)
	if _, err := c.promoteAll(ctx, p.take()); err != nil && ctx.Err() == nil {
		c.log.Warn("promoting pending jobs failed; the maintenance will", "id", r.ID, "err", err)
	}
}
