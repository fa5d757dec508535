package jobs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/dbclock"
	"github.com/claimstore/claimstore/internal/handlerctx"
	"github.com/claimstore/claimstore/internal/workerid"
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
	// Limit, optional, limits the queue's jobs across every client that
	// runs the queue: at most Limit.Max running at once, at most
	// Limit.Rate started per Limit.Period, per partition (see [Limit]).
	// Every client of the queue must give the same Limit. Nil: no limit
	// beyond MaxWorkers, and the claim of an unlimited queue.
	Limit *Limit
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
	// not empty: the queues claim only jobs of its kinds (those
	// registered when Run starts), leaving the others to clients that
	// know them. An insert refuses a kind it has no worker for (see
	// SkipUnknownJobCheck); a client without Workers inserts any kind.
	Workers *Workers
	// SkipUnknownJobCheck makes inserts accept a kind Workers has no
	// worker for, for jobs that other clients run. By default such an
	// insert fails with [ErrUnknownKind] (and dao.ErrInvalidArgument), so
	// that a job no client of this program can run is not inserted by
	// mistake.
	SkipUnknownJobCheck bool
	// Queues are the queues this client runs jobs of, by name. A client
	// without queues only inserts and manages jobs (and runs the
	// maintenance and periodic jobs when Run is called).
	Queues map[string]QueueConfig
	// WorkerID names this client in lease owner tokens and logs; default
	// "<hostname>-<pid>-<random>" (outbox.DefaultWorkerID). At most 120
	// bytes.
	WorkerID string
	// ID is read as WorkerID when WorkerID is empty.
	//
	// Deprecated: use WorkerID.
	ID string
	// MaxAttempts is the max attempts of jobs inserted without one;
	// default [DefaultMaxAttempts].
	MaxAttempts int
	// MaxArgsSize is the largest JSON encoding of a job's args, in
	// bytes, this client inserts: a larger one is refused with
	// dao.ErrInvalidArgument. Default [DefaultMaxArgsSize] (1 MiB);
	// negative: no limit.
	MaxArgsSize int
	// Lease is how long a claim holds a job; a running job's lease is
	// renewed every half lease. Default 30 s (dispatch.DefaultLease).
	Lease time.Duration
	// PollInterval is the heartbeat: how often a queue looks for jobs
	// when no wake-up came, how often pauses and cancel requests are
	// read, and the period of the scheduler that makes scheduled and
	// retryable jobs available. Default: dispatch.PollIntervalFor(Lease),
	// 1 s. Until this release PollInterval was the change signal's
	// period, now SignalInterval.
	PollInterval time.Duration
	// Tick is read as PollInterval when PollInterval is zero.
	//
	// Deprecated: use PollInterval.
	Tick time.Duration
	// SignalInterval is how often a running client with queues reads the
	// job table's change signal on a backend without notifications
	// (MySQL/MariaDB, SQLite, SQL Server: one SELECT MAX(id) per
	// interval), waking its queues when another process inserted jobs;
	// default [DefaultSignalInterval] (25 ms, 40 queries per second).
	// Negative turns the signal off: jobs of other processes are then
	// found at each PollInterval. PostgreSQL notifies instead and ignores
	// it.
	SignalInterval time.Duration
	// DrainTimeout is how long running jobs may finish after Run's
	// context ends; default 10 s.
	DrainTimeout time.Duration
	// Leader, optional, reports whether this client may run the
	// maintenance (scheduler, rescuer, retention) now, asked before each
	// of those tasks (dispatch.Maintenance's gate); it should return at
	// once. See Leases.
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
	// kept in, a table of their own. The client fires only the schedules
	// of the periodic jobs it lists, so clients with different Periodic
	// lists may share it ([Client.RemovePeriodic] removes a schedule no
	// client lists). Required when Periodic is not empty.
	ScheduleStore dao.Store[dispatch.Schedule]
	// Middleware wraps the client's inserts and the work of every job it
	// runs: each value implements [InsertMiddleware], [WorkMiddleware]
	// or both (package jobsotel's tracing and metrics do both). The
	// first is outermost. A kind's own work middleware ([WithMiddleware])
	// runs inside these.
	Middleware []Middleware
	// ErrorHandler, optional, is told of every failed attempt (error,
	// panic, timeout) of the jobs the client runs, and may cancel the job
	// instead of retrying it; see [ErrorHandler].
	ErrorHandler ErrorHandler
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
	cfg   Config
	store dao.Store[Row]
	txb   dao.TxBinder[Row] // the store's, nil when it has none
	table string
	clock *dbclock.Source
	log   *slog.Logger

	// queuesMu guards queues (added and removed at run time) and run,
	// the current Run's state for starting the queues added meanwhile
	// (nil outside Run, and once Run began to stop).
	queuesMu sync.RWMutex
	queues   map[string]*queueRunner
	run      *runState
	// kindsStale asks pollLoop to record the queues and kinds at once
	// (a queue was added).
	kindsStale atomic.Bool

	mu      sync.Mutex
	running map[int64]runningJob // jobs running in this client
	// recheck holds the jobs whose outcome made them wait again, for
	// finishCancelled.
	recheck *recheck
	// promos holds the sequences and batches of jobs that became final,
	// for promoteLoop.
	promos *promotions

	pausedMu sync.RWMutex
	paused   map[string]bool

	// leader reports whether this client runs the maintenance now (nil:
	// always); elector, when set, is the election it reads.
	leader  func(ctx context.Context) bool
	elector *coord.Elector
	// periodic fires the periodic jobs (nil without any).
	periodic *periodicRunner

	// kindsIn is the criteria of the kinds the queues claim, set by Run
	// before the queues start; kindsRecorded is when Run last recorded
	// them in the queue table (pollLoop's goroutine only, after that).
	kindsIn       dao.Criteria
	kindsRecorded time.Time

	runningRun atomic.Bool
	stats      stats

	// runMu guards stopRun, which ends the current Run's context, and
	// ran, closed when that Run returns (Stop, StopAndCancel).
	runMu   sync.Mutex
	stopRun context.CancelFunc
	ran     chan struct{}

	events   hub // event subscriptions
	insertMW []InsertMiddleware
	workMW   []WorkMiddleware
}

