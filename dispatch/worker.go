package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/batchloop"
	"github.com/claimstore/claimstore/internal/handlerctx"
	"github.com/claimstore/claimstore/internal/workerid"
)

// Worker defaults.
const (
	// DefaultPollInterval is the poll interval of a worker whose lease is
	// at least 4 s ([PollIntervalFor]).
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultConcurrency  = 10
	DefaultDrainTimeout = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultOutcomeDelay = 50 * time.Millisecond
	// MaxWorkerIDLen is the longest WorkerID, in bytes: the lease owner
	// written to a row is the worker id, "#" and a claim sequence number,
	// and must fit a 191-byte column.
	MaxWorkerIDLen = 160
)

// DefaultTick is DefaultPollInterval.
//
// Deprecated: use DefaultPollInterval.
const DefaultTick = DefaultPollInterval

// PollIntervalFor returns the poll interval a worker uses when
// [Config].PollInterval is zero: [DefaultPollInterval], or lease/4 when
// that is shorter (at least 1 ms). A poll interval of at most a quarter of
// the lease renews a running handler's lease (due at half the lease) by
// three quarters of it, which leaves a quarter of the lease for the
// renewal's write; the rule an explicit PollInterval must meet, at most
// 3/8 of the lease, holds (for a lease of 3 ms or more). lease is the
// lease length, [DefaultLease] when zero or negative.
func PollIntervalFor(lease time.Duration) time.Duration {
	if lease <= 0 {
		lease = DefaultLease
	}
	return max(min(DefaultPollInterval, lease/4), time.Millisecond)
}

// TickFor is PollIntervalFor: it returns the poll interval for a lease.
//
// Deprecated: use PollIntervalFor.
func TickFor(lease time.Duration) time.Duration { return PollIntervalFor(lease) }

// Job is one claimed row handed to a [Handler].
type Job[T any] struct {
	// Row is the row in its post-claim state.
	Row T
	// Owner is the fencing token written to the row's lease owner column
	// by the claim: the worker id, "#" and a sequence number unique to
	// the claim within the worker. Every later write of the worker to the
	// row (renewal, outcome, release) is conditioned on it.
	Owner string
	// ClaimedAt is the time of the claim by the worker's clock.
	ClaimedAt time.Time

	now func() time.Time
}

// Now returns the current time by the worker's clock (the database's
// clock by default, see [Config].Now), in UTC, without I/O.
func (j *Job[T]) Now() time.Time { return j.now() }

// Handler runs one claimed row. ctx ends when the row's lease is lost
// (context.Cause(ctx) is [ErrLeaseLost]) or when the worker drains past
// its timeout (cause [ErrDrained]). It returns the outcome to write to the
// row: the worker applies it fenced by the row's primary key and lease
// owner, together with clearing the lease (owner "" and lease end the
// current time), so a worker that lost the row changes nothing. Outcomes
// are written in batches: the outcomes of rows that finished together and
// hold identical Sets are written in one statement (see
// [Config].OutcomeDelay), each row still fenced by its own key and owner.
// A nil Set writes no outcome and releases the lease, so the row is
// claimable again at once if it is still due. The worker never changes a
// returned Set, so a handler may return one shared Set for a common
// outcome; the grouping then costs less. A handler that panics leaves
// the lease as it is: the row is claimable again when its lease ends.
type Handler[T any] func(ctx context.Context, job *Job[T]) dao.Set

