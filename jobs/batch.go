package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// BatchKey is the key of a batch callback's metadata under which its
// [BatchCounts] are kept ([Row.BatchCounts] reads them).
const BatchKey = "batch"

// BatchOpts are the options of [Client.InsertBatch].
type BatchOpts struct {
	// Callback is the args of the batch's callback job, which runs once
	// every job of the batch is final. Required.
	Callback Args
	// CallbackOpts, optional, are the callback's insert options; it can
	// be neither unique nor in a sequence.
	CallbackOpts *InsertOpts
}

// BatchResult is what [Client.InsertBatch] inserted.
type BatchResult struct {
	// ID is the batch's id (32 hex digits), in each job's BatchID and in
	// the callback's BatchCallback.
	ID string
	// Jobs are the batch's jobs, in the order of the params.
	Jobs []InsertResult
	// Callback is the callback job, pending until the batch's jobs are
	// final.
	Callback *Row
}

// BatchCounts are a batch's size and, once its jobs are all final, their
// count by final state, as the callback's metadata holds them under
// [BatchKey].
type BatchCounts struct {
	// ID is the batch's id.
	ID string `json:"id"`
	// Total is the number of jobs inserted in the batch.
	Total int `json:"total"`
	// Done is true once the jobs are all final and the counts below set
	// (the callback was promoted).
	Done bool `json:"done"`
	// Completed, Cancelled and Discarded count the batch's jobs by final
	// state. Jobs deleted before the batch ended are in none of them.
	Completed int `json:"completed"`
	Cancelled int `json:"cancelled"`
	Discarded int `json:"discarded"`
}

// BatchCounts returns the batch counts of a batch's callback job (nil
// for another job, or metadata that does not hold them).
func (r *Row) BatchCounts() *BatchCounts {
	if r.BatchCallback == nil || r.Metadata == "" {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(r.Metadata), &obj) != nil {
		return nil
	}
	var bc BatchCounts
	if raw, ok := obj[BatchKey]; !ok || json.Unmarshal(raw, &bc) != nil {
		return nil
	}
	return &bc
}

// InsertBatch inserts params as one batch, and its callback job (opts):
// the callback is inserted pending ([StatePending]) with the batch's
// jobs, all in one statement where the backend allows (as
// [Client.InsertMany] inserts jobs that are not unique: together or not
// at all), and made available exactly once, when every job of the batch
// is final, with [BatchCounts] written into its metadata (its work reads
// them with [Row.BatchCounts]). The promotion is a write guarded by the
// callback's pending state, so clients that finish the batch's last
// jobs at the same moment promote it once; it follows the outcome
// writes, and the maintenance's [Client.Promote] catches up after a
// client that stopped in between. The jobs of a batch can be in
// sequences; none can be unique.
//
// Errors: dao.ErrInvalidArgument (nothing inserted) for no jobs, a nil
// callback, a unique job or callback, a callback in a sequence, and
// whatever [Client.InsertMany] refuses; the store's errors, mapped.
func (c *Client) InsertBatch(ctx context.Context, params []InsertParams, opts BatchOpts) (*BatchResult, error) {
	return c.insertBatch(ctx, c.store, params, opts, false)
}

// InsertBatchTx is [Client.InsertBatch] inside tx, the caller's open
// transaction (see [Client.InsertTx]).
func (c *Client) InsertBatchTx(ctx context.Context, tx any, params []InsertParams, opts BatchOpts) (*BatchResult, error) {
	store, err := c.txStore(tx)
	if err != nil {
		return nil, err
	}
	return c.insertBatch(ctx, store, params, opts, true)
}

