package coord

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Locker runs a unit of work under a non-blocking, transaction-scoped
// try-lock (dao.Locker, the interface of package dao/driver). Every store
// the backend packages return (*dao.Table) is one, through its TryLock
// method; a dao.Store held as the interface is one after the type
// assertion store.(coord.Locker). A program that holds only a *gorm.DB
// gets one from sqlstore.NewLocker or from its backend package
// (sqlstore.NewLocker); a memory one from memstore.NewLocker.
type Locker = dao.Locker

// LockClassID is the first key of every PostgreSQL advisory lock
// [WithLock] takes, pg_try_advisory_xact_lock(LockClassID, hash): the
// four bytes "clms" read as a big-endian int4, a fixed class that keeps
// claimstore's locks apart from the two-key advisory locks of other
// classes. The second key is the FNV-1a 32-bit hash (hash/fnv) of the
// key's bytes, read as int4 (two's complement).
const LockClassID int32 = 0x636c6d73

// Instrument names of the try-lock's OpenTelemetry metrics.
const (
	// MetricLockAttempts counts try-lock attempts that reached the
	// backend ({attempt}), acquired or not; the attribute
	// [AttrLockAcquired] tells them apart.
	MetricLockAttempts = "claimstore.coord.lock.attempts"
	// MetricLockAcquisitions counts attempts that took the lock and ran
	// the unit of work ({acquisition}).
	MetricLockAcquisitions = "claimstore.coord.lock.acquisitions"
	// AttrLockAcquired is true on an attempt that took the lock.
	AttrLockAcquired = "claimstore.lock.acquired"
)

// MeterName is the instrumentation scope name of the package's meter.
const MeterName = "github.com/claimstore/claimstore/coord"

// Option configures [WithLock].
type Option func(*options)

type options struct {
	logger *slog.Logger
	mp     metric.MeterProvider
}

// WithLogger makes WithLock log to l instead of slog.Default(): at Debug,
// "try-lock held by another, skipped" with the key when the lock was not
// acquired. A nil l keeps the default.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMeterProvider makes WithLock record its metrics ([MetricLockAttempts],
// [MetricLockAcquisitions]) with mp instead of the global provider
// (otel.GetMeterProvider). A nil mp keeps the global one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.mp = mp } }

// WithLock runs fn under the try-lock named key, on locker: it tries
// once, without waiting, to take the lock in a transaction of its own.
//
//   - Not acquired (another holder has it): fn does not run, and WithLock
//     returns (false, nil) at once, after logging "try-lock held by
//     another, skipped" at Debug.
//   - Acquired: fn runs with ctx and tx, the lock's transaction. tx is a
//     *gorm.DB inside that transaction on the SQL backends: write with it
//     directly, or bind a store to it with dao.Table.WithTx(tx), and do
//     not commit or roll it back yourself. On memory and Elasticsearch tx
//     is nil (there are no transactions: fn's writes stay when it fails;
//     Elasticsearch's lock is a lease renewed while fn runs, whose loss
//     cancels fn's ctx and yields dao.ErrConflict). When fn returns
//     nil the transaction commits; when it returns an error or panics it
//     rolls back, and the panic is re-raised. The lock is released with
//     the transaction's end, and by the server when the holder's
//     connection or process dies. WithLock returns (true, err): nil, or
//     fn's error (errors.Is and errors.As reach it) or the commit's,
//     wrapped.
//
// A key is 1 to 255 bytes of valid UTF-8 without NUL (dao.CheckLockKey);
// see the package documentation for how each backend names it. The loser
// of a race may also be refused by a backend whose lock is coarser than a
// key (SQLite's one writer at a time): it then skips as well.
//
// Errors: an invalid key, a nil locker or a nil fn wraps
// dao.ErrInvalidArgument and sends nothing; a store bound to a caller's
// transaction wraps dao.ErrInTransaction; a backend without try-locks
// wraps errors.ErrUnsupported; a failed attempt wraps the backend's
// sentinel (dao.ErrUnavailable, …) with ran == false.
func WithLock(ctx context.Context, locker Locker, key string, fn func(ctx context.Context, tx any) error, opts ...Option) (ran bool, err error) {
	if err := dao.CheckLockKey(key); err != nil {
		return false, fmt.Errorf("coord: with lock: %w", err)
	}
	if locker == nil || fn == nil {
		return false, fmt.Errorf("coord: with lock %q: %w: nil locker or fn", key, dao.ErrInvalidArgument)
	}
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	m := metricsFor(o.mp)
	began := time.Now()
	acquired := false
	ran, err = locker.TryLock(ctx, key, func(ctx context.Context, tx any) error {
		acquired = true
		m.attempts.Add(ctx, 1, m.acquired)
		m.acquisitions.Add(ctx, 1)
		return fn(ctx, tx)
	})
	if !acquired && err == nil {
		m.attempts.Add(ctx, 1, m.skipped)
		o.logger.LogAttrs(ctx, slog.LevelDebug, "try-lock held by another, skipped",
			slog.String("key", key), slog.Duration("attempt", time.Since(began)))
	}
	if err != nil {
		return ran, fmt.Errorf("coord: with lock %q: %w", key, err)
	}
	return ran, nil
}

// lockMetrics are the instruments of one meter provider.
type lockMetrics struct {
	attempts, acquisitions metric.Int64Counter
	acquired, skipped      metric.AddOption
}

var meters sync.Map // metric.MeterProvider (nil: the global one) -> *lockMetrics

// metricsFor returns the instruments of mp, or of the global provider
// when mp is nil; instruments that cannot be created record nothing.
func metricsFor(mp metric.MeterProvider) *lockMetrics {
	var k any = mp
	if k == nil || reflect.TypeOf(k).Comparable() {
		if v, ok := meters.Load(k); ok {
			return v.(*lockMetrics)
		}
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(MeterName)
	m := &lockMetrics{
		acquired: metric.WithAttributeSet(attribute.NewSet(attribute.Bool(AttrLockAcquired, true))),
		skipped:  metric.WithAttributeSet(attribute.NewSet(attribute.Bool(AttrLockAcquired, false))),
	}
	var err error
	if m.attempts, err = meter.Int64Counter(MetricLockAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Try-lock attempts that reached the backend, acquired or not.")); err != nil {
		m.attempts = noop.Int64Counter{}
	}
	if m.acquisitions, err = meter.Int64Counter(MetricLockAcquisitions, metric.WithUnit("{acquisition}"),
		metric.WithDescription("Try-lock attempts that took the lock and ran the unit of work.")); err != nil {
		m.acquisitions = noop.Int64Counter{}
	}
	if k != nil && !reflect.TypeOf(k).Comparable() {
		return m // cannot be a map key: made again on every call
	}
	v, _ := meters.LoadOrStore(k, m)
	return v.(*lockMetrics)
}
