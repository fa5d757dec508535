package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/retry"
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
		due := dueWaiting(now)
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
		n, err := retryConflict(ctx, func() (int64, error) {
			return c.store.Update(ctx, dao.And(dao.In(ColID, ids...), due), dao.Set{ColState: string(StateAvailable)})
		})
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

// attemptBack is what a release of a claimed job whose work never started
// writes besides clearing the lease: the attempt the claim counted, given
// back.
var attemptBack = dao.Set{ColAttempt: dao.Incr(-1)}

// dueWaiting is the criteria of the scheduled and retryable jobs whose
// time has come at now.
func dueWaiting(now time.Time) dao.Criteria {
	return dao.And(dao.In(ColState, string(StateScheduled), string(StateRetryable)), dao.Le(ColScheduledAt, now))
}

// Rescue finalizes the jobs no worker can run any more, which no claim
// takes: an available job whose attempts are all spent and whose lease
// ended or was released (its worker stopped or lost the database on its
// last attempt, or its work ignored the drain) is discarded, and one
// whose cancel request was never answered is cancelled, each with the
// lost attempt recorded in its errors. (A job whose lease ended with
// attempts left needs no rescue: it is claimable again, and the lost
// attempt is recorded with its next outcome.) So no job is left where
// neither a claim nor the rescuer reaches it. It changes at most
// [MaintenanceBatch] jobs per call, each guarded by the lease it read, and
// returns how many it changed. Errors: the store's, mapped.
func (c *Client) Rescue(ctx context.Context) (int64, error) {
	now, err := c.now(ctx)
	if err != nil {
		return 0, err
	}
	stuck := dao.And(
		dao.Eq(ColState, string(StateAvailable)),
		leaseFree(now),
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
			kind := EventJobDiscarded
			if state == StateCancelled {
				kind = EventJobCancelled
			}
			r.applyOutcome(set, now)
			c.emitJob(kind, r, now)
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

// conflictAttempts is how many times the scheduler runs one of its
// statements that the database ended with [dao.ErrConflict].
const conflictAttempts = 8

// conflictLongestWait bounds the wait between two runs of such a
// statement: the waits start at 20 ms and double up to it (internal/retry),
// under 0.6 s in all.
const conflictLongestWait = 100 * time.Millisecond

// retryConflict runs write, and runs it again while it fails with
// [dao.ErrConflict], at most conflictAttempts times in all and while ctx
// has not ended (internal/retry's backoff); it returns write's last
// result. On MySQL and MariaDB ErrConflict is a deadlock victim (error
// 1213), on PostgreSQL a serialization failure or a deadlock (SQLSTATE
// 40001, 40P01): the database rolled the one statement back, so running
// it again changes each row once. The scheduler's UPDATEs (state
// scheduled or retryable to available) meet the outcome writes of every
// client's workers, which move jobs the other way, and the scheduler of
// every client that runs maintenance; InnoDB breaks such a cycle of row
// locks by rolling one statement back (MySQL manual, "Deadlocks in
// InnoDB"), which is not an error worth a warning while a retry
// succeeds. On MySQL and MariaDB the statements run at the session's
// isolation, REPEATABLE READ by default, whose next-key locks on the
// schedule index make such cycles likelier: the scheduler of one client
// (ids in primary-key order) and the queue wake-up of another
// (makeDueAvailable, in schedule-index order) lock the same rows in
// opposite orders.
func retryConflict(ctx context.Context, write func() (int64, error)) (int64, error) {
	isConflict := func(err error) bool { return errors.Is(err, dao.ErrConflict) }
	return retry.While(ctx, conflictAttempts, conflictLongestWait, isConflict, write)
}
