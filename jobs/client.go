package jobs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/dbclock"
	"github.com/claimstore/claimstore/outbox"
)

// Defaults of a [Client].
const (
	// DefaultQueue is the queue of a job inserted without one.
	DefaultQueue = "default"
	// DefaultMaxAttempts is the max attempts of a job inserted without
	// one.
	DefaultMaxAttempts = 25
	// DefaultPriority is the priority of a job inserted without one.
	DefaultPriority = 1
	// MaxPriority is the largest (least urgent) priority.
	MaxPriority = 4
	// DefaultMaxWorkers is the number of jobs a queue runs at once in one
	// client when its QueueConfig.MaxWorkers is zero.
	DefaultMaxWorkers = 100
	// DefaultCompletedRetention, DefaultCancelledRetention and
	// DefaultDiscardedRetention are how long final jobs are kept before
	// the retention sweep deletes them.
	DefaultCompletedRetention = 24 * time.Hour
	DefaultCancelledRetention = 24 * time.Hour
	DefaultDiscardedRetention = 7 * 24 * time.Hour
	// DefaultRescueInterval is the period of the rescuer.
	DefaultRescueInterval = 30 * time.Second
	// DefaultRetentionInterval is the period of the retention sweep.
	DefaultRetentionInterval = time.Minute
	// MaintenanceBatch is the most jobs one maintenance statement
	// changes or deletes.
	MaintenanceBatch = 1000
)

// QueueConfig configures one queue a [Client] runs.
type QueueConfig struct {
	// MaxWorkers is the most jobs of the queue this client runs at once;
	// default [DefaultMaxWorkers].
	MaxWorkers int
	// BatchSize is the most jobs one claim takes; default half of
	// MaxWorkers (at least 1, at most MaxWorkers). The client claims when
	// that many workers are free, or at each tick with the workers free
	// then: at half, one batch runs while the other's outcomes are
	// written and the next is claimed (with claims of MaxWorkers, each
	// waits for the last job of the one before, and a queue of 200
	// workers ran 100,000 no-op jobs on PostgreSQL at about two thirds of
	// the rate: bench/peers' jobs phase, --dispatch-batch 200 against
	// 100).
	BatchSize int
}

// Config configures a [Client]. Store is required; zero durations and
// sizes take their defaults, negative ones are invalid unless said.
type Config struct {
	// Store is the job table's store, a dao.Store[Row] opened by a
	// backend package (sqlstore.New[jobs.Row](db), memstore.New[jobs.Row]()
	// ...), whose table [Migrate] created.
	Store dao.Store[Row]
	// QueueStore, optional, is the queue table's store: with it, queues
	// can be paused and resumed for every process ([Client.PauseQueue]).
	QueueStore dao.Store[Queue]
	// Workers holds the work functions by kind. Required when Queues is
	// not empty.
	Workers *Workers
	// Queues are the queues this client runs jobs of, by name. A client
	// without queues only inserts and manages jobs (and runs the
	// maintenance and periodic jobs when Run is called).
	Queues map[string]QueueConfig
	// ID names this client in lease owner tokens and logs; default
	// "<hostname>-<pid>-<random>". At most 120 bytes.
	ID string
	// MaxAttempts is the max attempts of jobs inserted without one;
	// default [DefaultMaxAttempts].
	MaxAttempts int
	// Lease is how long a claim holds a job; a running job's lease is
	// renewed every half lease. Default 30 s (dispatch.DefaultLease).
	Lease time.Duration
	// Tick is the heartbeat: how often a queue looks for jobs when no
	// wake-up came, how often pauses and cancel requests are read, and
	// the period of the scheduler that makes scheduled and retryable jobs
	// available. Default: dispatch.TickFor(Lease), 1 s.
	Tick time.Duration
	// DrainTimeout is how long running jobs may finish after Run's
	// context ends; default 10 s.
	DrainTimeout time.Duration
	// Leader, optional, reports whether this client may run the
	// maintenance (scheduler, rescuer, retention) now; see Leases.
	Leader func(ctx context.Context) bool
	// Leases, optional, is a lease store the client elects a leader over
	// (election "jobs:<table>") when Leader is nil, so that one client
	// runs the maintenance. With neither, every client runs it (each of
	// its statements is safe to run concurrently).
	Leases coord.LeaseStore
	// RescueInterval is the period of the rescuer; default
	// [DefaultRescueInterval].
	RescueInterval time.Duration
	// RetentionInterval is the period of the retention sweep; default
	// [DefaultRetentionInterval].
	RetentionInterval time.Duration
	// CompletedRetention, CancelledRetention and DiscardedRetention are
	// how long final jobs are kept after they were finalized; defaults
	// [DefaultCompletedRetention], [DefaultCancelledRetention],
	// [DefaultDiscardedRetention]. Negative keeps them forever.
	CompletedRetention, CancelledRetention, DiscardedRetention time.Duration
	// Periodic are jobs inserted on a cron schedule, one per occurrence;
	// they need ScheduleStore.
	Periodic []PeriodicJob
	// ScheduleStore is the schedule table's store (dispatch.Schedule;
	// dispatch.MigrateScheduleStore creates it) that periodic jobs are
	// kept in: a table of their own, since the client fires every
	// schedule it holds, and every client of the table should have the
	// same Periodic list. Required when Periodic is not empty.
	ScheduleStore dao.Store[dispatch.Schedule]
	// Now overrides the client's clock (a fake clock in tests). By
	// default the database's clock when the store reads one, else the
	// host's.
	Now func() time.Time
	// Logger receives the client's logs; default slog.Default().
	Logger *slog.Logger
}