// Config configures a [Worker]. Store, KeyField, Key, Due and Handler are
// required; zero durations and sizes take their defaults, negative ones
// are invalid.
type Config[T any] struct {
	// Store holds the rows.
	Store dao.Store[T]
	// KeyField is the primary key column, e.g. "id".
	KeyField string
	// Key returns a row's primary key value.
	Key func(row *T) any
	// OwnerField is the lease owner column, a string column of at least
	// 191 bytes; default "lease_owner".
	OwnerField string
	// UntilField is the lease end column, a time column (nullable or
	// not); default "lease_until". A row is claimable while it is NULL or
	// not after the current time.
	UntilField string
	// Due returns the criteria of the rows due at now (for example
	// status = active and next_fire_at <= now). The worker adds the lease
	// condition itself.
	Due func(now time.Time) dao.Criteria
	// OrderBy is the claim order, e.g. the due time ascending.
	OrderBy []dao.Order
	// ClaimSet returns further claim fields written with the lease by
	// every claim at now; optional.
	ClaimSet func(now time.Time) dao.Set
	// ReleaseSet, optional, returns further fields written at now, with
	// the lease cleared, to the rows of a claim that the worker releases
	// before their handlers start (the claim answered after the lease
	// less two ticks, or after Run's context ended; see PollInterval): what undoes
	// ClaimSet's counting, e.g. dao.Incr(-1) of an attempt counter that
	// ClaimSet increments. Rows whose handlers started, released by the
	// drain, do not get it.
	ReleaseSet func(now time.Time) dao.Set
	// Handler runs each claimed row.
	Handler Handler[T]
	// Prepare, optional, is called in the claim loop with the rows of each
	// claim before their handlers start; what it writes into the rows
	// reaches their handlers. It suits per-row work that is cheaper done
	// in one goroutine for the whole claim than in each handler's (the
	// jobs package decodes job arguments there: a decoder that grows a
	// fresh handler goroutine's stack costs more than the decoding). It
	// must not block or do I/O.
	Prepare func(rows []T)
	// Written, optional, is called once the outcome write of a row has
	// committed, with the job its handler ran (its Row as the handler
	// left it) and the Set written (nil: the lease was only released).
	// It is not called for an outcome the fence refused (the lease was
	// lost) or whose write failed; for an outcome the handler wrote
	// itself ([Settled]) it is called when the handler returns. It runs on the outcome writer's
	// goroutine, after the write and before the row's slot is freed: it
	// must return at once, without I/O (the jobs package emits its
	// events there).
	Written func(job *Job[T], set dao.Set)
	// Paused, optional, is asked before each claim: while it returns true
	// the worker claims nothing, and handlers already running go on with
	// their leases renewed (a paused job queue). It must return at once,
	// without I/O.
	Paused func() bool
	// Claim, optional, claims in place of Store.Claim: it gets the
	// claim's time by the worker's clock and the request the worker
	// would send (Due and the lease condition, the claim Set with the
	// lease, at most Limit rows, OrderBy), and returns, as Store.Claim
	// does, the rows it claimed in their post-claim state, fewer than
	// Limit when it chooses to. Package jobs claims the jobs of a queue
	// with a global limit or a rate limit so.
	Claim func(ctx context.Context, now time.Time, req dao.ClaimRequest) ([]T, error)

	// WorkerID names this worker in the lease owner column; default
	// "<hostname>-<pid>-<random>" (outbox.DefaultWorkerID). At most
	// MaxWorkerIDLen bytes.
	WorkerID string
	// Concurrency is the most rows the worker holds at once: handlers
	// running plus finished rows whose outcome is not written yet;
	// default 10.
	Concurrency int
	// BatchSize is the most rows one claim takes, and the number of
	// finished rows whose outcomes are written at once without waiting
	// for OutcomeDelay; default Concurrency/2 (at least 1), at most
	// Concurrency. The worker never claims more rows than it has free
	// slots. While rows are due (the last claim was full) it claims when
	// BatchSize slots are free, or at the next tick with the slots free
	// then, so claims stay near BatchSize rows.
	BatchSize int
	// OutcomeDelay is the longest a finished row's outcome waits to be
	// written together with others; default 50 ms or a tenth of the
	// Lease, whichever is shorter; at most a quarter of the Lease (the
	// lease of a finished row is not renewed). The outcomes waiting
	// are written at once when BatchSize of them wait, when no handler
	// runs, and when the worker drains. Stats count an outcome only once
	// its write committed.
	OutcomeDelay time.Duration
	// PollInterval is the heartbeat: the wait between claims when the
	// last claim was not full, and the period of lease renewal. Zero
	// derives it from the lease with [PollIntervalFor]: 1 s, or a quarter
	// of a lease shorter than 4 s. An explicit PollInterval must be at
	// most 3/8 of the lease ([dao.ErrInvalidArgument] otherwise): the rows
	// of a claim are started only when it answered within the lease less
	// two poll intervals (a later claim hands out nothing and releases its
	// rows), and that must leave a claim its deadline, a quarter of the
	// lease. While rows are due, a claim that returns a full batch is
	// followed by the next one as soon as BatchSize slots are free.
	PollInterval time.Duration
	// Tick is read as PollInterval when PollInterval is zero.
	//
	// Deprecated: use PollInterval.
	Tick time.Duration
	// Lease is how long a claim holds a row; default 30 s. A handler
	// running past half its lease has the lease extended by Lease from
	// the renewal (one batched Update per tick for all such rows).
	Lease time.Duration
	// DrainTimeout is how long in-flight handlers may still run after the
	// context of Run ends; then they are cancelled and their leases
	// released. Default 10 s.
	DrainTimeout time.Duration
	// WriteTimeout bounds each outcome, renewal and release write, which
	// run even while the worker drains; default 10 s.
	WriteTimeout time.Duration
	// Now overrides the worker's clock (a fake clock in tests). By
	// default the worker uses the database's clock when the store reads
	// one (Capabilities().DatabaseClock; read once a minute and advanced
	// with the host's monotonic clock in between), so servers whose clocks
	// are skewed agree on what is due; else the host's clock.
	Now func() time.Time
	// Logger receives the worker's logs; default slog.Default().
	Logger *slog.Logger
	// Maintenance, when set, runs periodic tasks next to the worker; see
	// [Maintenance].
	Maintenance *Maintenance
	// MeterProvider, optional, receives the worker's OpenTelemetry
	// metrics (see [MetricFires]); nil records nothing.
	MeterProvider metric.MeterProvider
}

