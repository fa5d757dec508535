package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/retry"
)

// Get returns the job with id (its state running when a worker holds
// it). Errors: dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Get(ctx context.Context, id int64) (*Row, error) {
	r, err := c.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("jobs: get %d: %w", id, err)
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: get %d: %w", id, err)
	}
	r.present(now)
	return &r, nil
}

// ListParams selects jobs for [Client.List]. Zero fields select all.
type ListParams struct {
	// States selects jobs in these states (running included).
	States []State
	// Queue and Kind select jobs of one queue or kind.
	Queue, Kind string
	// BeforeID, when > 0, lists jobs whose id is smaller: the next page
	// after a page whose last id it is.
	BeforeID int64
	// Limit is the most jobs returned; default 100, at most 10,000.
	Limit int
}

// MaxListLimit is the largest ListParams.Limit.
const MaxListLimit = 10000

// List returns the jobs p selects, newest (highest id) first. Errors:
// dao.ErrInvalidArgument for an unknown state or a limit out of range;
// the store's errors, mapped.
func (c *Client) List(ctx context.Context, p ListParams) ([]Row, error) {
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return nil, fmt.Errorf("jobs: list: %w", invalid("limit %d: use 0 to %d", p.Limit, MaxListLimit))
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	where, err := p.criteria(now)
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	rows, err := c.store.Find(ctx, dao.Query{Where: where, OrderBy: []dao.Order{dao.Desc(ColID)}, Limit: p.Limit})
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	for i := range rows {
		rows[i].present(now)
	}
	return rows, nil
}

// criteria returns the criteria of p at now.
func (p ListParams) criteria(now time.Time) (dao.Criteria, error) {
	var and []dao.Criteria
	if len(p.States) > 0 {
		var or []dao.Criteria
		for _, s := range p.States {
			c, err := stateCriteria(s, now)
			if err != nil {
				return dao.Criteria{}, err
			}
			or = append(or, c)
		}
		and = append(and, dao.Or(or...))
	}
	if p.Queue != "" {
		and = append(and, dao.Eq(ColQueue, p.Queue))
	}
	if p.Kind != "" {
		and = append(and, dao.Eq(ColKind, p.Kind))
	}
	if p.BeforeID > 0 {
		and = append(and, dao.Lt(ColID, p.BeforeID))
	}
	return dao.And(and...), nil
}

// stateCriteria returns the criteria of the jobs in state s at now:
// running and available are told apart by the lease.
func stateCriteria(s State, now time.Time) (dao.Criteria, error) {
	switch s {
	case StateRunning:
		return dao.And(dao.Eq(ColState, string(StateAvailable)), dao.Gt(ColLeaseUntil, now)), nil
	case StateAvailable:
		return dao.And(dao.Eq(ColState, string(StateAvailable)), leaseFree(now)), nil
	}
	if !s.valid() {
		return dao.Criteria{}, invalid("unknown state %q", s)
	}
	if s.Final() {
		// Always true of a final job; it lets PostgreSQL read the
		// partial final index (WHERE finalized_at IS NOT NULL).
		return dao.And(dao.Eq(ColState, string(s)), dao.NotNull(ColFinalizedAt)), nil
	}
	return dao.Eq(ColState, string(s)), nil
}

// leaseFree is the criteria of jobs no worker holds at now.
func leaseFree(now time.Time) dao.Criteria {
	return dao.Or(dao.IsNull(ColLeaseUntil), dao.Le(ColLeaseUntil, now))
}

// Count returns the number of jobs in each state, of queue (all queues
// when ""): one count per state. Errors: the store's, mapped.
func (c *Client) Count(ctx context.Context, queue string) (map[State]int64, error) {
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: count: %w", err)
	}
	out := map[State]int64{}
	for _, s := range States() {
		where, _ := stateCriteria(s, now)
		if queue != "" {
			where = dao.And(where, dao.Eq(ColQueue, queue))
		}
		n, err := c.store.Count(ctx, where)
		if err != nil {
			return nil, fmt.Errorf("jobs: count %s: %w", s, err)
		}
		out[s] = n
	}
	return out, nil
}

// maxChangeTries bounds the read-then-guarded-write loops of Cancel,
// Retry and Delete: each try fails only when the job changed between its
// read and its write.
const maxChangeTries = 10