// Client inserts jobs, runs the jobs of its queues with the workers of
// their kinds, and manages jobs and queues. Create it with [NewClient];
// it is safe for concurrent use.
type Client struct {
	cfg    Config
	store  dao.Store[Row]
	table  string
	clock  *dbclock.Source
	log    *slog.Logger
	queues map[string]*queue

	mu      sync.Mutex
	running map[int64]runningJob // jobs running in this client

	pausedMu sync.RWMutex
	paused   map[string]bool

	runningRun atomic.Bool
	stats      stats
}

// runningJob is a job running in this client: its work's cancel, and
// the end of its timeout when the tick checks it (zero: none, or a timer
// of its own).
type runningJob struct {
	cancel   context.CancelCauseFunc
	deadline time.Time
}

// queue is one queue the client runs.
type queue struct {
	name string
	w    *dispatch.Worker[Row]
	due  dueWakes
}

// NewClient returns a client for cfg. Errors wrap dao.ErrInvalidArgument
// for a missing store, a queue without workers registry, a bad queue
// name, negative or out-of-range settings; it does no I/O.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("jobs: new client: %w", invalid("nil Store"))
	}
	if len(cfg.Queues) > 0 && cfg.Workers == nil {
		return nil, fmt.Errorf("jobs: new client: %w", invalid("queues without Workers"))
	}
	if len(cfg.Periodic) > 0 && cfg.ScheduleStore == nil {
		return nil, fmt.Errorf("jobs: new client: %w", invalid("periodic jobs without ScheduleStore"))
	}
	if cfg.MaxAttempts < 0 || cfg.Lease < 0 || cfg.Tick < 0 || cfg.DrainTimeout < 0 || cfg.RescueInterval < 0 || cfg.RetentionInterval < 0 {
		return nil, fmt.Errorf("jobs: new client: %w", invalid("negative setting"))
	}
	if cfg.ID == "" {
		cfg.ID = outbox.DefaultWorkerID()
	}
	if len(cfg.ID) > 120 {
		return nil, fmt.Errorf("jobs: new client: %w", invalid("id longer than 120 bytes"))
	}
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.Lease = cmp.Or(cfg.Lease, dispatch.DefaultLease)
	cfg.Tick = cmp.Or(cfg.Tick, dispatch.TickFor(cfg.Lease))
	cfg.RescueInterval = cmp.Or(cfg.RescueInterval, DefaultRescueInterval)
	cfg.RetentionInterval = cmp.Or(cfg.RetentionInterval, DefaultRetentionInterval)
	cfg.CompletedRetention = cmp.Or(cfg.CompletedRetention, DefaultCompletedRetention)
	cfg.CancelledRetention = cmp.Or(cfg.CancelledRetention, DefaultCancelledRetention)
	cfg.DiscardedRetention = cmp.Or(cfg.DiscardedRetention, DefaultDiscardedRetention)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Client{
		cfg:     cfg,
		store:   cfg.Store,
		table:   tableOf(cfg.Store),
		clock:   dbclock.NewSource(cfg.Now, cfg.Store, cfg.Store.Capabilities().DatabaseClock),
		log:     cfg.Logger.With("component", "jobs", "client", cfg.ID),
		queues:  map[string]*queue{},
		running: map[int64]runningJob{},
		paused:  map[string]bool{},
	}
	for name, qc := range cfg.Queues {
		if err := CheckQueue(name); err != nil {
			return nil, fmt.Errorf("jobs: new client: %w", err)
		}
		if qc.MaxWorkers < 0 || qc.BatchSize < 0 {
			return nil, fmt.Errorf("jobs: new client: queue %s: %w", name, invalid("negative MaxWorkers or BatchSize"))
		}
		w, err := c.newQueueWorker(name, qc)
		if err != nil {
			return nil, fmt.Errorf("jobs: new client: queue %s: %w", name, err)
		}
		q := &queue{name: name, w: w}
		q.due.wake = w.Wake
		c.queues[name] = q
	}
	for i := range cfg.Periodic {
		if err := cfg.Periodic[i].check(); err != nil {
			return nil, fmt.Errorf("jobs: new client: %w", err)
		}
	}
	return c, nil
}

