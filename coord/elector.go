package coord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/retry"
	"github.com/claimstore/claimstore/internal/workerid"
	"go.opentelemetry.io/otel/metric"
)

// ErrAlreadyRunning is wrapped, with [dao.ErrInvalidArgument], by the
// error [Elector.Run] returns while another Run of the same elector has
// not returned; its text is "already running", after the call's own
// prefix.
var ErrAlreadyRunning = errors.New("already running")

// Defaults of [ElectorConfig].
const (
	// DefaultLeaderLease is the lease length when ElectorConfig.Lease is
	// zero.
	DefaultLeaderLease = 15 * time.Second
	// DefaultLeaderTTL is DefaultLeaderLease.
	//
	// Deprecated: use DefaultLeaderLease.
	DefaultLeaderTTL = DefaultLeaderLease
)

// ElectorConfig configures an [Elector].
type ElectorConfig struct {
	// Name is the election name: candidates with the same Name over the
	// same lease table compete for one leadership. Required; at most 191
	// bytes of UTF-8.
	Name string

	// ID identifies this candidate in the lease row; it must differ
	// between candidates. Empty means the default worker id of every
	// package, "<hostname>-<pid>-<6 random hex digits>" (at most 115
	// bytes; see outbox.DefaultWorkerID). At most 191 bytes of UTF-8.
	ID string

	// Lease is the lease length, counted by the database's clock from
	// each acquisition or renewal: a crashed leader is replaced at most
	// Lease plus one PollInterval after its last renewal. Whole
	// milliseconds from 1ms to 24h; zero means [DefaultLeaderLease]
	// (15 s).
	Lease time.Duration

	// TTL is read as Lease when Lease is zero.
	//
	// Deprecated: use Lease.
	TTL time.Duration

	// RenewInterval is the time between the starts of two renewals by the
	// leader. Zero means Lease/3. It must be shorter than Lease minus
	// SafetyMargin, so that a renewal is due before the leadership lapses
	// locally.
	RenewInterval time.Duration

	// PollInterval is the time between two attempts of a follower, and so
	// the longest a follower waits before it notices a released or
	// expired lease. Zero means RenewInterval.
	PollInterval time.Duration

	// SafetyMargin is how long before the end of its lease, measured on
	// the local monotonic clock from the start of its last successful
	// renewal, a leader gives up locally: it covers the difference in
	// rate between the local clock and the database's over one lease. Zero
	// means Lease/10; it must be less than Lease.
	SafetyMargin time.Duration

	// OnElected, optional, runs in a goroutine of its own each time this
	// candidate wins a term. ctx is l.Context(): canceled when the
	// leadership ends locally. Leader-only work belongs inside it and must
	// stop when ctx is done; the elector waits for OnElected to return
	// before it campaigns again, before it resigns and before OnDeposed.
	OnElected func(ctx context.Context, l Leader)

	// OnDeposed, optional, runs when a term of this candidate has ended
	// (lost to another candidate, lapsed by the safety margin, resigned),
	// after OnElected has returned, on the elector's goroutine.
	OnDeposed func(l Leader)

	// Logger receives the elector's records: Info for won and lost
	// terms and resignations, Debug for "held by another" attempts, Warn
	// for failed attempts. nil means slog.Default().
	Logger *slog.Logger

	// MeterProvider, optional, receives the elector's OpenTelemetry
	// metrics (see [MetricLeaderTerm]). nil records nothing.
	MeterProvider metric.MeterProvider
}

// Elector campaigns for one election name over a [LeaseStore]. Create it
// with [NewElector] and call [Elector.Run]. Its methods are safe for
// concurrent use.
type Elector struct {
	store LeaseStore
	cfg   ElectorConfig
	log   *slog.Logger
	m     *leaderMetrics

	mu      sync.Mutex
	current Leader // zero unless leading
	running bool
}