// Stats are running totals of one worker.
type Stats struct {
	Claimed       int64 // rows claimed
	Completed     int64 // outcomes written
	LeaseLost     int64 // rows whose renewal or outcome write the fence refused
	Renewed       int64 // lease renewals written
	RenewFailures int64 // renewal statements that failed
	Released      int64 // leases released (nil outcome, or drain)
	Panics        int64 // handlers that panicked
	WriteErrors   int64 // outcomes (rows) or release writes that failed
	InFlight      int64 // handlers running now
	Unwritten     int64 // finished rows whose outcome write has not ended
	Settled       int64 // rows whose handler wrote the outcome itself (Settled)
	// ConflictRetries counts the conflicts the worker's claims absorbed:
	// each claim write the database ended as a deadlock victim, a
	// serialization failure or, on MariaDB Galera Cluster, a
	// certification failure between nodes (dao.ErrConflict; MySQL and
	// MariaDB error 1213), after which the claim went on with its other
	// candidates (portable default) or ran its transaction again (MySQL
	// and MariaDB fast path), instead of returning an error. One per
	// write ended so, as the store reports them through
	// dao.ClaimTrace.Conflict (the SQL backends). Such a write claimed
	// nothing; its rows stay claimable. A count that grows with the
	// number of claimers or nodes shows them meeting on the same rows.
	ConflictRetries int64
}

// Errors of the worker.
var (
	// ErrLeaseLost is the cause of a handler's context when the row's
	// lease was lost (another worker owns it, or the lease could not be
	// renewed before it ended), and is wrapped by the logged error of an
	// outcome write the fence refused.
	ErrLeaseLost = errors.New("dispatch: lease lost")
	// ErrDrained is the cause of a handler's context when the worker
	// drained past its DrainTimeout; its lease is released.
	ErrDrained = errors.New("dispatch: drained")
	// ErrAlreadyRunning is the error [Worker.Run] returns while another
	// Run of the same worker has not returned.
	ErrAlreadyRunning = errors.New("dispatch: worker already running")
	// ErrRunning is ErrAlreadyRunning, the same value, so errors.Is
	// finds either.
	//
	// Deprecated: use ErrAlreadyRunning.
	ErrRunning = ErrAlreadyRunning
)

// item states
const (
	stateRunning  = iota // handler running
	stateWriting         // handler returned; outcome being written
	stateReleased        // released by the drain: no outcome is written
)

// inflight is one claimed row whose handler runs.
type inflight[T any] struct {
	job     *Job[T] // the job its handler runs
	key     any
	owner   string
	hctx    *handlerctx.Context // the handler's context, which the worker ends with CancelOwn
	renewed time.Time           // host clock (monotonic) when the last renewal (or the claim) was sent
	state   int
	lost    bool // the renewal found the lease lost (counted once)

	// ctx is Run's context, detached that context without its
	// cancellation (see start).
	ctx, detached context.Context
}

// Worker claims due rows of a store with a lease, runs a handler per row
// with bounded concurrency, renews the leases of long handlers and writes
// fenced outcomes. Several workers, in one process or many, may run over
// the same table: claims never overlap, and a worker that lost a row's
// lease changes nothing in it. A Worker is safe for concurrent use; Run
// may run once at a time.
type Worker[T any] struct {
	cfg   Config[T]
	clock *timeSource
	log   *slog.Logger
	m     *metrics
	// peek is clock.Peek, the clock of every Job: a method value made
	// once, where one taken at each Job would be allocated there.
	peek func() time.Time
	// keyUpdater and eachUpdater are the store's batched outcome writes,
	// nil when it lacks them (see New).
	keyUpdater  dao.KeyUpdater
	eachUpdater dao.EachUpdater

	running atomic.Bool
	runCtx  atomic.Pointer[context.Context] // the context of the current Run: ready while it is live
	seq     atomic.Int64

	mu    sync.Mutex
	items map[*inflight[T]]struct{}
	// drainNow, closed by CancelDrain, ends the drain's wait for the
	// handlers of the current Run (made by Run; guarded by mu).
	drainNow       chan struct{}
	drainNowClosed bool

	freed chan struct{}  // a slot was freed
	wake  chan struct{}  // Wake: claim now
	wg    sync.WaitGroup // handlers running
	// tasks hands a handler to an idle handler goroutine (see spawn);
	// runDone is closed when the current Run has drained, ending them.
	// goroutines counts every goroutine Run starts, handler goroutines
	// included, so that Run returns only once each has ended.
	tasks      chan *inflight[T]
	runDone    chan struct{}
	goroutines sync.WaitGroup
	comp       *completer[T]

	claimed, completed, leaseLost, renewed, renewFailures, released, panics, writeErrors, inFlight, unwritten, settled, conflicts atomic.Int64
}

