package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/batchloop"
	"github.com/claimstore/claimstore/internal/workerid"
)

// Relay defaults.
const (
	DefaultBatchSize       = 100
	DefaultPollInterval    = 200 * time.Millisecond
	DefaultMaxPollInterval = 5 * time.Second
	// DefaultDrainTimeout is the default [RelayConfig.DrainTimeout].
	DefaultDrainTimeout = 10 * time.Second
	// DefaultWriteTimeout is the default [RelayConfig.WriteTimeout].
	DefaultWriteTimeout = 10 * time.Second
	// DefaultWindow is the default [RelayConfig.Window]: one batch per
	// loop, claimed, published and marked before the next claim.
	DefaultWindow = 1
	// MaxWindow is the largest [RelayConfig.Window] a relay accepts.
	MaxWindow = 64
)

// Deprecated names of the relay defaults, kept for one release.
const (
	// DefaultShutdownTimeout is DefaultDrainTimeout.
	//
	// Deprecated: use DefaultDrainTimeout.
	DefaultShutdownTimeout = DefaultDrainTimeout
	// DefaultMarkTimeout is DefaultWriteTimeout.
	//
	// Deprecated: use DefaultWriteTimeout.
	DefaultMarkTimeout = DefaultWriteTimeout
)

// RelayConfig configures a [Relay]. Zero fields take their defaults;
// negative durations or sizes are invalid.
//
// Clocks: every bound the relay puts on its own I/O — the claim's timeout,
// PublishTimeout, the end of a batch's lease as far as its publish is
// concerned, DrainTimeout and WriteTimeout — is a duration measured on
// this host's monotonic clock from the moment the operation starts, so a
// wall clock that is skewed against the database, or stepped while the
// relay runs, neither shortens nor lengthens them. The times written in the
// table (LockedUntil, NextRetryAt) and the choice of the rows a claim may
// take come from the repository's clock; see [WithClock].
type RelayConfig struct {
	// WorkerID names this relay in LockedBy; default
	// "<hostname>-<pid>-<random>". With Loops > 1 each batch loop
	// uses WorkerID + "/<n>", so that marks are fenced per loop.
	WorkerID string
	// TargetBroker selects the messages this relay publishes.
	TargetBroker string
	// BatchSize is the most messages claimed at once; default 100.
	BatchSize int
	// PollInterval is the wait after a batch smaller than BatchSize and
	// the first wait after an empty claim; default 200 ms.
	PollInterval time.Duration
	// MaxPollInterval caps the idle wait, which doubles after each empty
	// claim (adaptive idle backoff); default 5 s.
	MaxPollInterval time.Duration
	// Lease is how long a claimed batch stays locked to this relay;
	// default the repository's lease. The repository writes LockedUntil =
	// now + Lease by its clock; the relay itself ends a batch's publish no
	// later than Lease after it sent the claim, on its monotonic clock.
	Lease time.Duration
	// PublishTimeout bounds one batch's publish, from the moment the
	// publish starts; default and maximum Lease/2, so that a batch is
	// marked well before its lease ends.
	PublishTimeout time.Duration
	// Loops is the number of batch loops, each claiming, publishing and
	// marking batches of its own; default 1.
	Loops int
	// Concurrency is read as Loops when Loops is zero.
	//
	// Deprecated: use Loops. Concurrency names a dispatch worker's
	// handler slots; here it counted batch loops.
	Concurrency int
	// Window is the most batches one loop holds claimed and not yet
	// marked, counted in batches; default [DefaultWindow] (1), at most
	// [MaxWindow]. With Window 1 a loop claims a batch, publishes it, waits
	// for the broker's acks, marks it, and only then claims the next. With
	// Window n it claims the next batch as soon as fewer than n are
	// unmarked, so up to n publishes are in flight while the loop claims,
	// and the acknowledged messages of every batch whose publish has ended
	// by the time the previous mark returns are marked together (one
	// UPDATE per 1000 ids). A relay thus holds at most
	// Loops × Window × BatchSize messages claimed at once; each
	// batch still publishes within its own lease and PublishTimeout, and
	// a failed or unacknowledged message is never marked published. The
	// batches of a window, like those of concurrent loops, may reach the
	// broker in any order relative to each other: the relay promises no
	// order across batches (nor across retries). Size the publisher's
	// limit on pending acks (natspub.Config.MaxPending) to at least
	// Loops × Window × BatchSize.
	Window int
	// DrainTimeout is how long in-flight batches may still publish after
	// the context of Run ends; what is not acknowledged by then is released
	// back to pending. Default [DefaultDrainTimeout], 10 s.
	DrainTimeout time.Duration
	// ShutdownTimeout is read as DrainTimeout when DrainTimeout is zero.
	//
	// Deprecated: use DrainTimeout.
	ShutdownTimeout time.Duration
	// WriteTimeout bounds the marks (and releases) that end a batch; they
	// run even while the relay drains. Default [DefaultWriteTimeout],
	// 10 s.
	WriteTimeout time.Duration
	// MarkTimeout is read as WriteTimeout when WriteTimeout is zero.
	//
	// Deprecated: use WriteTimeout.
	MarkTimeout time.Duration
	// Logger receives the relay's logs; default slog.Default().
	Logger *slog.Logger
	// MeterProvider receives the relay's metrics (see [MetricPublished] and
	// the other Metric names); default a no-op provider.
	MeterProvider metric.MeterProvider
}