// Cancel cancels job id and returns it: a job waiting to run (available,
// scheduled, retryable) becomes cancelled at once and never runs; a
// running job gets a cancel request, and the client running it cancels
// its context (cause [ErrCancelled]) within a tick and ends it
// cancelled, unless it completes first. A final job is returned as it
// is. Errors: dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Cancel(ctx context.Context, id int64) (*Row, error) {
	return c.change(ctx, "cancel", id, func(r *Row, now time.Time) (dao.Criteria, dao.Set, error) {
		switch {
		case r.State.Final():
			return dao.Criteria{}, nil, nil
		case r.running(now):
			if r.CancelRequestedAt != nil {
				return dao.Criteria{}, nil, nil
			}
			return dao.Eq(ColLeaseOwner, r.LeaseOwner), dao.Set{ColCancelRequestedAt: now}, nil
		}
		set := dao.Set{ColState: string(StateCancelled), ColFinalizedAt: now, ColCancelRequestedAt: now}
		keepUniqueIn(r, StateCancelled, set)
		return dao.And(dao.Eq(ColState, string(r.State)), leaseFree(now)), set, nil
	})
}

// Retry makes job id available to run at once and returns it: a
// scheduled or retryable job now, and a final one (completed, cancelled,
// discarded) again, with one more attempt allowed if it had used them
// all and its cancel request cleared. A running job is returned as it
// is. A final unique job that released its unique key runs without it.
// Errors: dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Retry(ctx context.Context, id int64) (*Row, error) {
	return c.change(ctx, "retry", id, func(r *Row, now time.Time) (dao.Criteria, dao.Set, error) {
		if r.running(now) {
			return dao.Criteria{}, nil, nil
		}
		set := dao.Set{ColState: string(StateAvailable), ColScheduledAt: now}
		if r.State.Final() {
			set[ColFinalizedAt] = nil
			set[ColCancelRequestedAt] = nil
			if r.Attempt >= r.MaxAttempts {
				set[ColMaxAttempts] = r.Attempt + 1
			}
		}
		return dao.And(dao.Eq(ColState, string(r.State)), leaseFree(now)), set, nil
	})
}

// Delete deletes job id, unless it is running, and returns it as it was.
// Errors: [ErrRunning] for a running job (cancel it first);
// dao.ErrNotFound; the store's errors, mapped.
func (c *Client) Delete(ctx context.Context, id int64) (*Row, error) {
	for range maxChangeTries {
		r, now, err := c.read(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("jobs: delete %d: %w", id, err)
		}
		if r.running(now) {
			r.present(now)
			return r, fmt.Errorf("jobs: delete %d: %w", id, ErrRunning)
		}
		n, err := retry.Retryable(ctx, 0, func() (int64, error) {
			return c.store.Delete(ctx, dao.And(dao.Eq(ColID, id), dao.Eq(ColState, string(r.State)), leaseFree(now)), 1)
		})
		if err != nil {
			return nil, fmt.Errorf("jobs: delete %d: %w", id, err)
		}
		if n == 1 {
			return r, nil
		}
	}
	return nil, fmt.Errorf("jobs: delete %d: the job kept changing: %w", id, dao.ErrConflict)
}

// read returns job id and the current time.
func (c *Client) read(ctx context.Context, id int64) (*Row, time.Time, error) {
	now, err := c.now(ctx)
	if err != nil {
		return nil, now, err
	}
	r, err := c.store.Get(ctx, id)
	if err != nil {
		return nil, now, err
	}
	return &r, now, nil
}

// change reads job id and writes what decide returns for it, guarded by
// the job's id and decide's criteria, so that a job that changed since the
// read is read again. A nil Set leaves the job as it is. A write that
// fails with an error a retry can cure (a deadlock, a busy database) is
// retried until ctx ends. It returns the job as written.
func (c *Client) change(ctx context.Context, op string, id int64, decide func(r *Row, now time.Time) (dao.Criteria, dao.Set, error)) (*Row, error) {
	for range maxChangeTries {
		r, now, err := c.read(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("jobs: %s %d: %w", op, id, err)
		}
		guard, set, err := decide(r, now)
		if err != nil {
			return nil, fmt.Errorf("jobs: %s %d: %w", op, id, err)
		}
		if set == nil {
			r.present(now)
			return r, nil
		}
		n, err := retry.Retryable(ctx, 0, func() (int64, error) {
			return c.store.Update(ctx, dao.And(dao.Eq(ColID, id), guard), set)
		})
		if err != nil {
			return nil, fmt.Errorf("jobs: %s %d: %w", op, id, err)
		}
		if n == 1 {
			if set[ColState] == string(StateAvailable) {
				c.wake(r.Queue)
			}
			return c.Get(ctx, id)
		}
	}
	return nil, fmt.Errorf("jobs: %s %d: the job kept changing: %w", op, id, dao.ErrConflict)
}