// runningJob is a job running in this client: its work's cancel.
type runningJob struct {
	// hc is the worker's handler context of the job, which the work's
	// context is or is under; else cancel ends the work's own context.
	hc     *handlerctx.Context
	cancel context.CancelCauseFunc
}

// stop ends the job's work with cause.
func (r runningJob) stop(cause error) {
	if r.hc != nil {
		r.hc.Cancel(cause)
		return
	}
	r.cancel(cause)
}

// queueRunner runs one queue of the client: its dispatch worker and
// state. The queue row, the pause state in the queue table, is [Queue].
type queueRunner struct {
	name string
	w    *dispatch.Worker[Row]
	// due signals waitsEnded when a retry or snooze this client wrote
	// ends its wait (see endWaitAfter).
	due        dueWakes
	waitsEnded chan struct{}
	// stop drains the queue's worker and done is closed once it and the
	// queue's other goroutines have returned; both set when a Run starts
	// the queue (under queuesMu).
	stop context.CancelFunc
	done chan struct{}
}

// runState is what a running Run gives the queues it starts, the ones
// added while it runs included.
type runState struct {
	ctx   context.Context // the queues' workers run until it ends
	bgCtx context.Context // their other goroutines run until it ends
	wg    *sync.WaitGroup // the queues' goroutines, waited for by Run
	fail  func(error)     // records a queue's error and stops Run
	// listen starts the wake-ups (listenLoop) with the first queue, so
	// that a client without queues holds no listen connection and sends
	// no signal reads.
	listen sync.Once
	bg     *sync.WaitGroup // Run's other goroutines, listenLoop's among them
}

