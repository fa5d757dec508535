package jobs

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/retry"
)

// maintain runs the maintenance until ctx ends, as dispatch maintenance
// tasks through its leader gate (on the leader only when leader is set):
// every tick the scheduler, every RescueInterval the rescuer, every
// RetentionInterval the retention sweep.
func (c *Client) maintain(ctx context.Context, leader func(ctx context.Context) bool) {
	counted := func(run func(context.Context) (int64, error)) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := run(ctx)
			return err
		}
	}
	m := &dispatch.Maintenance{Every: c.cfg.PollInterval, Leader: leader, Tasks: []dispatch.Task{
		{Name: "scheduler", Run: counted(c.Schedule)},
		{Name: "promoter", Run: counted(c.Promote), Every: PromoteInterval},
		{Name: "rescuer", Run: counted(c.Rescue), Every: c.cfg.RescueInterval},
		{Name: "retention sweep", Run: counted(c.Sweep), Every: c.cfg.RetentionInterval},
	}}
	if err := m.Run(ctx, c.log); err != nil {
		c.log.Error("maintenance refused", "err", err)
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
		n, err := c.retryConflict(ctx, func() (int64, error) {
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
// last attempt, or its work ignored the drain) is discarded, and a job
// with a cancel request that still waits (available, retryable or
// scheduled: its work ended on its own after the request, and its client
// stopped before it could finalize it, see finishCancelled) is
// cancelled. An attempt that ended without an outcome is recorded in the
// job's errors as lost. (A job whose lease ended with attempts left needs
// no rescue: it is claimable again, and the lost attempt is recorded with
// its next outcome.) So no job is left where neither a claim nor the
// rescuer reaches it. It changes at most [MaintenanceBatch] jobs per
// call, each guarded by the lease it read, and returns how many it
// changed. Errors: the store's, mapped.
func (c *Client) Rescue(ctx context.Context) (int64, error) {
	return c.finalizeStuck(ctx, dao.Criteria{})
}

// stuck is the criteria, at now, of the jobs that no claim takes and
// that wait for nothing: attempts spent, or a cancel request that its
// work ended without answering. A job whose cancel request is answered
// is final already. Its lease is free: ended at now, or released (no
// owner) whatever its time says, since an outcome's release stamps the
// time of the writer's clock, which may run a few milliseconds ahead of
// this client's (finishCancelled reads right after the write).
func stuck(now time.Time) dao.Criteria {
	return dao.And(
		dao.Or(leaseFree(now), dao.Eq(ColLeaseOwner, "")),
		dao.Or(
			dao.And(dao.Eq(ColState, string(StateAvailable)), dao.Or(dao.GeField(ColAttempt, ColMaxAttempts), dao.NotNull(ColCancelRequestedAt))),
			dao.And(dao.In(ColState, string(StateRetryable), string(StateScheduled)), dao.NotNull(ColCancelRequestedAt)),
		),
	)
}

// finalizeStuck finalizes at most [MaintenanceBatch] of the stuck jobs
// (see stuck) that also match only: cancelled when a cancel request
// waits, discarded otherwise, the attempt recorded as lost when its
// outcome is not in the job's errors, each write guarded by the lease it
// read. It returns how many it changed. Errors: the store's, mapped.
func (c *Client) finalizeStuck(ctx context.Context, only dao.Criteria) (int64, error) {
	now, err := c.now(ctx)
	if err != nil {
		return 0, err
	}
	where := dao.And(only, stuck(now))
	rows, err := c.store.Find(ctx, dao.Query{Where: where, Limit: MaintenanceBatch})
	if err != nil {
		return 0, err
	}
	var total int64
	for i := range rows {
		r := &rows[i]
		state, kind := StateDiscarded, EventJobDiscarded
		if r.CancelRequestedAt != nil {
			state, kind = StateCancelled, EventJobCancelled
		}
		var lost *AttemptError
		if !attemptRecorded(r) {
			lost = &AttemptError{Attempt: r.Attempt, At: now, Error: attemptLost}
		}
		set := dao.Set{ColState: string(state), ColFinalizedAt: now, ColErrors: appendErrors(r, now, lost), ColLeaseOwner: ""}
		keepUniqueIn(r, state, set)
		n, err := c.store.Update(ctx, dao.And(dao.Eq(ColID, r.ID), dao.Eq(ColLeaseOwner, r.LeaseOwner), where), set)
		if err != nil {
			return total, err
		}
		if n == 1 {
			if lost != nil {
				c.log.Warn("job rescued: its last attempt ended without an outcome", "id", r.ID, "kind", r.Kind, "state", state)
			} else {
				c.log.Info("job cancelled: its cancel request came while it ran", "id", r.ID, "kind", r.Kind, "was", r.State)
			}
			r.applyOutcome(set, now)
			c.emitJob(kind, r, now)
			c.promoteNow(ctx, r)
		}
		total += n
	}
	return total, nil
}

// attemptRecorded reports whether r's errors hold a record of its current
// attempt (or it never ran).
func attemptRecorded(r *Row) bool {
	if r.Attempt == 0 {
		return true
	}
	errs, _ := r.AttemptErrors()
	return slices.ContainsFunc(errs, func(e AttemptError) bool { return e.Attempt == r.Attempt })
}

// finishCancelled finalizes, as finalizeStuck does, the jobs of ids that
// a cancel request left waiting: their work failed, snoozed or was
// released after [Client.Cancel] asked for it and before this client
// read the request, so the outcome its worker wrote made them wait
// again. Run calls it right after those outcomes are written (see
// written), so the job reads cancelled at once rather than after the
// rescuer's next run. Errors: the store's, mapped.
func (c *Client) finishCancelled(ctx context.Context, ids []int64) error {
	for len(ids) > 0 {
		n := min(len(ids), MaintenanceBatch)
		keys := make([]any, n)
		for i, id := range ids[:n] {
			keys[i] = id
		}
		if _, err := c.finalizeStuck(ctx, dao.In(ColID, keys...)); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// recheck collects the ids of jobs whose outcome made them wait again
// (see written), for finishCancelled.
type recheck struct {
	mu    sync.Mutex
	ids   []int64
	ready chan struct{} // capacity 1: ids were added
}

func newRecheck() *recheck { return &recheck{ready: make(chan struct{}, 1)} }

// add adds id; it never blocks.
func (q *recheck) add(id int64) {
	q.mu.Lock()
	q.ids = append(q.ids, id)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the ids added since the last take.
func (q *recheck) take() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := q.ids
	q.ids = nil
	return ids
}

// recheckLoop runs finishCancelled on the ids written adds, until ctx
// ends; what is left then the rescuer finalizes.
func (c *Client) recheckLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.recheck.ready:
		}
		if err := c.finishCancelled(ctx, c.recheck.take()); err != nil && ctx.Err() == nil {
			c.log.Warn("finalizing the jobs whose cancel request came while they ran failed; the rescuer will", "err", err)
		}
	}
}

// Sweep deletes the final jobs older than their retention
// (CompletedRetention, CancelledRetention, DiscardedRetention after
// FinalizedAt), in statements of at most [MaintenanceBatch] jobs, until
// none is left, and returns how many it deleted. A statement the database
// ends as a deadlock victim runs again (Client.retryConflict): on MySQL and
// MariaDB its next-key locks on the state index meet the outcome writes
// that move jobs into a final state. Errors: the store's, mapped.
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
			// A job that holds its sequence after its end (see
			// SequenceOpts) is kept: its deletion would let the
			// sequence go on.
			old := dao.And(dao.Eq(ColState, string(s.state)), dao.Lt(ColFinalizedAt, now.Add(-s.keep)), dao.IsNull(ColSequenceHead))
			n, err := c.retryConflict(ctx, func() (int64, error) { return c.store.Delete(ctx, old, MaintenanceBatch) })
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

// conflictAttempts is how many times the scheduler or the sweep runs one
// of its statements that the database ended with [dao.ErrConflict].
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
//
// Every run after the first is counted in Stats.ConflictRetries.
func (c *Client) retryConflict(ctx context.Context, write func() (int64, error)) (int64, error) {
	isConflict := func(err error) bool { return errors.Is(err, dao.ErrConflict) }
	runs := 0
	return retry.While(ctx, conflictAttempts, conflictLongestWait, isConflict, func() (int64, error) {
		if runs > 0 {
			c.stats.conflicts.Add(1)
		}
		runs++
		return write()
	})
}