// RelayStats are running totals of one relay since it was created.
type RelayStats struct {
	Claimed    int64 // messages claimed
	Published  int64 // messages marked published
	Failed     int64 // failed attempts to be retried
	Abandoned  int64 // messages abandoned
	Released   int64 // messages released at shutdown
	LeaseLost  int64 // messages whose mark the fence refused
	MarkErrors int64 // marks that failed with a store error
}

// Relay moves messages from the outbox table to a broker: it claims
// batches, publishes them, then marks them published or failed, in a poll
// loop with adaptive idle backoff. Several relays, in one process or on
// many servers, may run over the same table: claims never overlap, marks are
// fenced, and a relay that dies leaves its batch to be claimed again when
// its lease expires. Delivery is at least once; a broker that drops
// duplicates by message id (JetStream with Nats-Msg-Id) makes the stream
// effectively-once.
type Relay struct {
	repo    *Repository
	pub     Publisher
	cfg     RelayConfig
	log     *slog.Logger
	metrics *relayMetrics

	claimed, published, failed, abandoned, released, leaseLost, markErrors atomic.Int64
	noStream                                                               sync.Map // topics already reported by reportNoStream

	// hardStop makes Run return at once when its context ends, without
	// finishing, marking or releasing in-flight batches: a crash, for tests.
	hardStop bool
}

// NewRelay returns a relay that claims from repo and publishes with pub.
// It fails with an error wrapping [dao.ErrInvalidArgument] when repo or pub
// is nil or a setting is out of range (a negative size or duration, Window
// above [MaxWindow], MaxPollInterval below PollInterval), and with the
// meter's error when an instrument cannot be created.
func NewRelay(repo *Repository, pub Publisher, cfg RelayConfig) (*Relay, error) {
	if repo == nil || pub == nil {
		return nil, fmt.Errorf("outbox: new relay: %w: nil repository or publisher", dao.ErrInvalidArgument)
	}
	if cfg.BatchSize < 0 || cfg.PollInterval < 0 || cfg.MaxPollInterval < 0 || cfg.Lease < 0 ||
		cfg.PublishTimeout < 0 || cfg.Loops < 0 || cfg.Concurrency < 0 || cfg.DrainTimeout < 0 || cfg.ShutdownTimeout < 0 ||
		cfg.WriteTimeout < 0 || cfg.MarkTimeout < 0 || cfg.Window < 0 {
		return nil, fmt.Errorf("outbox: new relay: %w: negative setting in %+v", dao.ErrInvalidArgument, cfg)
	}
	if cfg.Window > MaxWindow {
		return nil, fmt.Errorf("outbox: new relay: %w: window %d above the maximum %d", dao.ErrInvalidArgument, cfg.Window, MaxWindow)
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = DefaultWorkerID()
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxPollInterval == 0 {
		cfg.MaxPollInterval = max(DefaultMaxPollInterval, cfg.PollInterval)
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		return nil, fmt.Errorf("outbox: new relay: %w: max poll interval %v below poll interval %v", dao.ErrInvalidArgument, cfg.MaxPollInterval, cfg.PollInterval)
	}
	if cfg.Lease == 0 {
		cfg.Lease = repo.Lease()
	}
	if cfg.PublishTimeout == 0 || cfg.PublishTimeout > cfg.Lease/2 {
		cfg.PublishTimeout = cfg.Lease / 2
	}
	cfg.Loops = cmp.Or(cfg.Loops, cfg.Concurrency, 1)
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, cfg.ShutdownTimeout, DefaultDrainTimeout)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, cfg.MarkTimeout, DefaultWriteTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkWorker(cfg.WorkerID + "/0000"); err != nil {
		return nil, fmt.Errorf("outbox: new relay: %w", err)
	}
	if err := checkLen("target broker", cfg.TargetBroker, MaxBrokerLen); err != nil {
		return nil, fmt.Errorf("outbox: new relay: %w", err)
	}
	m, err := newRelayMetrics(cfg.MeterProvider, cfg.TargetBroker)
	if err != nil {
		return nil, fmt.Errorf("outbox: new relay: metrics: %w", err)
	}
	if !repo.clockSet && repo.dbc == nil && repo.store.Capabilities().DatabaseClock {
		cfg.Logger.Warn("the store reads the database's clock but is not a dao.Clock: the relay's leases run on the host's clock; a wrapper store must forward dao.Clock to keep the database's",
			"store", fmt.Sprintf("%T", repo.store), "worker", cfg.WorkerID)
	}
	return &Relay{
		repo:    repo,
		pub:     pub,
		cfg:     cfg,
		metrics: m,
		log:     cfg.Logger.With("component", "outbox.relay", "worker", cfg.WorkerID, "target_broker", cfg.TargetBroker),
	}, nil
}