// NewClient returns a client for cfg, with everything [Client.Run] starts
// built and checked, so that Run fails for no configuration. Errors wrap
// dao.ErrInvalidArgument for a missing store, a queue without workers
// registry, a bad queue name or client id, negative or out-of-range
// settings, a leader election or periodic job that cannot be built; it
// does no I/O.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("jobs: new client: %w", argerr.Errorf("nil Store"))
	}
	if len(cfg.Queues) > 0 && cfg.Workers == nil {
		return nil, fmt.Errorf("jobs: new client: %w", argerr.Errorf("queues without Workers"))
	}
	if len(cfg.Periodic) > 0 && cfg.ScheduleStore == nil {
		return nil, fmt.Errorf("jobs: new client: %w", argerr.Errorf("periodic jobs without ScheduleStore"))
	}
	if cfg.MaxAttempts < 0 || cfg.Lease < 0 || cfg.PollInterval < 0 || cfg.Tick < 0 || cfg.DrainTimeout < 0 || cfg.RescueInterval < 0 || cfg.RetentionInterval < 0 {
		return nil, fmt.Errorf("jobs: new client: %w", argerr.Errorf("negative setting"))
	}
	cfg.WorkerID = cmp.Or(cfg.WorkerID, cfg.ID)
	if cfg.WorkerID == "" {
		cfg.WorkerID = workerid.New()
	}
	if len(cfg.WorkerID) > 120 || !utf8.ValidString(cfg.WorkerID) || strings.IndexByte(cfg.WorkerID, 0) >= 0 {
		return nil, fmt.Errorf("jobs: new client: %w", argerr.Errorf("worker id %q: use up to 120 bytes of UTF-8 without NUL", cfg.WorkerID))
	}
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.MaxArgsSize = cmp.Or(cfg.MaxArgsSize, DefaultMaxArgsSize)
	cfg.Lease = cmp.Or(cfg.Lease, dispatch.DefaultLease)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, cfg.Tick, dispatch.PollIntervalFor(cfg.Lease))
	cfg.RescueInterval = cmp.Or(cfg.RescueInterval, DefaultRescueInterval)
	cfg.RetentionInterval = cmp.Or(cfg.RetentionInterval, DefaultRetentionInterval)
	cfg.CompletedRetention = cmp.Or(cfg.CompletedRetention, DefaultCompletedRetention)
	cfg.CancelledRetention = cmp.Or(cfg.CancelledRetention, DefaultCancelledRetention)
	cfg.DiscardedRetention = cmp.Or(cfg.DiscardedRetention, DefaultDiscardedRetention)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	insertMW, workMW, err := splitMiddleware(cfg.Middleware)
	if err != nil {
		return nil, fmt.Errorf("jobs: new client: %w", err)
	}
	c := &Client{
		insertMW: insertMW,
		workMW:   workMW,
		cfg:      cfg,
		store:    cfg.Store,
		table:    tableOf(cfg.Store),
		clock:    dbclock.NewSource(cfg.Now, cfg.Store, cfg.Store.Capabilities().DatabaseClock),
		log:      cfg.Logger.With("component", "jobs", "client", cfg.WorkerID),
		queues:   map[string]*queueRunner{},
		running:  map[int64]runningJob{},
		recheck:  newRecheck(),
		promos:   newPromotions(),
		paused:   map[string]bool{},
	}
	c.txb, _ = cfg.Store.(dao.TxBinder[Row])
	if missing, effects := lacking(cfg.Store); len(missing) > 0 {
		c.log.Warn("the job store lacks optional interfaces of package dao; a wrapper store must forward them to keep the behaviour",
			"store", fmt.Sprintf("%T", cfg.Store), "missing", missing, "effects", effects)
	}
	for name, qc := range cfg.Queues {
		q, err := c.newQueue(name, qc)
		if err != nil {
			return nil, fmt.Errorf("jobs: new client: %w", err)
		}
		c.queues[name] = q
	}
	c.leader = cfg.Leader
	if c.leader == nil && cfg.Leases != nil {
		e, err := coord.NewElector(cfg.Leases, coord.ElectorConfig{Name: "jobs:" + c.table, ID: cfg.WorkerID, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("jobs: new client: leader election: %w", err)
		}
		c.elector = e
		c.leader = func(context.Context) bool { _, ok := e.Leader(); return ok }
	}
	if cfg.ScheduleStore != nil {
		p, err := c.newPeriodicRunner()
		if err != nil {
			return nil, fmt.Errorf("jobs: new client: %w", err)
		}
		c.periodic = p
	}
	return c, nil
}

