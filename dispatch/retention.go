package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/sweep"
)

// Retention is a retention sweep of the schedule table: it deletes fired
// and failed schedules whose last due time (NextFireAt: the fire that
// ended them) is more than OlderThan ago, in bounded batches. The
// (status, next_fire_at, id) index serves its statements. Create it with
// [NewRetention].
type Retention struct {
	store dao.Store[Schedule]
	cfg   RetentionConfig
	m     *metrics
	clock *timeSource
	log   *slog.Logger
}

// RetentionConfig configures a [Retention].
type RetentionConfig struct {
	// OlderThan is the age past which terminal schedules are deleted;
	// must be > 0 (a sweep never deletes what just ended by default).
	OlderThan time.Duration
	// Statuses are the statuses swept; default fired and failed. Only
	// terminal statuses are allowed.
	Statuses []Status
	// BatchSize is the most rows one DELETE removes; default
	// [DefaultMaintenanceBatch].
	BatchSize int
	// MaxBatches stops a sweep after this many batches; 0: until none is
	// left.
	MaxBatches int
	// Now overrides the clock, as [Config].Now.
	Now func() time.Time
	// Logger receives an Info line per sweep that deleted rows; default
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider, optional, receives [MetricSwept]; nil records
	// nothing.
	MeterProvider metric.MeterProvider
}

// NewRetention returns a retention sweep of the schedule store. Errors
// wrap [dao.ErrInvalidArgument]: nil store, OlderThan <= 0, negative batch
// settings, a status that is not fired or failed; or are the meter
// provider's.
func NewRetention(store dao.Store[Schedule], cfg RetentionConfig) (*Retention, error) {
	if store == nil {
		return nil, fmt.Errorf("dispatch: new retention: %w", argerr.Errorf("nil store"))
	}
	if cfg.OlderThan <= 0 || cfg.BatchSize < 0 || cfg.MaxBatches < 0 {
		return nil, fmt.Errorf("dispatch: new retention: %w", argerr.Errorf("OlderThan must be > 0 and batch settings >= 0"))
	}
	if len(cfg.Statuses) == 0 {
		cfg.Statuses = []Status{StatusFired, StatusFailed}
	}
	for _, s := range cfg.Statuses {
		if s != StatusFired && s != StatusFailed {
			return nil, fmt.Errorf("dispatch: new retention: %w", argerr.Errorf("status %q is not terminal", s))
		}
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultMaintenanceBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("dispatch: new retention: %w", err)
	}
	return &Retention{
		store: store, cfg: cfg, m: m,
		clock: newTimeSource(cfg.Now, store, store.Capabilities().DatabaseClock),
		log:   cfg.Logger.With("component", "dispatch.retention"),
	}, nil
}

// Sweep deletes the old terminal schedules with [dao.Store.Delete] in
// batches of BatchSize until fewer are left or MaxBatches is reached, and
// returns the number deleted. Sweeps may overlap (on several servers): a
// row is deleted and counted once. A batch failing with a retryable error
// (a deadlock between two sweeps) is retried after a short pause, up to 5
// times. Errors: the store's and the context's, wrapped, with the count
// so far.
func (r *Retention) Sweep(ctx context.Context) (int64, error) {
	now, err := r.clock.Now(ctx)
	if err != nil {
		return 0, fmt.Errorf("dispatch: retention sweep: %w", err)
	}
	st := make([]any, len(r.cfg.Statuses))
	for i, s := range r.cfg.Statuses {
		st[i] = string(s)
	}
	where := dao.And(dao.In(ColStatus, st...), dao.Lt(ColNextFireAt, now.Add(-r.cfg.OlderThan)))
	total, err := sweep.Delete(ctx, r.store, where, r.cfg.BatchSize, r.cfg.MaxBatches)
	r.m.add(ctx, r.m.swept, total)
	if total > 0 {
		r.log.Info("retention sweep deleted schedules", "rows", total, "older_than", r.cfg.OlderThan)
	}
	if err != nil {
		return total, fmt.Errorf("dispatch: retention sweep: %w", err)
	}
	return total, nil
}

// Task returns the sweep as a [Maintenance] task named "schedule
// retention".
func (r *Retention) Task() Task {
	return Task{Name: "schedule retention", Run: func(ctx context.Context) error {
		_, err := r.Sweep(ctx)
		return err
	}}
}

// OutboxRetention returns a [Maintenance] task named "outbox retention"
// that runs repo's Purge with each request in turn: repo is an
// *outbox.Repository and reqs are its outbox.PurgeRequest values (e.g.
// published messages older than a week, abandoned ones older than a
// month), R is inferred from them. It runs the outbox's own bounded,
// batched sweep, so the outbox and the schedules are maintained by one
// leader. The task returns the first error, as Purge returned it; later
// requests run at the next period.
func OutboxRetention[R any](repo interface {
	Purge(ctx context.Context, req R) (int64, error)
}, reqs ...R) Task {
	return Task{Name: "outbox retention", Run: func(ctx context.Context) error {
		for _, req := range reqs {
			if _, err := repo.Purge(ctx, req); err != nil {
				return err
			}
		}
		return nil
	}}
}

// ElectorGate returns a [Maintenance].Leader function over e: true while
// e leads its election (coord.Elector.Leader). Run e (its Run method)
// beside the worker. The gate is asked before each task: once the
// leadership ends no further task starts, while a task already running
// finishes its pass (the rescuer's and the sweeps' statements are
// bounded and idempotent, so a pass overlapping the next leader's is
// harmless).
func ElectorGate(e *coord.Elector) func(ctx context.Context) bool {
	return func(context.Context) bool {
		_, ok := e.Leader()
		return ok
	}
}
