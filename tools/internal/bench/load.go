package bench

import (
	"context"
	"fmt"

	"github.com/claimstore/claimstore/dao"
)

// DefaultLoadBatch is the number of rows one insert statement carries while
// loading: 1000 rows of 5 columns stay below the bound-parameter limits of
// every supported backend (SQLite's 32766 is the smallest).
const DefaultLoadBatch = 1000

// Load inserts rows pending jobs with ids 1..rows by calling insert once per
// batch of at most batch rows (DefaultLoadBatch when batch <= 0), in id
// order. It returns the first insert error, wrapped with the batch's first
// id, or an error wrapping [dao.ErrInvalidArgument] when rows < 0.
func Load(ctx context.Context, rows int64, batch int, insert func(ctx context.Context, jobs []Job) error) error {
	if rows < 0 {
		return fmt.Errorf("bench: load: %w: negative row count %d", dao.ErrInvalidArgument, rows)
	}
	if batch <= 0 {
		batch = DefaultLoadBatch
	}
	for first := int64(1); first <= rows; first += int64(batch) {
		n := int(min(int64(batch), rows-first+1))
		if err := insert(ctx, NewJobs(first, n)); err != nil {
			return fmt.Errorf("bench: load rows from id %d: %w", first, err)
		}
	}
	return nil
}

// StoreInserter returns an insert function for [Load] that writes through
// store.Create, one batch per call.
func StoreInserter(store dao.Store[Job]) func(ctx context.Context, jobs []Job) error {
	return func(ctx context.Context, jobs []Job) error {
		ptrs := make([]*Job, len(jobs))
		for i := range jobs {
			ptrs[i] = &jobs[i]
		}
		return store.Create(ctx, ptrs...)
	}
}

// StoreClaimFunc returns a [ClaimFunc] that calls store.Claim with
// [ClaimRequest].
func StoreClaimFunc(store dao.Store[Job]) ClaimFunc {
	return func(ctx context.Context, w, limit int) ([]Job, error) {
		return store.Claim(ctx, ClaimRequest(w, limit))
	}
}

// StorePending returns a [BurnConfig.Pending] function that looks for one
// pending row with store.Find (limit 1, smallest id first), which an index
// on (status, id) or a partial index on the pending rows answers at once.
func StorePending(store dao.Store[Job]) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		rows, err := store.Find(ctx, dao.Query{Where: PendingCriteria(), OrderBy: []dao.Order{dao.Asc("id")}, Limit: 1})
		return len(rows) > 0, err
	}
}

// StoreRemaining returns a [BurnConfig.Remaining] function that counts the
// pending rows with store.Count.
func StoreRemaining(store dao.Store[Job]) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) { return store.Count(ctx, PendingCriteria()) }
}