// New returns a worker for cfg. It fails with an error wrapping
// [dao.ErrInvalidArgument] when a required field is missing or a setting
// is out of range, or with the meter provider's error when it cannot
// create an instrument; it does no I/O. A store that is not a
// [dao.KeyUpdater] and a [dao.EachUpdater] (a wrapper store that does not
// forward them) works, with its outcomes written one Update per row: New
// logs that once, at Warn; likewise a store whose Capabilities report the
// database's clock but that is not a [dao.Clock], on which the worker runs
// on the host's clock.
func New[T any](cfg Config[T]) (*Worker[T], error) {
	if cfg.Store == nil || cfg.KeyField == "" || cfg.Key == nil || cfg.Due == nil || cfg.Handler == nil {
		return nil, fmt.Errorf("dispatch: new worker: %w: Store, KeyField, Key, Due and Handler are required", dao.ErrInvalidArgument)
	}
	if cfg.Concurrency < 0 || cfg.BatchSize < 0 || cfg.PollInterval < 0 || cfg.Tick < 0 || cfg.Lease < 0 || cfg.DrainTimeout < 0 || cfg.WriteTimeout < 0 || cfg.OutcomeDelay < 0 {
		return nil, fmt.Errorf("dispatch: new worker: %w: negative setting", dao.ErrInvalidArgument)
	}
	if cfg.OwnerField == "" {
		cfg.OwnerField = "lease_owner"
	}
	if cfg.UntilField == "" {
		cfg.UntilField = "lease_until"
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = workerid.New()
	}
	if len(cfg.WorkerID) > MaxWorkerIDLen {
		return nil, fmt.Errorf("dispatch: new worker: %w: worker id longer than %d bytes", dao.ErrInvalidArgument, MaxWorkerIDLen)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = max(1, cfg.Concurrency/2)
	}
	cfg.BatchSize = min(cfg.BatchSize, cfg.Concurrency)
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, cfg.Tick)
	explicitPoll := cfg.PollInterval != 0
	if !explicitPoll {
		cfg.PollInterval = PollIntervalFor(cfg.Lease)
	}
	if cfg.OutcomeDelay == 0 {
		// A finished row's lease is not renewed: its outcome must be
		// written well before the lease ends.
		cfg.OutcomeDelay = min(DefaultOutcomeDelay, cfg.Lease/10)
	}
	if cfg.OutcomeDelay > cfg.Lease/4 {
		return nil, fmt.Errorf("dispatch: new worker: %w: outcome delay %v longer than a quarter of the lease (%v)", dao.ErrInvalidArgument, cfg.OutcomeDelay, cfg.Lease)
	}
	if explicitPoll && batchloop.StartWindow(cfg.Lease, cfg.PollInterval) < cfg.Lease/claimWait {
		return nil, fmt.Errorf("dispatch: new worker: %w: poll interval %v above 3/8 of the lease %v: the lease less two poll intervals leaves a claim less than its deadline, a quarter of the lease", dao.ErrInvalidArgument, cfg.PollInterval, cfg.Lease)
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Maintenance != nil {
		if err := cfg.Maintenance.check(); err != nil {
			return nil, fmt.Errorf("dispatch: new worker: %w", err)
		}
	}
	m, err := newMetrics(cfg.MeterProvider, attribute.String(AttrWorker, cfg.WorkerID))
	if err != nil {
		return nil, fmt.Errorf("dispatch: new worker: %w", err)
	}
	w := &Worker[T]{
		m:     m,
		cfg:   cfg,
		clock: newTimeSource(cfg.Now, cfg.Store, cfg.Store.Capabilities().DatabaseClock),
		log:   cfg.Logger.With("component", "dispatch.worker", "worker", cfg.WorkerID),
		items: make(map[*inflight[T]]struct{}),
		freed: make(chan struct{}, 1),
		wake:  make(chan struct{}, 1),
		tasks: make(chan *inflight[T]),
	}
	w.peek = w.clock.Peek
	w.keyUpdater, _ = cfg.Store.(dao.KeyUpdater)
	w.eachUpdater, _ = cfg.Store.(dao.EachUpdater)
	if _, ok := cfg.Store.(dao.Clock); !ok && cfg.Now == nil && cfg.Store.Capabilities().DatabaseClock {
		w.log.Warn("the store reads the database's clock but is not a dao.Clock: the worker runs on the host's clock; a wrapper store must forward dao.Clock to keep the database's",
			"store", fmt.Sprintf("%T", cfg.Store))
	}
	switch {
	case w.keyUpdater == nil:
		w.log.Warn("the store is not a dao.KeyUpdater: outcomes are written one statement per row; a wrapper store must forward dao.KeyUpdater and dao.EachUpdater to batch them",
			"store", fmt.Sprintf("%T", cfg.Store))
	case w.eachUpdater == nil:
		w.log.Warn("the store is not a dao.EachUpdater: outcomes that differ row by row are written one statement per row; a wrapper store must forward dao.EachUpdater to batch them",
			"store", fmt.Sprintf("%T", cfg.Store))
	}
	return w, nil
}