// insertBatch builds the rows of the batch and its callback and inserts
// them through store.
func (c *Client) insertBatch(ctx context.Context, store dao.Store[Row], params []InsertParams, opts BatchOpts, inTx bool) (*BatchResult, error) {
	if len(params) == 0 {
		return nil, fmt.Errorf("jobs: insert batch: %w", argerr.Errorf("a batch of no jobs"))
	}
	if opts.Callback == nil {
		return nil, fmt.Errorf("jobs: insert batch: %w", argerr.Errorf("nil callback"))
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: insert batch: %w", err)
	}
	id, err := newBatchID()
	if err != nil {
		return nil, fmt.Errorf("jobs: insert batch: %w", err)
	}
	rows := make([]*Row, len(params), len(params)+1)
	for i, p := range params {
		if rows[i], err = c.newRow(p.Args, p.Opts, now); err != nil {
			return nil, fmt.Errorf("jobs: insert batch: job %d: %w", i, err)
		}
		if rows[i].UniqueKey != nil {
			return nil, fmt.Errorf("jobs: insert batch: job %d: %w", i, argerr.Errorf("a job of a batch cannot be unique"))
		}
		rows[i].BatchID = &id
	}
	cb, err := c.newRow(opts.Callback, opts.CallbackOpts, now)
	if err != nil {
		return nil, fmt.Errorf("jobs: insert batch: callback: %w", err)
	}
	if cb.UniqueKey != nil || cb.SequenceKey != nil {
		return nil, fmt.Errorf("jobs: insert batch: callback: %w", argerr.Errorf("a batch callback can be neither unique nor in a sequence"))
	}
	counts, _ := json.Marshal(BatchCounts{ID: id, Total: len(params)})
	if cb.Metadata, err = mergeObject(cb.Metadata, map[string]json.RawMessage{BatchKey: counts}); err != nil {
		return nil, fmt.Errorf("jobs: insert batch: callback: %w", err)
	}
	cb.State, cb.BatchCallback = StatePending, &id
	out, err := c.insertBuilt(ctx, store, append(rows, cb), inTx, now)
	if err != nil {
		return nil, fmt.Errorf("jobs: insert batch: %w", err)
	}
	return &BatchResult{ID: id, Jobs: out[:len(params)], Callback: out[len(params)].Job}, nil
}

// newBatchID returns a random batch id: 16 random bytes, in hex.
func newBatchID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// batchOpen are the stored states of a job that is not final.
var batchOpen = []any{string(StatePending), string(StateAvailable), string(StateScheduled), string(StateRetryable)}

// promoteBatch makes the callback of batch id available when every job
// of the batch is final, with the counts by final state in its metadata,
// and reports whether it did. The write is guarded by the callback's
// pending state: of promotions that race, one writes. Errors: the
// store's, mapped.
func (c *Client) promoteBatch(ctx context.Context, id string) (bool, error) {
	cbs, err := c.store.Find(ctx, dao.Query{Where: dao.And(dao.Eq(ColBatchCallback, id), dao.Eq(ColState, string(StatePending))), Limit: 1})
	if err != nil || len(cbs) == 0 {
		return false, err
	}
	open, err := c.store.Count(ctx, dao.And(dao.Eq(ColBatchID, id), dao.In(ColState, batchOpen...)))
	if err != nil || open > 0 {
		return false, err
	}
	cb := &cbs[0]
	bc := BatchCounts{ID: id, Done: true}
	if prev := cb.BatchCounts(); prev != nil {
		bc.Total = prev.Total
	}
	for _, s := range []struct {
		state State
		n     *int
	}{{StateCompleted, &bc.Completed}, {StateCancelled, &bc.Cancelled}, {StateDiscarded, &bc.Discarded}} {
		n, err := c.store.Count(ctx, dao.And(dao.Eq(ColBatchID, id), dao.Eq(ColState, string(s.state))))
		if err != nil {
			return false, err
		}
		*s.n = int(n)
	}
	raw, _ := json.Marshal(bc)
	md, err := mergeObject(cb.Metadata, map[string]json.RawMessage{BatchKey: raw})
	if err != nil {
		return false, err
	}
	if err := c.promote(ctx, cb, dao.Set{ColState: string(StateAvailable), ColMetadata: md}); err != nil {
		if errors.Is(err, dao.ErrConflict) {
			return false, nil // another promotion won
		}
		return false, err
	}
	return true, nil
}