// keepUniqueIn clears the unique key in set when r's key is not held in
// state.
func keepUniqueIn(r *Row, state State, set dao.Set) {
	if r.UniqueKey != nil && r.UniqueStates&state.bit() == 0 {
		set[ColUniqueKey] = nil
	}
}

// QueueInfo is one queue as [Client.Queues] lists it.
type QueueInfo struct {
	// Name is the queue's name.
	Name string
	// Paused is true while the queue is paused.
	Paused bool
	// PausedAt is when it was paused.
	PausedAt *time.Time
}

// Queues lists the queues of the queue table: those paused once and
// those a client ran (a client records its queues when it runs), by
// name. Errors: [ErrNoQueueStore]; the store's errors, mapped.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	if c.cfg.QueueStore == nil {
		return nil, fmt.Errorf("jobs: queues: %w", ErrNoQueueStore)
	}
	rows, err := c.cfg.QueueStore.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("name")}})
	if err != nil {
		return nil, fmt.Errorf("jobs: queues: %w", err)
	}
	out := make([]QueueInfo, len(rows))
	for i, r := range rows {
		out[i] = QueueInfo{Name: r.Name, Paused: r.PausedAt != nil, PausedAt: r.PausedAt}
	}
	return out, nil
}

// PauseQueue pauses queue name for every client: within a tick no client
// claims its jobs; running jobs go on. Pausing a paused queue changes
// nothing. Errors: dao.ErrInvalidArgument for a bad name;
// [ErrNoQueueStore]; the store's errors, mapped.
func (c *Client) PauseQueue(ctx context.Context, name string) error {
	return c.setPaused(ctx, "pause", name, true)
}

// ResumeQueue resumes queue name for every client, within a tick.
// Errors as [Client.PauseQueue].
func (c *Client) ResumeQueue(ctx context.Context, name string) error {
	return c.setPaused(ctx, "resume", name, false)
}

// setPaused records the pause state of queue name.
func (c *Client) setPaused(ctx context.Context, op, name string, paused bool) error {
	if err := CheckQueue(name); err != nil {
		return fmt.Errorf("jobs: %s queue: %w", op, err)
	}
	if c.cfg.QueueStore == nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, ErrNoQueueStore)
	}
	now, err := c.now(ctx)
	if err != nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, err)
	}
	if err := c.registerQueues(ctx, name); err != nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, err)
	}
	set := dao.Set{"paused_at": nil}
	where := dao.And(dao.Eq("name", name), dao.NotNull("paused_at"))
	if paused {
		set = dao.Set{"paused_at": now}
		where = dao.And(dao.Eq("name", name), dao.IsNull("paused_at"))
	}
	if _, err := c.cfg.QueueStore.Update(ctx, where, set); err != nil {
		return fmt.Errorf("jobs: %s queue %s: %w", op, name, err)
	}
	c.pausedMu.Lock()
	if paused {
		c.paused[name] = true
	} else {
		delete(c.paused, name)
	}
	c.pausedMu.Unlock()
	if !paused {
		c.wake(name)
	}
	return nil
}

// registerQueues adds rows for names to the queue table unless they
// exist.
func (c *Client) registerQueues(ctx context.Context, names ...string) error {
	qs, ok := c.cfg.QueueStore.(dao.IdempotentCreator[Queue])
	if !ok {
		return fmt.Errorf("queue store %T cannot add rows idempotently: %w", c.cfg.QueueStore, dao.ErrInvalidArgument)
	}
	items := make([]*Queue, len(names))
	for i, n := range names {
		items[i] = &Queue{Name: n}
	}
	_, err := qs.CreateIfAbsent(ctx, items...)
	return err
}