// Config returns the worker's configuration with defaults filled in.
func (w *Worker[T]) Config() Config[T] { return w.cfg }

// Stats returns the worker's running totals.
func (w *Worker[T]) Stats() Stats {
	return Stats{
		Claimed: w.claimed.Load(), Completed: w.completed.Load(), LeaseLost: w.leaseLost.Load(),
		Renewed: w.renewed.Load(), RenewFailures: w.renewFailures.Load(), Released: w.released.Load(),
		Panics: w.panics.Load(), WriteErrors: w.writeErrors.Load(), InFlight: w.inFlight.Load(),
		Unwritten: w.unwritten.Load(), Settled: w.settled.Load(), ConflictRetries: w.conflicts.Load(),
	}
}

// Run claims and handles due rows until ctx ends, then drains: the
// readiness handler answers 503 at once, claiming stops, in-flight
// handlers may finish for DrainTimeout, the rest are cancelled (cause
// [ErrDrained]). A cancelled handler that returns a nil outcome has its
// lease released (lease owner "", lease end now) so another worker takes
// the row at once; one that returns an outcome (its work completed as the
// drain began) has it written. The leases of handlers that ignore their
// cancelled context for WriteTimeout are released; their late outcome
// writes change nothing. Run returns after the outcome and release writes
// of the drain, and only once every goroutine it started has ended: a
// handler that ignores its cancelled context holds Run until it returns
// (logged every WriteTimeout while it does). Store errors are logged and
// retried at the next tick; Run returns an error only for a request the
// store refuses ([dao.ErrInvalidArgument], e.g. a field not in the model)
// or [ErrAlreadyRunning].
func (w *Worker[T]) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer w.running.Store(false)
	w.runCtx.Store(&ctx)
	defer w.runCtx.Store(nil)
	w.runDone = make(chan struct{})
	w.mu.Lock()
	w.drainNow, w.drainNowClosed = make(chan struct{}), false
	w.mu.Unlock()
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "lease", w.cfg.Lease, "poll_interval", w.cfg.PollInterval)

	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	bg := &w.goroutines
	bg.Go(func() { w.heartbeat(hbCtx) })
	if m := w.cfg.Maintenance; m != nil {
		bg.Go(func() { m.run(ctx, w.log) })
	}
	w.comp = newCompleter[T]()
	bg.Go(func() { w.completeLoop(ctx) })
	err := w.claimLoop(ctx)
	w.drain(ctx)
	stopHB()
	close(w.runDone) // ends the idle handler goroutines
	bg.Wait()
	if err != nil {
		w.log.Error("worker stopped", "err", err)
		return fmt.Errorf("dispatch: run: %w", err)
	}
	w.log.Info("worker stopped", "claimed", w.claimed.Load(), "completed", w.completed.Load(), "released", w.released.Load())
	return nil
}

// free returns the slots free for a claim: Concurrency less the handlers
// running and the finished rows whose outcome is not written yet.
func (w *Worker[T]) free() int {
	return w.cfg.Concurrency - int(w.inFlight.Load()) - int(w.unwritten.Load())
}

// signalFreed tells the claim loop that slots were freed.
func (w *Worker[T]) signalFreed() {
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// Wake makes a running worker claim at once, as if its tick had come: a
// producer calls it after it added due rows (a job inserted, a
// notification received), so they start without waiting for the tick.
// Wakes that come while a claim runs are merged into one claim after it.
// It does no I/O and never blocks.
func (w *Worker[T]) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// claimLoop claims and starts handlers until ctx ends: at once when it
// starts, then whenever BatchSize slots are free while rows are due (the
// last claim was full), and at every tick (or Wake) with the slots free
// then; never while Config.Paused says so. It is a batchloop.Loop paced
// by the tick, the wakes and the freed slots.
func (w *Worker[T]) claimLoop(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.PollInterval)
	defer tick.Stop()
	// backlog: the last claim filled its batch, so more may be due; the
	// next claim then waits for slots, not for the tick.
	backlog, ticked := true, true
	wait := func() {
		var freed <-chan struct{}
		if backlog {
			freed = w.freed // claim again when slots free
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
			ticked = true
		case <-w.wake:
			ticked = true
		case <-freed:
		}
	}
	var n int
	loop := batchloop.Loop{
		Log: w.log,
		Ready: func(ctx context.Context) bool {
			for ctx.Err() == nil {
				if w.cfg.Paused != nil && w.cfg.Paused() {
					backlog, ticked = false, false
				} else if free := w.free(); free > 0 && (free >= w.cfg.BatchSize || ticked) {
					n = min(free, w.cfg.BatchSize)
					return true
				}
				wait()
			}
			return false
		},
		Claim: func(ctx context.Context) (batchloop.Next, error) {
			got, err := w.claim(ctx, n)
			backlog, ticked = err == nil && got == n, false
			if backlog {
				return batchloop.Again, err
			}
			return batchloop.Idle, err
		},
		Wait: func(ctx context.Context, next batchloop.Next) bool {
			if next == batchloop.Again && w.free() >= w.cfg.BatchSize {
				return ctx.Err() == nil // more may be due: claim again at once
			}
			wait()
			return ctx.Err() == nil
		},
	}
	return loop.Run(ctx)
}