// DefaultWorkerID returns a new default worker id, the same id every
// package of claimstore takes when its config gives none: a [Relay], the
// WorkerID of a [LogReaderConfig], a dispatch worker, a jobs client, a
// coord elector and a Watermill subscriber. It takes nothing and returns
// "<hostname>-<pid>-<6 random hex digits>", the host name cut to 100
// bytes ("worker" when the host has no name), at most 115 bytes, so that
// a suffix such as "/<n>" keeps it within [MaxNameLen].
func DefaultWorkerID() string { return workerid.New() }

// Config returns the relay's configuration with defaults filled in.
func (r *Relay) Config() RelayConfig { return r.cfg }

// Stats returns the relay's running totals.
func (r *Relay) Stats() RelayStats {
	return RelayStats{
		Claimed: r.claimed.Load(), Published: r.published.Load(), Failed: r.failed.Load(),
		Abandoned: r.abandoned.Load(), Released: r.released.Load(), LeaseLost: r.leaseLost.Load(),
		MarkErrors: r.markErrors.Load(),
	}
}

// Run relays messages until ctx ends. Then it stops claiming, lets the
// in-flight batches publish for up to ShutdownTimeout, marks what the
// broker acknowledged and releases the rest back to pending, and returns
// nil. Store errors while claiming are logged and retried with the idle
// backoff; Run returns an error only for a misconfiguration the store
// rejects ([dao.ErrInvalidArgument]) or a failure to register the metrics
// callback. Run may be called once at a time.
func (r *Relay) Run(ctx context.Context) error {
	unregister, err := r.metrics.observeOldest(r.repo, r.cfg.TargetBroker)
	if err != nil {
		return fmt.Errorf("outbox: relay: register metrics callback: %w", err)
	}
	defer unregister()
	r.log.Info("relay started", "batch_size", r.cfg.BatchSize, "loops", r.cfg.Loops, "window", r.cfg.Window, "lease", r.cfg.Lease)

	loopCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	var fatal error
	var once sync.Once
	for i := range r.cfg.Loops {
		worker := r.cfg.WorkerID
		if r.cfg.Loops > 1 {
			worker = fmt.Sprintf("%s/%d", r.cfg.WorkerID, i)
		}
		wg.Go(func() {
			if err := r.loop(loopCtx, worker); err != nil {
				once.Do(func() { fatal = err })
				stop(err)
			}
		})
	}
	wg.Wait()
	if fatal != nil {
		r.log.Error("relay stopped", "err", fatal)
		return fmt.Errorf("outbox: relay: %w", fatal)
	}
	r.log.Info("relay stopped", "published", r.published.Load(), "failed", r.failed.Load(), "abandoned", r.abandoned.Load(), "released", r.released.Load())
	return nil
}