// NewElector returns an elector of cfg.Name over store. Errors wrap
// [dao.ErrInvalidArgument] for a nil store, a missing or bad name or id,
// or intervals out of range (see [ElectorConfig]); or the meter
// provider's error when it cannot create an instrument.
func NewElector(store LeaseStore, cfg ElectorConfig) (*Elector, error) {
	if store == nil {
		return nil, fmt.Errorf("coord: new elector: %w: nil lease store", dao.ErrInvalidArgument)
	}
	if cfg.ID == "" {
		cfg.ID = workerid.New()
	}
	cfg.Lease = cmp.Or(cfg.Lease, cfg.TTL, DefaultLeaderLease)
	cfg.RenewInterval = cmp.Or(cfg.RenewInterval, cfg.Lease/3)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, cfg.RenewInterval)
	cfg.SafetyMargin = cmp.Or(cfg.SafetyMargin, cfg.Lease/10)
	if err := driver.CheckAcquire(cfg.Name, cfg.ID, cfg.Lease); err != nil {
		return nil, fmt.Errorf("coord: new elector: %w", err)
	}
	switch {
	case cfg.RenewInterval < 0 || cfg.PollInterval < 0 || cfg.SafetyMargin < 0:
		return nil, fmt.Errorf("coord: new elector: %w: negative interval or margin", dao.ErrInvalidArgument)
	case cfg.SafetyMargin >= cfg.Lease:
		return nil, fmt.Errorf("coord: new elector: %w: safety margin %v is not less than the lease %v", dao.ErrInvalidArgument, cfg.SafetyMargin, cfg.Lease)
	case cfg.RenewInterval >= cfg.Lease-cfg.SafetyMargin:
		return nil, fmt.Errorf("coord: new elector: %w: renew interval %v is not less than lease %v minus safety margin %v", dao.ErrInvalidArgument, cfg.RenewInterval, cfg.Lease, cfg.SafetyMargin)
	}
	m, err := newLeaderMetrics(cfg.MeterProvider, cfg.Name, cfg.ID)
	if err != nil {
		return nil, fmt.Errorf("coord: new elector: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With(slog.String("election", cfg.Name), slog.String("candidate", cfg.ID))
	return &Elector{store: store, cfg: cfg, log: log, m: m}, nil
}

// ID returns the candidate id the elector campaigns with.
func (e *Elector) ID() string { return e.cfg.ID }

// Config returns the elector's configuration with the defaults filled in.
func (e *Elector) Config() ElectorConfig { return e.cfg }

// Leader returns the current term of this candidate's leadership and
// true while it leads, or a zero Leader and false.
func (e *Elector) Leader() (Leader, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current, e.current.Active()
}

// leadership is the state of one won term inside Run.
type leadership struct {
	l        Leader
	cancel   context.CancelFunc
	deadline time.Time   // local monotonic: give up at this instant
	lapse    *time.Timer // cancels the context at deadline
	done     chan struct{}
}

// Run campaigns until ctx is done: it acquires the lease when it is free
// or expired, renews it every RenewInterval while it leads, and steps
// down when a renewal finds another holder or when no renewal has
// succeeded for Lease minus SafetyMargin. When ctx is done it ends its
// leadership (canceling the Leader's context and waiting for OnElected),
// releases the lease so that a follower takes over at its next poll, and
// returns. It returns nil, or the release's error (wrapped) when the
// lease could not be released (it then expires after Lease). An elector
// runs at most once at a time: a second concurrent Run returns an error
// wrapping [dao.ErrInvalidArgument] and [ErrAlreadyRunning].
func (e *Elector) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return fmt.Errorf("coord: elector %q: %w: %w", e.cfg.ID, dao.ErrInvalidArgument, ErrAlreadyRunning)
	}
	e.running = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()

	var cur *leadership
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return e.resign(ctx, cur)
		case <-timer.C:
		}
		if cur != nil && !time.Now().Before(cur.deadline) {
			e.stepDown(cur, "lease not renewed within the lease minus the safety margin")
			cur = nil
		}
		cur = e.attempt(ctx, cur)
		next := e.cfg.PollInterval
		if cur != nil {
			next = min(e.cfg.RenewInterval, time.Until(cur.deadline))
		}
		timer.Reset(max(next, 0))
	}
}

// attempt makes one acquisition or renewal and returns the leadership
// that holds afterwards (nil when following).
func (e *Elector) attempt(ctx context.Context, cur *leadership) *leadership {
	start := time.Now()
	actx := ctx
	var cancel context.CancelFunc
	if cur != nil {
		// A renewal that would end after the local deadline is useless.
		actx, cancel = context.WithDeadline(ctx, cur.deadline)
	} else {
		actx, cancel = context.WithTimeout(ctx, e.cfg.Lease)
	}
	lease, held, err := e.acquire(actx, cur != nil)
	cancel()
	e.m.attempt(ctx, err == nil && held)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.log.Warn("leader lease attempt failed", slog.Bool("leading", cur != nil), slog.Any("error", err))
		}
		if cur != nil && !time.Now().Before(cur.deadline) {
			e.stepDown(cur, "lease not renewed within the lease minus the safety margin")
			return nil
		}
		return cur
	case !held:
		e.m.term(ctx, lease.Term)
		if cur != nil {
			e.stepDown(cur, "lease held by another candidate")
		}
		e.log.Debug("leader lease held by another, skipped", slog.String("holder", lease.Holder), slog.Int64("term", lease.Term),
			slog.Duration("expires_in", lease.ExpiresAt.Sub(lease.Now)))
		return nil
	}
	e.m.term(ctx, lease.Term)
	deadline := start.Add(e.cfg.Lease - e.cfg.SafetyMargin)
	if cur != nil && cur.l.term == lease.Term {
		if cur.renewed(deadline) {
			return cur
		}
		e.stepDown(cur, "lease renewed after the safety margin had passed")
		cur = nil
	}
	if cur != nil {
		// The lease lapsed and was taken over anew (by this candidate):
		// a new term is a new leadership.
		e.stepDown(cur, "term changed")
	}
	return e.elect(ctx, lease, deadline)
}