// The claim's deadline is Lease/claimWait; its rows are handled only when
// it answered within batchloop.StartWindow, the lease less two ticks (see
// claim).
const claimWait = 4

// claim claims up to n due rows and starts their handlers; it returns how
// many it claimed. The claim runs to completion even when ctx ends, so
// what it claimed is owned; rows claimed after ctx ended are released.
//
// The claim has a quarter of the lease (claimWait): a store that can end a
// statement waiting behind another transaction's lock (the SQL backends)
// returns then with the rows it committed and an error wrapping
// context.DeadlineExceeded, so that a claim stuck behind a frozen
// process's lock does not hold rows past their lease. Rows whose claim
// answered only after the lease less two ticks (batchloop.StartWindow, by
// the host's monotonic clock from before the worker's clock was read) are
// released unstarted: a handler started so late could not have its first
// renewal, at the next tick, written within another tick before its
// lease ends, and the lease may have ended meanwhile with another worker
// holding the rows. Should the release fail, the rows are claimable again
// when their lease ends.
func (w *Worker[T]) claim(ctx context.Context, n int) (int, error) {
	began := time.Now()
	now, err := w.clock.Now(ctx)
	if err != nil {
		return 0, err
	}
	owner := w.cfg.WorkerID + "#" + strconv.FormatInt(w.seq.Add(1), 10)
	set := dao.Set{}
	if w.cfg.ClaimSet != nil {
		for k, v := range w.cfg.ClaimSet(now) {
			set[k] = v
		}
	}
	set[w.cfg.OwnerField] = owner
	set[w.cfg.UntilField] = now.Add(w.cfg.Lease)
	sent := time.Now()
	cctx, cancel := batchloop.ClaimContext(ctx, w.cfg.Lease/claimWait)
	cctx = dao.WithClaimTrace(cctx, w.claimTrace(dao.ContextClaimTrace(ctx)))
	req := dao.ClaimRequest{
		Where:   dao.And(w.cfg.Due(now), dao.Or(dao.IsNull(w.cfg.UntilField), dao.Le(w.cfg.UntilField, now))),
		Set:     set,
		Limit:   n,
		OrderBy: w.cfg.OrderBy,
	}
	var rows []T
	if w.cfg.Claim != nil {
		rows, err = w.cfg.Claim(cctx, now, req)
	} else {
		rows, err = w.cfg.Store.Claim(cctx, req)
	}
	cancel()
	w.claimed.Add(int64(len(rows)))
	took := time.Since(began)
	late := took > batchloop.StartWindow(w.cfg.Lease, w.cfg.PollInterval)
	if len(rows) > 0 && (ctx.Err() != nil || late) {
		if late {
			w.log.Warn("claim answered after the lease less two ticks; its rows are released, not handled",
				"rows", len(rows), "owner", owner, "took", took.Round(time.Millisecond), "lease", w.cfg.Lease, "poll_interval", w.cfg.PollInterval)
		}
		keys := make([]any, len(rows))
		for i := range rows {
			keys[i] = w.cfg.Key(&rows[i])
		}
		w.release(ctx, map[string][]any{owner: keys}, true)
		return len(rows), err
	}
	if w.cfg.Prepare != nil && len(rows) > 0 {
		w.cfg.Prepare(rows)
	}
	if len(rows) > 0 {
		detached := context.WithoutCancel(ctx)
		for i := range rows {
			w.start(ctx, detached, &rows[i], owner, now, sent)
		}
	}
	if len(rows) > 0 {
		w.log.Debug("claimed", "rows", len(rows), "owner", owner)
	}
	return len(rows), err
}

// claimTrace returns the trace of the worker's claims: it counts their
// conflicts (Stats.ConflictRetries) and passes every stage on to outer,
// the trace of Run's context, when there is one.
func (w *Worker[T]) claimTrace(outer *dao.ClaimTrace) *dao.ClaimTrace {
	tr := &dao.ClaimTrace{Conflict: func(ctx context.Context) {
		w.conflicts.Add(1)
		if outer != nil && outer.Conflict != nil {
			outer.Conflict(ctx)
		}
	}}
	if outer != nil {
		tr.CandidatesRead = outer.CandidatesRead
	}
	return tr
}

