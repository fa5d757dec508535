package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/sweep"
)

// Requeue moves messages back to pending so that relays publish them again:
// retry count reset to 0, retry time and lease cleared, LastError kept for
// the record. It touches only messages in one of statuses, which may hold
// [StatusFailed] and [StatusAbandoned] (empty means both); with ids it
// touches only those messages, without ids every such message. It returns
// the number of messages requeued, in one UPDATE per 1000 ids (one in all
// when no ids are given).
//
// Errors: [dao.ErrInvalidArgument] for another status; store errors wrapped.
func (r *Repository) Requeue(ctx context.Context, statuses []Status, ids ...int64) (int64, error) {
	if len(statuses) == 0 {
		statuses = []Status{StatusFailed, StatusAbandoned}
	}
	for _, s := range statuses {
		if s != StatusFailed && s != StatusAbandoned {
			return 0, fmt.Errorf("outbox: requeue: %w", argerr.Errorf("only failed and abandoned messages can be requeued, not %q", s))
		}
	}
	set := dao.Set{
		ColStatus:      string(StatusPending),
		ColRetryCount:  0,
		ColNextRetryAt: nil,
		ColLockedBy:    "",
		ColLockedUntil: nil,
	}
	if len(ids) == 0 {
		n, err := r.store.Update(ctx, statusIn(statuses...), set)
		if err != nil {
			return n, fmt.Errorf("outbox: requeue: %w", err)
		}
		return n, nil
	}
	var total int64
	for chunk := range slices.Chunk(dedupe(ids), markChunk) {
		n, err := r.store.Update(ctx, dao.And(idCriteria(chunk), statusIn(statuses...)), set)
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: requeue: %w", err)
		}
	}
	return total, nil
}

// PurgeRequest selects the messages a retention sweep deletes.
type PurgeRequest struct {
	// Status is [StatusPublished] (aged by PublishedAt) or
	// [StatusAbandoned] (aged by LastProcessedAt).
	Status Status
	// OlderThan deletes messages whose age is more than this; >= 0.
	OlderThan time.Duration
	// BatchSize is the most rows one DELETE removes; default 1000.
	BatchSize int
	// MaxBatches stops the sweep after this many batches; 0 means until no
	// matching row is left.
	MaxBatches int
}

// Purge deletes old published or abandoned messages in bounded batches
// ([dao.Store.Delete] with a limit), until none is left or MaxBatches is
// reached, and returns the number it deleted. Sweeps may run at the same
// time on many servers: a row is deleted once and counted by the sweep that
// deleted it, and a batch that fails with a retryable error
// ([dao.IsRetryable], such as a deadlock between two sweeps) is retried
// after a short pause, up to 5 times.
//
// Errors: [dao.ErrInvalidArgument] for another status, a negative age or
// batch size; store and context errors wrapped, with the count so far
// (among them that of a failed first read of the database's clock, before
// any delete).
func (r *Repository) Purge(ctx context.Context, req PurgeRequest) (int64, error) {
	var col string
	switch req.Status {
	case StatusPublished:
		col = ColPublishedAt
	case StatusAbandoned:
		col = ColLastProcessedAt
	default:
		return 0, fmt.Errorf("outbox: purge: %w", argerr.Errorf("only published and abandoned messages can be purged, not %q", req.Status))
	}
	if req.OlderThan < 0 || req.BatchSize < 0 || req.MaxBatches < 0 {
		return 0, fmt.Errorf("outbox: purge: %w", argerr.Errorf("negative age, batch size or batch count"))
	}
	if req.BatchSize == 0 {
		req.BatchSize = 1000
	}
	now, err := r.time(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: purge: %w", err)
	}
	where := dao.And(dao.Eq(ColStatus, string(req.Status)), dao.Lt(col, now.Add(-req.OlderThan)))
	total, err := sweep.Delete(ctx, r.store, where, req.BatchSize, req.MaxBatches)
	if err != nil {
		return total, fmt.Errorf("outbox: purge: %w", err)
	}
	return total, nil
}