// newQueue checks name and qc and builds the queue's worker.
func (c *Client) newQueue(name string, qc QueueConfig) (*queueRunner, error) {
	if err := CheckQueue(name); err != nil {
		return nil, err
	}
	if qc.MaxWorkers < 0 || qc.BatchSize < 0 {
		return nil, fmt.Errorf("queue %s: %w", name, argerr.Errorf("negative MaxWorkers or BatchSize"))
	}
	if qc.Limit != nil {
		lim := *qc.Limit
		lim.ByArgs = slices.Clone(lim.ByArgs)
		if err := lim.check(); err != nil {
			return nil, fmt.Errorf("queue %s: %w", name, err)
		}
		qc.Limit = &lim
	}
	w, err := c.newQueueWorker(name, qc)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", name, err)
	}
	q := &queueRunner{name: name, w: w, waitsEnded: make(chan struct{}, 1)}
	q.due.wake = func() {
		select {
		case q.waitsEnded <- struct{}{}:
		default:
		}
	}
	return q, nil
}

// queue returns the queue the client runs under name.
func (c *Client) queue(name string) (*queueRunner, bool) {
	c.queuesMu.RLock()
	defer c.queuesMu.RUnlock()
	q, ok := c.queues[name]
	return q, ok
}

// queueCount returns how many queues the client runs.
func (c *Client) queueCount() int {
	c.queuesMu.RLock()
	defer c.queuesMu.RUnlock()
	return len(c.queues)
}

// queueList returns the queues the client runs, in name order.
func (c *Client) queueList() []*queueRunner {
	c.queuesMu.RLock()
	defer c.queuesMu.RUnlock()
	out := make([]*queueRunner, 0, len(c.queues))
	for _, name := range slices.Sorted(maps.Keys(c.queues)) {
		out = append(out, c.queues[name])
	}
	return out
}

// AddQueue adds queue name, run with qc's settings, to the client: when
// Run is running the queue starts at once (and drains with the others
// when Run stops), otherwise with the next Run. The queue claims the
// kinds of the client's Workers, as the queues of Config.Queues do, and
// is recorded in the queue table at the next read of pauses. Errors wrap
// dao.ErrInvalidArgument for a bad name or setting, a client built
// without Workers, and a name the client already runs; nothing changes
// then.
func (c *Client) AddQueue(name string, qc QueueConfig) error {
	if c.cfg.Workers == nil {
		return fmt.Errorf("jobs: add queue: %w", argerr.Errorf("client without Workers"))
	}
	q, err := c.newQueue(name, qc)
	if err != nil {
		return fmt.Errorf("jobs: add queue: %w", err)
	}
	c.queuesMu.Lock()
	defer c.queuesMu.Unlock()
	if _, ok := c.queues[name]; ok {
		return fmt.Errorf("jobs: add queue: %w", argerr.Errorf("queue %s already runs in this client", name))
	}
	if c.run != nil && c.kindsIn.IsAll() {
		return fmt.Errorf("jobs: add queue: %w", argerr.Errorf("no worker in Workers when Run started"))
	}
	c.queues[name] = q
	if c.run != nil {
		c.startQueue(c.run, q)
	}
	c.kindsStale.Store(true)
	return nil
}

// RemoveQueue removes queue name from the client. When Run runs it, the
// queue drains as at Run's end (no more claims, its running jobs get
// DrainTimeout to finish, then their work is cancelled and their jobs
// released without spending their attempt) and RemoveQueue waits for
// that; the queue's jobs stay in the table for other clients. It returns
// nil once the queue has stopped, ctx's error when ctx ends first (the
// queue goes on draining), or an error wrapping dao.ErrNotFound when the
// client does not run name.
func (c *Client) RemoveQueue(ctx context.Context, name string) error {
	c.queuesMu.Lock()
	q, ok := c.queues[name]
	if ok {
		delete(c.queues, name)
	}
	c.queuesMu.Unlock()
	if !ok {
		return fmt.Errorf("jobs: remove queue %s: %w", name, dao.ErrNotFound)
	}
	if q.stop == nil {
		return nil
	}
	q.stop()
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("jobs: remove queue %s: %w", name, ctx.Err())
	}
}