// start runs the handler of one claimed row in its own goroutine, on a
// copy of *row. detached is ctx without its cancellation (one per claim):
// the parent of the handler's context, which the worker ends (a
// handlerctx.Context, which package jobs also ends on a job's cancel
// request), and the context of the in-flight metric, recorded also while
// draining.
func (w *Worker[T]) start(ctx, detached context.Context, row *T, owner string, claimedAt, sent time.Time) {
	job := &Job[T]{Row: *row, Owner: owner, ClaimedAt: claimedAt, now: w.peek}
	it := &inflight[T]{job: job, ctx: ctx, detached: detached, hctx: handlerctx.New(detached), key: w.cfg.Key(row), owner: owner, renewed: sent}
	w.mu.Lock()
	w.items[it] = struct{}{}
	w.mu.Unlock()
	w.inFlight.Add(1)
	w.m.inFlight.Add(detached, 1, w.m.addAttrs...)
	w.spawn(it)
}

// runHandler runs the handler of it, on a handler goroutine (see spawn), and
// hands its outcome to the completer.
func (w *Worker[T]) runHandler(it *inflight[T]) {
	defer func() {
		it.hctx.CancelOwn(nil)
		w.inFlight.Add(-1)
		w.m.inFlight.Add(it.detached, -1, w.m.addAttrs...)
		w.signalFreed()
		w.comp.signal() // with no handler left running, write at once
	}()
	set, ok := w.call(it.hctx, it.job)
	w.mu.Lock()
	state := it.state
	if state == stateRunning {
		it.state = stateWriting
	}
	w.mu.Unlock()
	if state == stateReleased {
		w.forget(it)
		return // the drain released the lease
	}
	if !ok {
		w.forget(it)
		return // panicked: the lease ends on its own
	}
	if isSettled(set) {
		w.settled.Add(1)
		if w.cfg.Written != nil {
			w.cfg.Written(it.job, set)
		}
		w.forget(it)
		return // the handler wrote the outcome itself
	}
	w.enqueue(it.ctx, it, set)
}

// settledKey is the key of [Settled].
const settledKey = "\x00settled"

// Settled is the outcome a [Handler] returns for a row whose outcome it
// wrote itself (in its own transaction, say), fenced by the row's key and
// lease owner and clearing the lease: the worker writes nothing, counts
// it in Stats.Settled, calls Config.Written with it, and frees the slot.
// Should that write not have committed (a transaction rolled back), the
// row is claimable again when its lease ends.
var Settled = dao.Set{settledKey: true}

// isSettled reports whether set is [Settled].
func isSettled(set dao.Set) bool {
	_, ok := set[settledKey]
	return ok && len(set) == 1
}

// idleGoroutine is how long a handler goroutine waits for the next
// handler to run before it exits.
const idleGoroutine = 5 * time.Second

// spawn runs the handler of it on an idle handler goroutine, or on a new
// one when none is idle; wg counts it until the handler returns. A
// goroutine that ran a handler waits for the next one (ending when Run
// returns, or once it has been idle from one to two idleGoroutine), so
// that handlers reuse goroutines whose stacks their first calls
// (decoding, logging) have grown already, instead of growing a new one's
// stack, copying it each time, for every row.
func (w *Worker[T]) spawn(it *inflight[T]) {
	w.wg.Add(1)
	select {
	case w.tasks <- it:
	default:
		done := w.runDone
		w.goroutines.Go(func() { w.runTasks(it, done) })
	}
}

// runTasks runs the handler of it, then of each row spawn hands it,
// until done is closed or an idleGoroutine period of its timer passed
// without a handler. The timer runs in periods rather than being reset
// for every handler, which would move it in the runtime's timer heap once
// a row.
func (w *Worker[T]) runTasks(it *inflight[T], done <-chan struct{}) {
	t := time.NewTimer(idleGoroutine)
	defer t.Stop()
	for {
		w.runHandler(it)
		w.wg.Done()
		ran := true // a handler ran in the timer's current period
		for it = nil; it == nil; {
			select {
			case it = <-w.tasks:
			case <-t.C:
				if !ran {
					return
				}
				ran = false
				t.Reset(idleGoroutine)
			case <-done:
				return
			}
		}
	}
}

// call runs the handler, recovering a panic (ok false).
func (w *Worker[T]) call(ctx context.Context, job *Job[T]) (set dao.Set, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			w.panics.Add(1)
			w.log.Error("handler panicked; the row is claimable again when its lease ends", "owner", job.Owner, "key", w.cfg.Key(&job.Row), "panic", p)
			ok = false
		}
	}()
	return w.cfg.Handler(ctx, job), true
}