// acquire runs the store's AcquireLease on ctx. A renewal (renewing)
// that fails with an error a retry can cure (dao.IsRetryable: a lost
// connection, a server out of connections, a busy database) is tried
// again with exponential backoff (internal/retry, over
// cenkalti/backoff/v5; waits from 20 ms up to a quarter of
// RenewInterval) until it succeeds, fails otherwise or ctx (which ends at
// the leadership's local deadline) ends, instead of waiting a whole
// RenewInterval for the next one. An acquisition by a follower is
// tried once: the next poll tries again.
func (e *Elector) acquire(ctx context.Context, renewing bool) (Lease, bool, error) {
	if !renewing {
		return e.store.AcquireLease(ctx, e.cfg.Name, e.cfg.ID, e.cfg.Lease)
	}
	type result struct {
		lease Lease
		held  bool
	}
	r, err := retry.RetryableUpTo(ctx, 0, e.cfg.RenewInterval/4, func() (result, error) {
		lease, held, err := e.store.AcquireLease(ctx, e.cfg.Name, e.cfg.ID, e.cfg.Lease)
		if err != nil && ctx.Err() == nil {
			e.log.Debug("leader lease renewal failed; retrying", slog.Any("error", err), slog.Bool("retryable", dao.IsRetryable(err)))
		}
		return result{lease, held}, err
	})
	return r.lease, r.held, err
}

// elect starts the leadership of lease's term. Its context is canceled
// by a timer at the local deadline, so that leader-only work stops then
// even if the elector's goroutine is late.
func (e *Elector) elect(ctx context.Context, lease Lease, deadline time.Time) *leadership {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &leadership{
		l:        Leader{name: e.cfg.Name, id: e.cfg.ID, term: lease.Term, ctx: lctx},
		cancel:   cancel,
		deadline: deadline,
		lapse:    time.AfterFunc(time.Until(deadline), cancel),
		done:     make(chan struct{}),
	}
	e.mu.Lock()
	e.current = c.l
	e.mu.Unlock()
	e.m.changed(ctx, changeElected)
	e.log.Info("elected leader", slog.Int64("term", lease.Term), slog.Time("lease_expires_at", lease.ExpiresAt))
	go func() {
		defer close(c.done)
		if e.cfg.OnElected != nil {
			e.cfg.OnElected(lctx, c.l)
		}
	}()
	return c
}

// renewed moves c's local deadline; it reports false when the deadline
// had already passed (the leadership's context is canceled).
func (c *leadership) renewed(deadline time.Time) bool {
	if !c.lapse.Stop() {
		return false
	}
	c.deadline = deadline
	c.lapse.Reset(time.Until(deadline))
	return true
}

// stepDown ends c locally: cancels its context, waits for OnElected to
// return, then calls OnDeposed.
func (e *Elector) stepDown(c *leadership, why string) {
	c.lapse.Stop()
	c.cancel()
	<-c.done
	e.mu.Lock()
	e.current = Leader{}
	e.mu.Unlock()
	e.m.changed(context.Background(), changeDeposed)
	e.log.Info("leadership ended", slog.Int64("term", c.l.term), slog.String("reason", why))
	if e.cfg.OnDeposed != nil {
		e.cfg.OnDeposed(c.l)
	}
}

// resign ends c (if any) and releases its lease on a context detached
// from ctx's cancellation, bounded by the lease.
func (e *Elector) resign(ctx context.Context, c *leadership) error {
	if c == nil {
		return nil
	}
	lapsed := !time.Now().Before(c.deadline)
	e.stepDown(c, "resigned")
	if lapsed {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Lease)
	defer cancel()
	released, err := e.store.ReleaseLease(rctx, e.cfg.Name, e.cfg.ID, c.l.term)
	if err != nil {
		e.log.Warn("leader lease release failed; it expires at the end of the lease", slog.Int64("term", c.l.term), slog.Any("error", err))
		return fmt.Errorf("coord: elector %q: release term %d: %w", e.cfg.ID, c.l.term, err)
	}
	e.log.Info("leader lease released", slog.Int64("term", c.l.term), slog.Bool("released", released))
	return nil
}
