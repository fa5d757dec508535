package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// Rescuer defaults.
const (
	// DefaultRescueAfter is how long past its end a lease must have
	// expired before the rescuer frees the row.
	DefaultRescueAfter = 5 * time.Minute
	// DefaultMaintenanceBatch is the most rows one statement of a
	// rescuer or a retention sweep touches.
	DefaultMaintenanceBatch = 1000
)

// RescueConfig configures a [Rescuer]. Store, KeyField and Key are
// required; zero fields take their defaults, negative ones are invalid.
type RescueConfig[T any] struct {
	// Store holds the rows.
	Store dao.Store[T]
	// KeyField is the primary key column; Key returns a row's key value.
	KeyField string
	Key      func(row *T) any
	// OwnerField and UntilField are the lease columns, as in [Config];
	// defaults "lease_owner" and "lease_until".
	OwnerField, UntilField string
	// After is how long past its end a lease must have expired for the
	// row to be rescued; default [DefaultRescueAfter] (5 min). Choose it
	// well above the workers' Lease so that a slow renewal is never
	// mistaken for a dead worker.
	After time.Duration
	// BatchSize is the most rows one pass reads and frees; default
	// [DefaultMaintenanceBatch]. A pass repeats until fewer are left.
	BatchSize int
	// Now overrides the clock, as [Config].Now.
	Now func() time.Time
	// Logger receives a Warn line per pass that freed rows, with their
	// keys; default slog.Default().
	Logger *slog.Logger
	// MeterProvider, optional, receives [MetricRescued]; nil records
	// nothing.
	MeterProvider metric.MeterProvider
}

// Rescuer finds rows whose lease expired long ago while still naming an
// owner — the handler panicked, or the worker died or lost its database
// and never wrote an outcome or a release — logs each, counts it, and
// frees it: the lease owner is cleared, so the row shows as free and the
// owner no longer names a worker that is gone. The lease end is left as
// it was, in the past.
//
// A worker's claim already takes such rows once their lease has ended
// (lease end not after now) if they are still due, so the rescue changes
// no fire of a schedule: its job is to make abandoned work visible (the
// logs, [Rescuer.Rescued]) and the table honest. Rows
// that are no longer due (a paused schedule whose fire was lost) are only
// freed. Run it on one server: [Maintenance] with a leader gate.
type Rescuer[T any] struct {
	cfg     RescueConfig[T]
	m       *metrics
	clock   *timeSource
	log     *slog.Logger
	rescued atomic.Int64
}

// NewRescuer returns a rescuer for cfg. Errors wrap
// [dao.ErrInvalidArgument] for a missing field or a negative setting, or
// are the meter provider's; it does no I/O.
func NewRescuer[T any](cfg RescueConfig[T]) (*Rescuer[T], error) {
	if cfg.Store == nil || cfg.KeyField == "" || cfg.Key == nil {
		return nil, fmt.Errorf("dispatch: new rescuer: %w", argerr.Errorf("Store, KeyField and Key are required"))
	}
	if cfg.After < 0 || cfg.BatchSize < 0 {
		return nil, fmt.Errorf("dispatch: new rescuer: %w", argerr.Errorf("negative setting"))
	}
	if cfg.OwnerField == "" {
		cfg.OwnerField = "lease_owner"
	}
	if cfg.UntilField == "" {
		cfg.UntilField = "lease_until"
	}
	if cfg.After == 0 {
		cfg.After = DefaultRescueAfter
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultMaintenanceBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("dispatch: new rescuer: %w", err)
	}
	return &Rescuer[T]{
		m:     m,
		cfg:   cfg,
		clock: newTimeSource(cfg.Now, cfg.Store, cfg.Store.Capabilities().DatabaseClock),
		log:   cfg.Logger.With("component", "dispatch.rescuer"),
	}, nil
}

// ScheduleRescuer returns a [Rescuer] of the schedule table in store, with
// cfg's After, BatchSize, Now, Logger and MeterProvider; cfg's row fields
// (Store, KeyField, Key, OwnerField, UntilField) are set here. Errors as
// [NewRescuer].
func ScheduleRescuer(store dao.Store[Schedule], cfg RescueConfig[Schedule]) (*Rescuer[Schedule], error) {
	cfg.Store, cfg.KeyField, cfg.Key = store, ColID, func(s *Schedule) any { return s.ID }
	cfg.OwnerField, cfg.UntilField = ColLeaseOwner, ColLeaseUntil
	return NewRescuer(cfg)
}

// Rescued returns the number of rows this rescuer has freed.
func (r *Rescuer[T]) Rescued() int64 { return r.rescued.Load() }

// Rescue frees every row whose lease owner is set and whose lease ended
// more than After ago, in passes of at most BatchSize rows (a Find, then
// one Update of those keys that repeats the condition, so a row claimed
// again in between is left alone). It returns the number freed. Errors:
// the store's and the context's, wrapped, with the count so far.
func (r *Rescuer[T]) Rescue(ctx context.Context) (int64, error) {
	now, err := r.clock.Now(ctx)
	if err != nil {
		return 0, fmt.Errorf("dispatch: rescue: %w", err)
	}
	cutoff := now.Add(-r.cfg.After)
	stale := dao.And(dao.Ne(r.cfg.OwnerField, ""), dao.Lt(r.cfg.UntilField, cutoff))
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dispatch: rescue: %w", err)
		}
		rows, err := r.cfg.Store.Find(ctx, dao.Query{Where: stale, Limit: r.cfg.BatchSize})
		if err != nil {
			return total, fmt.Errorf("dispatch: rescue: %w", err)
		}
		if len(rows) == 0 {
			return total, nil
		}
		keys := make([]any, len(rows))
		for i := range rows {
			keys[i] = r.cfg.Key(&rows[i])
		}
		n, err := r.cfg.Store.Update(ctx, dao.And(dao.In(r.cfg.KeyField, keys...), stale), dao.Set{r.cfg.OwnerField: ""})
		if err != nil {
			return total, fmt.Errorf("dispatch: rescue: %w", err)
		}
		total += n
		r.rescued.Add(n)
		r.m.add(ctx, r.m.rescued, n)
		if n > 0 {
			r.log.Warn("rescued rows whose lease expired long ago (handler panic or lost worker): owner cleared",
				"rows", n, "keys", keys, "expired_before", cutoff)
		}
		if len(rows) < r.cfg.BatchSize {
			return total, nil
		}
	}
}

// Task returns the rescue as a [Maintenance] task named "rescuer".
func (r *Rescuer[T]) Task() Task {
	return Task{Name: "rescuer", Run: func(ctx context.Context) error {
		_, err := r.Rescue(ctx)
		return err
	}}
}