// startQueue starts q's worker and its wait ends under rs, and the
// client's wake-ups with its first queue; queuesMu is held.
func (c *Client) startQueue(rs *runState, q *queueRunner) {
	qctx, stop := context.WithCancel(rs.ctx)
	wctx, stopWaits := context.WithCancel(rs.bgCtx)
	done := make(chan struct{})
	q.stop, q.done = stop, done
	rs.listen.Do(func() { rs.bg.Go(func() { c.listenLoop(rs.bgCtx) }) })
	rs.wg.Go(func() {
		defer close(done)
		defer stop()
		var waits sync.WaitGroup
		waits.Go(func() { c.endWaits(wctx, q) })
		if err := q.w.Run(dao.WithClaimTrace(qctx, c.claimTrace(dao.ContextClaimTrace(qctx)))); err != nil {
			rs.fail(fmt.Errorf("jobs: queue %s: %w", q.name, err))
		}
		stopWaits()
		waits.Wait()
		q.due.stop()
	})
}

// lacking returns the optional interfaces of package dao that store lacks
// and the client uses, other than dao.TxBinder (whose absence fails the
// calls that need it) and the outcome writes (each queue's dispatch worker
// reports those), with what their absence costs.
func lacking(store dao.Store[Row]) (missing, effects []string) {
	for _, o := range []struct {
		ok           bool
		name, effect string
	}{
		{isA[dao.IdempotentCreator[Row]](store), "dao.IdempotentCreator", "unique jobs are inserted one statement per row"},
		{isA[dao.TableNamer](store), "dao.TableNamer", "the job table is taken to be " + DefaultTable},
		{isA[dao.Aser](store), "dao.Aser", "jobs inserted by other processes start at a tick instead of at once"},
		{isA[dao.Listener](store), "dao.Listener", "PostgreSQL's insert notifications are not listened to"},
		{isA[dao.Clock](store) || !store.Capabilities().DatabaseClock, "dao.Clock", "times are read from the host's clock instead of the database's"},
	} {
		if !o.ok {
			missing = append(missing, o.name)
			effects = append(effects, o.effect)
		}
	}
	return missing, effects
}

// isA reports whether v implements I.
func isA[I any](v any) bool {
	_, ok := v.(I)
	return ok
}

// tableOf returns the table name store reports, or DefaultTable.
func tableOf(store any) string {
	if n, ok := store.(dao.TableNamer); ok && n.TableName() != "" {
		return n.TableName()
	}
	return DefaultTable
}

// workerID returns the dispatch worker id of queue name: the client id,
// "/" and the queue name, or a digest of the name when that is too long
// for a lease owner token.
func (c *Client) workerID(name string) string {
	id := c.cfg.WorkerID + "/" + name
	if len(id) <= dispatch.MaxWorkerIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(name))
	return c.cfg.WorkerID + "/" + hex.EncodeToString(sum[:8])
}

// newQueueWorker returns the dispatch worker of one queue: it claims the
// queue's available jobs in priority, scheduled time and id order
// (attempt + 1, attempted_at now, with a lease) and runs each with
// c.handle.
func (c *Client) newQueueWorker(name string, qc QueueConfig) (*dispatch.Worker[Row], error) {
	maxWorkers := cmp.Or(qc.MaxWorkers, DefaultMaxWorkers)
	batch := min(cmp.Or(qc.BatchSize, max(1, maxWorkers/2)), maxWorkers)
	claim, written, bind := c.limitedClaim(name, qc.Limit)
	w, err := dispatch.New(dispatch.Config[Row]{
		Store:      c.store,
		KeyField:   ColID,
		Key:        func(r *Row) any { return r.ID },
		OwnerField: ColLeaseOwner,
		UntilField: ColLeaseUntil,
		// An available job is due: whoever made it available (an insert,
		// the scheduler, a promotion) judged its time come by its own
		// clock. Reading scheduled_at again by this client's clock would
		// leave a job inserted to run now by a process whose estimate of
		// the database's clock runs ahead unclaimed until the next tick.
		Due: func(time.Time) dao.Criteria {
			return dao.And(
				dao.Eq(ColState, string(StateAvailable)),
				dao.Eq(ColQueue, name),
				c.kindsIn,
				dao.LtField(ColAttempt, ColMaxAttempts),
				dao.IsNull(ColCancelRequestedAt),
			)
		},
		OrderBy: []dao.Order{dao.Asc(ColPriority), dao.Asc(ColScheduledAt), dao.Asc(ColID)},
		ClaimSet: func(now time.Time) dao.Set {
			return dao.Set{ColAttempt: dao.Incr(1), ColAttemptedAt: now}
		},
		// A job released before its work started gets its attempt back.
		ReleaseSet:   func(time.Time) dao.Set { return attemptBack },
		Handler:      c.handle,
		Prepare:      c.prepare,
		Written:      written,
		Claim:        claim,
		Paused:       func() bool { return c.isPaused(name) },
		WorkerID:     c.workerID(name),
		Concurrency:  maxWorkers,
		BatchSize:    batch,
		PollInterval: c.cfg.PollInterval,
		Lease:        c.cfg.Lease,
		DrainTimeout: c.cfg.DrainTimeout,
		Now:          c.cfg.Now,
		Logger:       c.cfg.Logger,
	})
	if err == nil {
		bind(w)
	}
	return w, err
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
		for _, q := range c.queueList() {
			q.w.Wake()
		}
		return
	}
	if q, ok := c.queue(name); ok {
		q.w.Wake()
	}
}