// tableOf returns the table name store reports, or DefaultTable.
func tableOf(store any) string {
	if n, ok := store.(interface{ TableName() string }); ok && n.TableName() != "" {
		return n.TableName()
	}
	return DefaultTable
}

// workerID returns the dispatch worker id of queue name: the client id,
// "/" and the queue name, or a digest of the name when that is too long
// for a lease owner token.
func (c *Client) workerID(name string) string {
	id := c.cfg.ID + "/" + name
	if len(id) <= dispatch.MaxWorkerIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(name))
	return c.cfg.ID + "/" + hex.EncodeToString(sum[:8])
}

// newQueueWorker returns the dispatch worker of one queue: it claims the
// queue's available jobs in priority, scheduled time and id order
// (attempt + 1, attempted_at now, with a lease) and runs each with
// c.handle.
func (c *Client) newQueueWorker(name string, qc QueueConfig) (*dispatch.Worker[Row], error) {
	maxWorkers := cmp.Or(qc.MaxWorkers, DefaultMaxWorkers)
	batch := min(cmp.Or(qc.BatchSize, max(1, maxWorkers/2)), maxWorkers)
	return dispatch.New(dispatch.Config[Row]{
		Store:      c.store,
		KeyField:   ColID,
		Key:        func(r *Row) any { return r.ID },
		OwnerField: ColLeaseOwner,
		UntilField: ColLeaseUntil,
		Due: func(now time.Time) dao.Criteria {
			return dao.And(
				dao.Eq(ColState, string(StateAvailable)),
				dao.Eq(ColQueue, name),
				dao.Le(ColScheduledAt, now),
				dao.LtField(ColAttempt, ColMaxAttempts),
				dao.IsNull(ColCancelRequestedAt),
			)
		},
		OrderBy: []dao.Order{dao.Asc(ColPriority), dao.Asc(ColScheduledAt), dao.Asc(ColID)},
		ClaimSet: func(now time.Time) dao.Set {
			return dao.Set{ColAttempt: dao.Incr(1), ColAttemptedAt: now}
		},
		Handler:      c.handle,
		Prepare:      c.prepare,
		Paused:       func() bool { return c.isPaused(name) },
		WorkerID:     c.workerID(name),
		Concurrency:  maxWorkers,
		BatchSize:    batch,
		Tick:         c.cfg.Tick,
		Lease:        c.cfg.Lease,
		DrainTimeout: c.cfg.DrainTimeout,
		Now:          c.cfg.Now,
		Logger:       c.cfg.Logger,
	})
}