// loop is one batch loop: claim, publish, mark, until ctx ends, with up to
// Window batches claimed and not yet marked. When it returns, the batches
// still in its window have finished publishing and are marked or released.
func (r *Relay) loop(ctx context.Context, worker string) error {
	log := r.log.With("loop", worker)
	w := r.newWindow(ctx, log, worker)
	defer w.drain()
	b := batchloop.Backoff{PollInterval: r.cfg.PollInterval, Max: r.cfg.MaxPollInterval, Jitter: 0.2}
	loop := batchloop.Loop{
		Log:   log,
		Ready: w.acquire,
		Claim: func(ctx context.Context) (batchloop.Next, error) {
			start := time.Now()
			cctx, cancel := batchloop.ClaimContext(ctx, batchloop.ClaimTimeout)
			batch, err := r.repo.ClaimBatchLease(cctx, worker, r.cfg.BatchSize, r.cfg.TargetBroker, r.cfg.Lease)
			cancel()
			r.metrics.claimDur.Record(context.Background(), time.Since(start).Seconds(), r.metrics.attrs)
			if len(batch) == 0 {
				w.free(1)
			} else {
				r.claimed.Add(int64(len(batch)))
				r.metrics.batchSize.Record(context.Background(), int64(len(batch)), r.metrics.attrs)
				if ctx.Err() != nil {
					if !r.hardStop {
						r.release(ctx, log, worker, batch)
					}
					w.free(1)
					return batchloop.Idle, nil
				}
				// The lease began no earlier than the claim was sent:
				// start + Lease on the local monotonic clock is a lower
				// bound of its end, whatever the clock that wrote
				// LockedUntil says.
				w.publish(batch, start.Add(r.cfg.Lease))
			}
			switch {
			case err != nil || len(batch) == 0:
				return batchloop.Idle, err
			case len(batch) < r.cfg.BatchSize:
				return batchloop.Short, nil
			default:
				return batchloop.Again, nil
			}
		},
		Wait: b.Wait,
	}
	return loop.Run(ctx)
}

// outcome is what the publish of one batch came to: the ids the broker
// acknowledged (Done), the failures to record and the ids of the messages
// left unfinished by a shutdown (Released).
type outcome = batchloop.Outcome[Failure]

// publish publishes one claimed batch and sorts the results into an
// outcome; crashed is true when the relay stopped hard meanwhile (no mark,
// no release). leaseEnd is the end of the batch's lease on the local
// monotonic clock (time.Now plus a duration), which the publish deadline
// never passes. The batch's LockedUntil is not used: it was computed by
// the repository's clock, which may be skewed against this host's by any
// amount.
func (r *Relay) publish(ctx context.Context, log *slog.Logger, batch []Message, leaseEnd time.Time) (o outcome, crashed bool) {
	deadline := time.Now().Add(r.cfg.PublishTimeout)
	if leaseEnd.Before(deadline) {
		deadline = leaseEnd
	}
	pctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	// When ctx ends, the publish may go on for ShutdownTimeout more. The
	// watch ends before publish returns.
	watched := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(watched)
		t := time.NewTimer(r.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-pctx.Done():
		}
	})
	defer func() {
		started := !stopWatch()
		cancel()
		if started {
			<-watched
		}
	}()

	results := r.pub.Publish(pctx, batch)
	if r.hardStop && ctx.Err() != nil {
		return o, true // crash: no marks, no release
	}
	if len(results) != len(batch) {
		err := fmt.Errorf("outbox: publisher returned %d results for %d messages", len(results), len(batch))
		results = make([]error, len(batch))
		for i := range results {
			results[i] = err
		}
	}
	stopping := ctx.Err() != nil
	o.Size = len(batch)
	for i, err := range results {
		switch {
		case err == nil:
			o.Done = append(o.Done, batch[i].ID)
		case stopping && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			o.Released = append(o.Released, batch[i].ID)
		default:
			o.Failed = append(o.Failed, Failed(&batch[i], err))
			if errors.Is(err, ErrNoStream) {
				r.reportNoStream(log, batch[i].Topic, err)
			}
		}
	}
	return o, false
}