// endWaitAfter ends, in d, the wait of a job of queue name that this
// client made retryable or scheduled d ahead, when d is at most
// ScheduleAhead: then the queue's jobs whose time has come are made
// available and the queue claims at once (see endWaits). The job's
// outcome is written within the worker's outcome delay after d began, so
// the wait is ended that much after d.
func (c *Client) endWaitAfter(name string, d time.Duration) {
	q, ok := c.queue(name)
	if !ok || d > ScheduleAhead {
		return
	}
	q.due.add(time.Now().Add(max(d, 0) + q.w.Config().OutcomeDelay))
}

// endWaits makes the due retryable and scheduled jobs of q available and
// wakes q's worker each time a wait endWaitAfter asked for ends, until
// ctx ends.
func (c *Client) endWaits(ctx context.Context, q *queueRunner) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.waitsEnded:
		}
		if err := c.makeDueAvailable(ctx, q.name); err != nil && ctx.Err() == nil {
			c.log.Warn("making due jobs available failed; the scheduler will", "queue", q.name, "err", err)
		}
		q.w.Wake()
	}
}

// makeDueAvailable makes the retryable and scheduled jobs of queue whose
// time has come available, in one statement (on PostgreSQL by the
// schedule index), run again when the database ends it as a deadlock
// victim (retryConflict).
func (c *Client) makeDueAvailable(ctx context.Context, queue string) error {
	now, err := c.now(ctx)
	if err != nil {
		return err
	}
	_, err = c.retryConflict(ctx, func() (int64, error) {
		return c.store.Update(ctx, dao.And(dueWaiting(now), dao.Eq(ColQueue, queue)), dao.Set{ColState: string(StateAvailable)})
	})
	return err
}