// isPaused reports whether queue name was paused at the last read of the
// queue table.
func (c *Client) isPaused(name string) bool {
	c.pausedMu.RLock()
	defer c.pausedMu.RUnlock()
	return c.paused[name]
}

// wake makes the worker of queue name (every queue when name is "")
// claim at once.
func (c *Client) wake(name string) {
	if name == "" {
		for _, q := range c.queues {
			q.w.Wake()
		}
		return
	}
	if q, ok := c.queues[name]; ok {
		q.w.Wake()
	}
}

// wakeAfter makes the worker of queue name claim in d, when a job this
// client put back available with a scheduled time d ahead becomes due.
func (c *Client) wakeAfter(name string, d time.Duration) {
	if q, ok := c.queues[name]; ok && d > 0 {
		q.due.add(time.Now().Add(d))
	}
}

// Run runs the client until ctx ends: the workers of its queues, the
// wake-ups (PostgreSQL notifications of inserts), the per-tick reads of
// queue pauses and cancel requests, the maintenance (on the leader: the
// scheduler, the rescuer, the retention sweep) and the periodic jobs.
// When ctx ends it drains: no more claims, running jobs get DrainTimeout
// to finish, then their contexts are cancelled; a job cancelled by the
// drain is released without spending its attempt. Run returns nil after
// the drain, an error wrapping dao.ErrInvalidArgument for a request the
// store refuses, or an error when Run is already running.
func (c *Client) Run(ctx context.Context) error {
	if !c.runningRun.CompareAndSwap(false, true) {
		return errors.New("jobs: client already running")
	}
	defer c.runningRun.Store(false)
	if c.cfg.QueueStore != nil && len(c.queues) > 0 {
		names := make([]string, 0, len(c.queues))
		for name := range c.queues {
			names = append(names, name)
		}
		if err := c.registerQueues(ctx, names...); err != nil {
			c.log.Warn("recording the client's queues in the queue table failed", "err", err)
		}
	}
	if err := c.readPauses(ctx); err != nil && !errors.Is(err, ErrNoQueueStore) {
		c.log.Warn("reading queue pauses failed; queues run until the next read", "err", err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	for _, q := range c.queues {
		wg.Go(func() {
			if err := q.w.Run(ctx); err != nil {
				fail(fmt.Errorf("jobs: queue %s: %w", q.name, err))
			}
		})
	}
	var bg sync.WaitGroup
	bg.Go(func() { c.pollLoop(bgCtx) })
	if len(c.queues) > 0 {
		bg.Go(func() { c.listenLoop(bgCtx) })
	}
	leader := c.cfg.Leader
	if leader == nil && c.cfg.Leases != nil {
		e, err := coord.NewElector(c.cfg.Leases, coord.ElectorConfig{Name: "jobs:" + c.table, ID: c.cfg.ID, Logger: c.cfg.Logger})
		if err != nil {
			return fmt.Errorf("jobs: run: %w", err)
		}
		bg.Go(func() { _ = e.Run(bgCtx) })
		leader = func(context.Context) bool { _, ok := e.Leader(); return ok }
	}
	bg.Go(func() { c.maintain(bgCtx, leader) })
	if len(c.cfg.Periodic) > 0 {
		bg.Go(func() {
			if err := c.runPeriodic(bgCtx); err != nil {
				fail(err)
			}
		})
	}
	c.log.Info("jobs client started", "queues", len(c.queues), "tick", c.cfg.Tick, "lease", c.cfg.Lease)
	wg.Wait()
	stopBG()
	bg.Wait()
	for _, q := range c.queues {
		q.due.stop()
	}
	c.log.Info("jobs client stopped")
	return errors.Join(errs...)
}

// pollLoop reads, once per tick, the queue pauses and the cancel
// requests of the jobs running in this client.
func (c *Client) pollLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.readPauses(ctx); err != nil && !errors.Is(err, ErrNoQueueStore) && ctx.Err() == nil {
			c.log.Warn("reading queue pauses failed", "err", err)
		}
		if err := c.readCancels(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("reading cancel requests failed", "err", err)
		}
		c.expire()
	}
}