// mark writes the outcomes of one or more batches: the acknowledged ids of
// all of them in one MarkPublished (one UPDATE per 1000 ids), then each
// batch's failures, then the unfinished messages of all of them in one
// Release. Each mark is fenced, retried while a retry can cure its error
// and bounded by MarkTimeout (batchloop.Write): left undone, the batch
// would be published again after its lease.
func (r *Relay) mark(ctx context.Context, log *slog.Logger, worker string, outs []outcome) {
	// The marks of one call share one MarkTimeout.
	deadline := time.Now().Add(r.cfg.WriteTimeout)
	var ok []int64
	size := 0
	for i := range outs {
		ok = append(ok, outs[i].Done...)
		size += outs[i].Size
	}
	if len(ok) > 0 {
		refused, err := batchloop.Write(ctx, time.Until(deadline), func(ctx context.Context) ([]int64, error) { return r.repo.MarkPublished(ctx, worker, ok...) })
		n := int64(len(ok) - len(refused))
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			n = 0 // unknown: the rows are claimed and marked again after their lease
		}
		r.published.Add(n)
		r.metrics.published.Add(context.WithoutCancel(ctx), n, r.metrics.attrs)
		r.markError(log, "mark published", len(ok), refused, err)
	}
	var failed int
	var unfinished []int64
	for _, o := range outs {
		// One MarkFailed per batch: each batch draws its own retry
		// jitter, as the loops of separate batches always did.
		if failures := o.Failed; len(failures) > 0 {
			failed += len(failures)
			res, err := batchloop.Write(ctx, time.Until(deadline), func(ctx context.Context) (FailResult, error) { return r.repo.MarkFailed(ctx, worker, failures...) })
			r.failed.Add(int64(len(res.Retrying)))
			r.abandoned.Add(int64(len(res.Abandoned)))
			r.metrics.failed.Add(context.WithoutCancel(ctx), int64(len(res.Retrying)), r.metrics.attrs)
			r.metrics.abandoned.Add(context.WithoutCancel(ctx), int64(len(res.Abandoned)), r.metrics.attrs)
			r.markError(log, "mark failed", len(failures), res.NotApplied, err)
			if len(res.Abandoned) > 0 {
				log.Warn("messages abandoned", "count", len(res.Abandoned), "ids", res.Abandoned, "err", failures[0].Err)
			} else {
				log.Debug("publish failed", "count", len(res.Retrying), "err", failures[0].Err)
			}
		}
		unfinished = append(unfinished, o.Released...)
	}
	// The unfinished messages of every batch go back in one Release.
	if len(unfinished) > 0 {
		r.releaseIDs(ctx, log, worker, unfinished, time.Until(deadline))
	}
	log.Debug("batches done", "batches", len(outs), "size", size, "published", len(ok), "failed", failed, "released", len(unfinished))
}

// markError counts the rows of a mark of n rows the fence refused and
// logs the mark's error (batchloop.LogMark): a lost lease at WARN, any
// other at ERROR, counted as a mark error.
func (r *Relay) markError(log *slog.Logger, op string, n int, refused []int64, err error) {
	if len(refused) > 0 {
		r.leaseLost.Add(int64(len(refused)))
	}
	if batchloop.LogMark(log, slog.LevelWarn, slog.LevelError, ErrLeaseLost, op, n, len(refused), err) {
		r.markErrors.Add(1)
	}
}

// release gives batch back to pending (see releaseIDs).
func (r *Relay) release(ctx context.Context, log *slog.Logger, worker string, batch []Message) {
	ids := make([]int64, len(batch))
	for i := range batch {
		ids[i] = batch[i].ID
	}
	r.releaseIDs(ctx, log, worker, ids, r.cfg.WriteTimeout)
}

// releaseIDs gives the messages ids back to pending, within timeout even
// when ctx has ended.
func (r *Relay) releaseIDs(ctx context.Context, log *slog.Logger, worker string, ids []int64, timeout time.Duration) {
	refused, err := batchloop.Write(ctx, timeout, func(ctx context.Context) ([]int64, error) { return r.repo.Release(ctx, worker, ids...) })
	if err == nil || errors.Is(err, ErrLeaseLost) {
		r.released.Add(int64(len(ids) - len(refused)))
	}
	r.markError(log, "release", len(ids), refused, err)
	log.Info("released unfinished messages", "count", len(ids)-len(refused), "err", err)
}

// reportNoStream logs, at ERROR and once per topic for the relay's life, that
// no stream holds the subject messages of topic are published on, and how
// to fix it. The messages themselves are retried with backoff like every
// other failed publish, and abandoned past their max retries.
func (r *Relay) reportNoStream(log *slog.Logger, topic string, err error) {
	if _, seen := r.noStream.LoadOrStore(topic, true); seen {
		return
	}
	log.Error("no stream holds the subject of these messages: create a JetStream stream whose subjects include it "+
		"(jetstream.CreateStream, or claimstore relay --stream NAME --subjects SUBJECTS); until then they are retried with backoff "+
		"and abandoned past their max retries", "topic", topic, "err", err)
}