// Run runs the client until ctx ends (or [Client.Stop]): the workers of
// its queues, those of Config.Queues and those added with
// [Client.AddQueue], the wake-ups (PostgreSQL notifications of inserts,
// the change signal elsewhere, inserts of the same process), the
// per-tick reads of queue pauses and cancel requests, the
// maintenance (on the leader: the scheduler, the rescuer, the retention
// sweep) and the periodic jobs. A client with no queue runs the rest
// until ctx ends too. When ctx ends it drains: no more claims, running
// jobs get DrainTimeout to finish, then their contexts are cancelled; a
// job cancelled by the drain is released without spending its attempt.
// Run returns once every goroutine it started has ended (a work function
// that ignores its cancelled context holds it, see dispatch.Worker.Run):
// nil after the drain; an error wrapping dao.ErrInvalidArgument for a
// request the store refuses, after stopping the whole client as its end
// would; [ErrAlreadyRunning] when Run is already running.
func (c *Client) Run(ctx context.Context) error {
	if !c.runningRun.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer c.runningRun.Store(false)
	ctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := make(chan struct{})
	defer close(ran)
	c.runMu.Lock()
	c.stopRun, c.ran = stopRun, ran
	c.runMu.Unlock()
	queues := c.queueList()
	if c.cfg.Workers != nil {
		kinds := c.cfg.Workers.Kinds()
		if len(kinds) == 0 && len(queues) > 0 {
			return fmt.Errorf("jobs: run: %w", argerr.Errorf("queues to run but no worker in Workers"))
		}
		// The queues claim the kinds of the workers registered now.
		if len(kinds) > 0 {
			c.kindsIn = dao.In(ColKind, anys(kinds)...)
		}
	}
	if len(queues) > 0 {
		c.recordKindsNow(ctx)
	}
	if err := c.readPauses(ctx); err != nil && !errors.Is(err, ErrNoQueueStore) {
		c.log.Warn("reading queue pauses failed; queues run until the next read", "err", err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	record := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// A queue whose worker fails (a request the store refuses) stops
	// the client, so that Run returns its error.
	fail := func(err error) {
		record(err)
		stopRun()
	}
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var bg sync.WaitGroup
	rs := &runState{ctx: ctx, bgCtx: bgCtx, wg: &wg, fail: fail, bg: &bg}
	c.queuesMu.Lock()
	c.run = rs
	for _, q := range c.queues {
		c.startQueue(rs, q)
	}
	c.queuesMu.Unlock()
	// The reads of pauses and cancel requests go on while the queues
	// drain, so that a job cancelled then still stops.
	pollCtx, stopPoll := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPoll()
	bg.Go(func() { c.pollLoop(pollCtx) })
	bg.Go(func() { c.recheckLoop(pollCtx) })
	bg.Go(func() { c.promoteLoop(pollCtx) })
	if e := c.elector; e != nil {
		bg.Go(func() { _ = e.Run(bgCtx) })
	}
	bg.Go(func() { c.maintain(bgCtx, c.leader) })
	if p := c.periodic; p != nil {
		bg.Go(func() {
			if err := p.run(bgCtx); err != nil {
				c.log.Error("periodic jobs stopped", "err", err)
				record(err)
			}
		})
	}
	c.log.Info("jobs client started", "queues", len(queues), "poll_interval", c.cfg.PollInterval, "lease", c.cfg.Lease)
	<-ctx.Done()
	// No queue starts after this: the wait group's count only falls.
	c.queuesMu.Lock()
	c.run = nil
	c.queuesMu.Unlock()
	wg.Wait()
	stopBG()
	stopPoll()
	bg.Wait()
	c.log.Info("jobs client stopped")
	return errors.Join(errs...)
}

// Stop ends the running Run as the end of its context does — no more
// claims, running jobs get DrainTimeout to finish, then their work is
// cancelled and the jobs released without spending their attempt — and
// waits until Run has returned. It returns nil then, or ctx's error when
// ctx ends first (Run goes on draining). Without a Run running it
// returns nil at once.
func (c *Client) Stop(ctx context.Context) error {
	return c.stop(ctx, false)
}

// StopAndCancel is [Client.Stop] without the wait for running jobs: their
// work's contexts are cancelled at once (cause dispatch.ErrDrained) and
// their jobs released without spending their attempt, as the drain does
// after DrainTimeout. It waits until Run has returned, or returns ctx's
// error when ctx ends first.
func (c *Client) StopAndCancel(ctx context.Context) error {
	return c.stop(ctx, true)
}

// stop ends the running Run, cancelling its running jobs at once when
// cancel is true, and waits for it.
func (c *Client) stop(ctx context.Context, cancel bool) error {
	c.runMu.Lock()
	stopRun, ran := c.stopRun, c.ran
	c.runMu.Unlock()
	if stopRun == nil {
		return nil
	}
	if cancel {
		for _, q := range c.queueList() {
			q.w.CancelDrain()
		}
	}
	stopRun()
	select {
	case <-ran:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("jobs: stop: %w", ctx.Err())
	}
}

// pollLoop reads, once per tick, the queue pauses and the cancel
// requests of the jobs running in this client.
func (c *Client) pollLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.PollInterval)
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
		if c.kindsStale.Swap(false) || (c.queueCount() > 0 && time.Since(c.kindsRecorded) >= KindsRefresh) {
			c.recordKindsNow(ctx)
		}
	}
}