// expire cancels, with cause ErrTimeout, the work of the running jobs
// whose timeout (checked at each tick) has passed.
func (c *Client) expire() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rj := range c.running {
		if !rj.deadline.IsZero() && now.After(rj.deadline) {
			rj.cancel(ErrTimeout)
		}
	}
}

// readPauses reads the queue table and sets which queues are paused.
func (c *Client) readPauses(ctx context.Context) error {
	if c.cfg.QueueStore == nil {
		return ErrNoQueueStore
	}
	if len(c.queues) == 0 {
		return nil
	}
	rows, err := c.cfg.QueueStore.Find(ctx, dao.Query{Where: dao.NotNull("paused_at")})
	if err != nil {
		return err
	}
	paused := make(map[string]bool, len(rows))
	for _, r := range rows {
		paused[r.Name] = true
	}
	c.pausedMu.Lock()
	resumed := []string{}
	for name := range c.paused {
		if !paused[name] {
			resumed = append(resumed, name)
		}
	}
	c.paused = paused
	c.pausedMu.Unlock()
	for _, name := range resumed {
		c.wake(name)
	}
	return nil
}

// readCancels reads which of the jobs running in this client have a
// cancel request and cancels their contexts (cause ErrCancelled).
func (c *Client) readCancels(ctx context.Context) error {
	c.mu.Lock()
	ids := make([]any, 0, len(c.running))
	for id := range c.running {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for len(ids) > 0 {
		n := min(len(ids), MaintenanceBatch)
		rows, err := c.store.Find(ctx, dao.Query{Where: dao.And(dao.In(ColID, ids[:n]...), dao.NotNull(ColCancelRequestedAt))})
		if err != nil {
			return err
		}
		ids = ids[n:]
		c.mu.Lock()
		for _, r := range rows {
			if rj, ok := c.running[r.ID]; ok {
				rj.cancel(ErrCancelled)
			}
		}
		c.mu.Unlock()
	}
	return nil
}

// listenLoop subscribes to the job table's insert notifications where the
// store has them (PostgreSQL: the trigger Migrate creates notifies the
// channel named like the table) and wakes the queues at each one; it
// subscribes again after a failure, waking every queue then, since
// notifications sent meanwhile are lost.
func (c *Client) listenLoop(ctx context.Context) {
	l, ok := c.store.(dao.Listener)
	if !ok || !l.CanListen() || !notifies(c.store) {
		return
	}
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		c.wake("")
		err := l.Listen(ctx, c.table, func(payload string) { c.wake(payload) })
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			wait = 100 * time.Millisecond
		}
		c.log.Warn("listening for inserted jobs failed; queues poll at each tick until it resumes", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// now returns the current time by the client's clock.
func (c *Client) now(ctx context.Context) (time.Time, error) { return c.clock.Now(ctx) }

// stats are running totals of a client.
type stats struct {
	completed, retried, discarded, cancelled, snoozed atomic.Int64
}

// Stats are running totals of the jobs one client ran, by outcome.
type Stats struct {
	Completed int64 // succeeded
	Retried   int64 // failed with attempts left
	Discarded int64 // failed their last attempt, or had no worker
	Cancelled int64 // cancelled while running or by their work function
	Snoozed   int64 // snoozed
}

// Stats returns the client's running totals. An outcome is counted when
// its work function returned; its write follows within the outcome delay.
func (c *Client) Stats() Stats {
	return Stats{
		Completed: c.stats.completed.Load(), Retried: c.stats.retried.Load(), Discarded: c.stats.discarded.Load(),
		Cancelled: c.stats.cancelled.Load(), Snoozed: c.stats.snoozed.Load(),
	}
}