func (w *Worker[T]) forget(it *inflight[T]) {
	w.mu.Lock()
	delete(w.items, it)
	w.mu.Unlock()
}

// fence is the condition of every write to a claimed row: its key and the
// owner token of the claim.
func (w *Worker[T]) fence(key any, owner string) dao.Criteria {
	return dao.And(dao.Eq(w.cfg.KeyField, key), dao.Eq(w.cfg.OwnerField, owner))
}

// release clears the leases of rows (owner token → keys): owner "", lease
// end now, so another worker claims them at once; with unstarted (no
// handler of the rows started) it writes Config.ReleaseSet's fields too.
// It returns how many rows it released.
func (w *Worker[T]) release(ctx context.Context, rows map[string][]any, unstarted bool) int64 {
	if len(rows) == 0 {
		return 0
	}
	n, err := timedWrite(ctx, w, func(wctx context.Context, now time.Time) (int64, error) {
		set := dao.Set{}
		if unstarted && w.cfg.ReleaseSet != nil {
			for k, v := range w.cfg.ReleaseSet(now) {
				set[k] = v
			}
		}
		set[w.cfg.OwnerField], set[w.cfg.UntilField] = "", now
		return w.cfg.Store.Update(wctx, w.owned(rows), set)
	})
	if err != nil {
		w.writeErrors.Add(1)
		w.log.Error("release failed; the rows are claimable again when their leases end", "err", err)
		return 0
	}
	w.released.Add(n)
	return n
}

// owned is the criteria of the rows keyed by owner token still held by
// those tokens.
func (w *Worker[T]) owned(rows map[string][]any) dao.Criteria {
	var or []dao.Criteria
	for owner, keys := range rows {
		or = append(or, dao.And(dao.In(w.cfg.KeyField, keys...), dao.Eq(w.cfg.OwnerField, owner)))
	}
	if len(or) == 1 {
		return or[0]
	}
	return dao.Or(or...)
}

// closeCompleter ends the completer loop once it has written every
// outcome queued; a handler that returns later has its outcome written at
// once (see enqueue).
func (w *Worker[T]) closeCompleter() {
	close(w.comp.stop)
	<-w.comp.done
}

// CancelDrain makes the drain of the current Run cancel the handlers
// still running at once (cause [ErrDrained]) rather than after
// DrainTimeout: for a stop that must not wait for running work. Called
// before Run's context ends, it takes effect when it does; it does not
// end Run (cancel its context for that). Calling it again, or while no
// Run runs, does nothing.
func (w *Worker[T]) CancelDrain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.drainNow != nil && !w.drainNowClosed {
		close(w.drainNow)
		w.drainNowClosed = true
	}
}

// drain waits up to DrainTimeout for in-flight handlers, then cancels the
// rest (cause ErrDrained). A cancelled handler that returns within
// WriteTimeout decides its row itself: a nil outcome releases the lease at
// once, an outcome (a fire that completed as the drain began) is written,
// so work that was done is not done again. The leases of handlers still
// running after that are released, and drain waits for them to return,
// saying every WriteTimeout how many it waits for.
func (w *Worker[T]) drain(ctx context.Context) {
	if w.inFlight.Load() > 0 {
		w.log.Info("draining", "in_flight", w.inFlight.Load(), "timeout", w.cfg.DrainTimeout)
	}
	done := make(chan struct{})
	w.goroutines.Go(func() { w.wg.Wait(); close(done) })
	t := time.NewTimer(w.cfg.DrainTimeout)
	defer t.Stop()
	before := w.released.Load()
	w.mu.Lock()
	now := w.drainNow
	w.mu.Unlock()
	select {
	case <-done:
		w.closeCompleter()
		w.m.drained(ctx, false, 0)
		return
	case <-t.C:
	case <-now:
	}
	w.mu.Lock()
	for it := range w.items {
		if it.state == stateRunning {
			it.hctx.CancelOwn(ErrDrained)
		}
	}
	w.mu.Unlock()
	t.Reset(w.cfg.WriteTimeout)
	select {
	case <-done:
	case <-t.C:
		rows := map[string][]any{}
		w.mu.Lock()
		for it := range w.items {
			if it.state == stateRunning {
				it.state = stateReleased
				rows[it.owner] = append(rows[it.owner], it.key)
			}
		}
		w.mu.Unlock()
		w.release(ctx, rows, false)
		// The released handlers' outcomes are not written when they
		// return; Run still waits for them.
		for waiting := true; waiting; {
			t.Reset(w.cfg.WriteTimeout)
			select {
			case <-done:
				waiting = false
			case <-t.C:
				w.log.Warn("drain: waiting for handlers that ignore their cancelled context", "handlers", w.inFlight.Load())
			}
		}
	}
	w.closeCompleter()
	n := w.released.Load() - before
	w.m.drained(ctx, true, n)
	w.log.Info("drain timeout: leases released", "released", n)
}