// recordKindsNow records the client's queues and kinds in the queue
// table (see recordKinds), logging a failure: the next refresh tries
// again.
func (c *Client) recordKindsNow(ctx context.Context) {
	c.kindsRecorded = time.Now()
	if c.cfg.QueueStore == nil {
		return
	}
	if err := c.recordKinds(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("recording the client's queues and kinds in the queue table failed", "err", err)
	}
}

// readPauses reads the queue table and sets which queues are paused.
func (c *Client) readPauses(ctx context.Context) error {
	if c.cfg.QueueStore == nil {
		return ErrNoQueueStore
	}
	if c.queueCount() == 0 {
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
	var resumed, newlyPaused []string
	for name := range c.paused {
		if !paused[name] {
			resumed = append(resumed, name)
		}
	}
	for name := range paused {
		if !c.paused[name] {
			newlyPaused = append(newlyPaused, name)
		}
	}
	c.paused = paused
	c.pausedMu.Unlock()
	for _, name := range resumed {
		c.wake(name)
		if _, runs := c.queue(name); runs {
			c.emitQueue(EventQueueResumed, name)
		}
	}
	for _, name := range newlyPaused {
		if _, runs := c.queue(name); runs {
			c.emitQueue(EventQueuePaused, name)
		}
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
				rj.stop(ErrCancelled)
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
// notifications sent meanwhile are lost. Elsewhere it reads the table's
// change signal every poll interval (pollSignal). Until ctx ends, inserts
// through other clients of this process wake the queues too (joinLocal).
func (c *Client) listenLoop(ctx context.Context) {
	defer c.joinLocal()()
	c.wake("") // jobs this process inserted before the client joined
	l, ok := c.store.(dao.Listener)
	if !ok || !l.CanListen() || !notifies(c.store) {
		c.pollSignal(ctx)
		<-ctx.Done()
		return
	}
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		// The empty payload comes once LISTEN is in place: every queue
		// claims then, for the jobs committed before it.
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
	completed, retried, discarded, cancelled, snoozed, conflicts atomic.Int64
}

// claimTrace returns the trace given to the queues' workers: it counts
// the conflicts their claims absorbed (Stats.ConflictRetries) and passes
// them on to outer, the trace of Run's context, when there is one.
func (c *Client) claimTrace(outer *dao.ClaimTrace) *dao.ClaimTrace {
	tr := &dao.ClaimTrace{Conflict: func(ctx context.Context) {
		c.stats.conflicts.Add(1)
		if outer != nil && outer.Conflict != nil {
			outer.Conflict(ctx)
		}
	}}
	if outer != nil {
		tr.CandidatesRead = outer.CandidatesRead
	}
	return tr
}

// Stats are running totals of the jobs one client ran, by outcome.
type Stats struct {
	Completed int64 // succeeded
	Retried   int64 // failed with attempts left
	Discarded int64 // failed their last attempt
	Cancelled int64 // cancelled while running, by their work function or by the error handler
	Snoozed   int64 // snoozed
	// EventsDropped counts events not delivered because a subscriber's
	// channel was full ([Client.SubscribeConfig]).
	EventsDropped int64
	// ConflictRetries counts the writes of this client that the database
	// ended with a conflict (dao.ErrConflict: a deadlock victim, a
	// serialization failure or, on MariaDB Galera Cluster, a
	// certification failure between nodes, MySQL and MariaDB error 1213)
	// and that the client absorbed rather than returned: the claims of
	// its queues (one per claim write ended so: the claim went on with
	// its other candidates or ran its transaction again, see
	// dispatch.Stats.ConflictRetries) and the scheduler's and the
	// retention sweep's statements run again (one per run after the
	// first). The claims are counted on the SQL backends. The count
	// grows with claimers meeting on the same jobs: on Galera, with the
	// nodes' clients meeting there.
	ConflictRetries int64
}

// Stats returns the client's running totals. An outcome is counted when
// its work function returned; its write follows within the outcome delay.
func (c *Client) Stats() Stats {
	return Stats{
		Completed: c.stats.completed.Load(), Retried: c.stats.retried.Load(), Discarded: c.stats.discarded.Load(),
		Cancelled: c.stats.cancelled.Load(), Snoozed: c.stats.snoozed.Load(),
		EventsDropped: c.events.dropped.Load(), ConflictRetries: c.stats.conflicts.Load(),
	}
}
