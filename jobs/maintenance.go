package jobs

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// maintain runs the maintenance until ctx ends, on the leader only when
// leader is set: every tick the scheduler, every RescueInterval the
// rescuer, every RetentionInterval the retention sweep.
func (c *Client) maintain(ctx context.Context, leader func(ctx context.Context) bool) {
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	var lastRescue, lastRetention time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if leader != nil && !leader(ctx) {
			continue
		}
		if _, err := c.Schedule(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("scheduler failed", "err", err)
		}
		if time.Since(lastRescue) >= c.cfg.RescueInterval {
			lastRescue = time.Now()
			if _, err := c.Rescue(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("rescuer failed", "err", err)
			}
		}
		if time.Since(lastRetention) >= c.cfg.RetentionInterval {
			lastRetention = time.Now()
			if _, err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("retention sweep failed", "err", err)
			}
		}
	}
}

// Schedule makes the scheduled and retryable jobs whose time has come
// available, in statements of at most [MaintenanceBatch] jobs, wakes the
// local queues they belong to, and returns how many it changed. It is
// what the client's maintenance runs every tick; calling it yourself is
// safe at any time (each job is changed once, guarded by its state).
// Errors: the store's, mapped.
func (c *Client) Schedule(ctx context.Context) (int64, error) {
	var total int64
	for {
		now, err := c.now(ctx)
		if err != nil {
			return total, err
		}
		due := dao.And(dao.In(ColState, string(StateScheduled), string(StateRetryable)), dao.Le(ColScheduledAt, now))
		rows, err := c.store.Find(ctx, dao.Query{Where: due, OrderBy: []dao.Order{dao.Asc(ColScheduledAt)}, Limit: MaintenanceBatch})
		if err != nil || len(rows) == 0 {
			return total, err
		}
		ids := make([]any, len(rows))
		queues := map[string]bool{}
		for i, r := range rows {
			ids[i] = r.ID
			queues[r.Queue] = true
		}
		n, err := c.store.Update(ctx, dao.And(dao.In(ColID, ids...), due), dao.Set{ColState: string(StateAvailable)})
		total += n
		if err != nil {
			return total, err
		}
		for q := range queues {
			c.wake(q)
		}
		if len(rows) < MaintenanceBatch {
			return total, nil
		}
	}
}

// Rescue finalizes the jobs no worker can run any more: a job whose lease
// ended while it ran (its worker stopped or lost the database) on its
// last attempt is discarded, and one whose cancel request was never
// answered is cancelled, each with the lost attempt recorded in its
// errors. (A job whose lease ended with attempts left needs no rescue: it
// is claimable again, and the lost attempt is recorded with its next
// outcome.) It changes at most [MaintenanceBatch] jobs per call, each
// guarded by the lease it read, and returns how many it changed. Errors:
// the store's, mapped.
func (c *Client) Rescue(ctx context.Context) (int64, error) {
	now, err := c.now(ctx)
	if err != nil {
		return 0, err
	}
	stuck := dao.And(
		dao.Eq(ColState, string(StateAvailable)),
		dao.Ne(ColLeaseOwner, ""),
		dao.Le(ColLeaseUntil, now),
		dao.Or(dao.GeField(ColAttempt, ColMaxAttempts), dao.NotNull(ColCancelRequestedAt)),
	)
	rows, err := c.store.Find(ctx, dao.Query{Where: stuck, Limit: MaintenanceBatch})
	if err != nil {
		return 0, err
	}
	var total int64
	for i := range rows {
		r := &rows[i]
		state := StateDiscarded
		if r.CancelRequestedAt != nil {
			state = StateCancelled
		}
		lost := &AttemptError{Attempt: r.Attempt, At: now, Error: "attempt lost: its lease ended before an outcome was written (worker stopped or unreachable)"}
		set := dao.Set{ColState: string(state), ColFinalizedAt: now, ColErrors: appendErrors(r, now, lost), ColLeaseOwner: ""}
		keepUniqueIn(r, state, set)
		n, err := c.store.Update(ctx, dao.And(dao.Eq(ColID, r.ID), dao.Eq(ColLeaseOwner, r.LeaseOwner), stuck), set)
		if err != nil {
			return total, err
		}
		if n == 1 {
			c.log.Warn("job rescued: its lease ended on its last attempt", "id", r.ID, "kind", r.Kind, "state", state)
		}
		total += n
	}
	return total, nil
}

// Sweep deletes the final jobs older than their retention
// (CompletedRetention, CancelledRetention, DiscardedRetention after
// FinalizedAt), in statements of at most [MaintenanceBatch] jobs, until
// none is left, and returns how many it deleted. Errors: the store's,
// mapped.
func (c *Client) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for _, s := range []struct {
		state State
		keep  time.Duration
	}{
		{StateCompleted, c.cfg.CompletedRetention},
		{StateCancelled, c.cfg.CancelledRetention},
		{StateDiscarded, c.cfg.DiscardedRetention},
	} {
		if s.keep < 0 {
			continue
		}
		for {
			now, err := c.now(ctx)
			if err != nil {
				return total, err
			}
			n, err := c.store.Delete(ctx, dao.And(dao.Eq(ColState, string(s.state)), dao.Lt(ColFinalizedAt, now.Add(-s.keep))), MaintenanceBatch)
			total += n
			if err != nil {
				return total, err
			}
			if n < MaintenanceBatch {
				break
			}
		}
	}
	return total, nil
}
