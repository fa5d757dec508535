package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/dbclock"
)

// Column names of the message table, as the GORM schema of [Message]
// names them, one per field in the field's order: for criteria, orders
// and sets written against a repository's store, and for the statements
// that other packages render over the table (package dialects).
const (
	ColID              = "id"
	ColMessageID       = "message_id"
	ColTopic           = "topic"
	ColType            = "type"
	ColPayload         = "payload"
	ColHeaders         = "headers"
	ColTargetBroker    = "target_broker"
	ColPartitionKey    = "partition_key"
	ColPriority        = "priority"
	ColStatus          = "status"
	ColRetryCount      = "retry_count"
	ColMaxRetries      = "max_retries"
	ColNextRetryAt     = "next_retry_at"
	ColLockedBy        = "locked_by"
	ColLockedUntil     = "locked_until"
	ColLastError       = "last_error"
	ColCreatedAt       = "created_at"
	ColPublishedAt     = "published_at"
	ColLastProcessedAt = "last_processed_at"
	ColCorrelationID   = "correlation_id"
	ColCausationID     = "causation_id"
)

// Columns returns the columns of the message table in the order of
// [Message]'s fields (the Col constants), a new slice each call. A test
// checks them against the GORM schema of Message.
func Columns() []string {
	return []string{
		ColID, ColMessageID, ColTopic, ColType, ColPayload, ColHeaders, ColTargetBroker,
		ColPartitionKey, ColPriority, ColStatus, ColRetryCount, ColMaxRetries, ColNextRetryAt,
		ColLockedBy, ColLockedUntil, ColLastError, ColCreatedAt, ColPublishedAt,
		ColLastProcessedAt, ColCorrelationID, ColCausationID,
	}
}

// Batch limits. Writes that name rows by id send at most markChunk ids per
// statement (bound parameters stay far below every backend's limit); Add
// inserts at most addChunk rows per statement.
const (
	markChunk = 1000
	addChunk  = 500
)

// DefaultLease is the lease a claim takes unless told otherwise.
const DefaultLease = 30 * time.Second

// TxStoreFunc returns a store of messages bound to the caller's open GORM
// transaction tx, for [Repository.Add]. With sqlstore it is
// func(tx *gorm.DB) dao.Store[Message] { return table.WithTx(tx) }.
type TxStoreFunc func(tx *gorm.DB) dao.Store[Message]

// Repository reads and writes outbox messages through a [dao.Store] of
// [Message], so it runs on every backend claimstore supports. It is safe for
// concurrent use by many goroutines, processes and servers sharing one
// table.
type Repository struct {
	store  dao.Store[Message]
	txFunc TxStoreFunc
	txErr  error // why Add cannot take a tx, when txFunc is nil
	policy RetryPolicy
	lease  time.Duration
	now    func() time.Time
	dbc    *dbclock.Clock // the database clock, nil when now is used
	random func() float64

	clockSet bool // WithClock was given
}

// Option configures a [Repository].
type Option func(*Repository) error

// WithRetryPolicy sets the retry policy (default [DefaultRetryPolicy]). An
// invalid policy makes [New] fail with [dao.ErrInvalidArgument].
func WithRetryPolicy(p RetryPolicy) Option {
	return func(r *Repository) error {
		if err := p.Validate(); err != nil {
			return err
		}
		r.policy = p
		return nil
	}
}

// WithLease sets the lease [Repository.ClaimBatch] takes (default
// [DefaultLease]); it must be > 0.
func WithLease(d time.Duration) Option {
	return func(r *Repository) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease must be > 0, got %v", dao.ErrInvalidArgument, d)
		}
		r.lease = d
		return nil
	}
}

// WithClock sets the clock of the repository's time arithmetic, replacing
// the database clock. Without it the repository reads the database's clock
// when the store can give it — a store with a method DB() *gorm.DB on
// PostgreSQL, MySQL, MariaDB, SQL Server or SQLite, as sqlstore's stores
// have — and the host's clock (time.Now) otherwise (memstore, where the
// database is this process; esstore). The database's time is read with one
// query at most every [ClockResync] and advanced in between with
// the host's monotonic clock.
//
// This clock, whichever it is, is read once per call and gives:
//   - the lease a claim writes: LockedUntil = now + lease;
//   - the eligibility of a claim: a lock has expired when LockedUntil < now,
//     a failed message is due when NextRetryAt <= now;
//   - the retry time a failure writes: NextRetryAt = now + the policy's
//     delay;
//   - the times kept for the record (CreatedAt when zero, PublishedAt,
//     LastProcessedAt), the cutoff of [Repository.Purge] and the age of the
//     oldest message in the relay's metrics. [Repository.Add] does no I/O
//     for the time: it uses the last estimate of the database clock, or the
//     host's clock before the first claim or mark.
//
// Times are stored in UTC. A relay's timeouts never read this clock: they
// are durations on the host's monotonic clock (see [RelayConfig]).
//
// "Now" is a value computed in this process and sent as a bound parameter:
// the store API cannot name the database's CURRENT_TIMESTAMP in criteria or
// in a claim's Set. On the database clock every repository over a table
// agrees on the time, whatever its host's clock says. With an injected
// clock, the repositories and relays sharing a table should read clocks
// that agree to well within the lease. A claimer whose clock is behind by
// more than the lease writes leases the others already see as expired; one
// that is ahead sees their leases as expired. Either way a batch may be
// claimed again while its first owner still publishes it: the broker's
// de-duplication by message id keeps one copy, the fences
// ([Repository.MarkPublished]) refuse the first owner's marks and keep the
// new owner's state, and no message is lost, failed or abandoned for it —
// the skew costs repeated work, not correctness. A claimer alone on a table
// is consistent with its own clock, however skewed.
//
// A nil clock is [dao.ErrInvalidArgument].
func WithClock(now func() time.Time) Option {
	return func(r *Repository) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", dao.ErrInvalidArgument)
		}
		r.now = now
		r.clockSet = true
		return nil
	}
}

// WithRandom sets the source of the jitter: a function returning uniform
// numbers in [0, 1) (default math/rand/v2.Float64).
func WithRandom(f func() float64) Option {
	return func(r *Repository) error {
		if f == nil {
			return fmt.Errorf("%w: nil random source", dao.ErrInvalidArgument)
		}
		r.random = f
		return nil
	}
}

// WithTxStore sets how [Repository.Add] binds the store to a caller's
// transaction. [New] sets it by itself for a store that is a
// [dao.TxBinder] over a backend with transactions (a SQL backend's
// dao.Table, or a wrapper store that forwards WithTx); set it for a store
// of your own.
func WithTxStore(f TxStoreFunc) Option {
	return func(r *Repository) error {
		r.txFunc = f
		return nil
	}
}

// New returns a repository over store. It fails with an error wrapping
// [dao.ErrInvalidArgument] when store is nil or an option is invalid.
func New(store dao.Store[Message], opts ...Option) (*Repository, error) {
	if store == nil {
		return nil, fmt.Errorf("outbox: new repository: %w: nil store", dao.ErrInvalidArgument)
	}
	r := &Repository{
		store:  store,
		policy: DefaultRetryPolicy(),
		lease:  DefaultLease,
		now:    time.Now,
		random: rand.Float64,
	}
	r.txFunc, r.txErr = txStoreOf(store)
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, fmt.Errorf("outbox: new repository: %w", err)
		}
	}
	if r.txFunc == nil && r.txErr == nil {
		r.txErr = fmt.Errorf("%w: %w: WithTxStore(nil): the repository joins no transaction", dao.ErrInvalidArgument, errors.ErrUnsupported)
	}
	if !r.clockSet {
		r.dbc = databaseClockOf(store)
	}
	return r, nil
}

// Store returns the underlying store.
func (r *Repository) Store() dao.Store[Message] { return r.store }

// RetryPolicy returns the repository's retry policy.
func (r *Repository) RetryPolicy() RetryPolicy { return r.policy }

// Lease returns the lease [Repository.ClaimBatch] takes.
func (r *Repository) Lease() time.Duration { return r.lease }

// clock returns the repository's time without I/O: the injected clock, or
// the last estimate of the database clock.
func (r *Repository) clock() time.Time {
	if r.dbc != nil {
		return r.dbc.Peek().UTC()
	}
	return r.now().UTC()
}

// time returns the repository's time, reading the database's clock when
// its estimate is due for a new sample.
func (r *Repository) time(ctx context.Context) (time.Time, error) {
	if r.dbc == nil {
		return r.now().UTC(), nil
	}
	t, err := r.dbc.Now(ctx)
	return t.UTC(), err
}

// DatabaseClock reports whether the repository reads the database's clock
// (see [WithClock]).
func (r *Repository) DatabaseClock() bool { return r.dbc != nil }

func checkLen(field, v string, max int) error {
	if len(v) > max {
		return argerr.Errorf("%s is %d bytes, the limit is %d", field, len(v), max)
	}
	return nil
}

// txStoreOf returns the transaction binder of a store that can join a
// caller's transaction (a dao.TxBinder whose backend binds a *gorm.DB),
// or the error of an Add with a tx: one wrapping dao.ErrInvalidArgument
// and errors.ErrUnsupported.
func txStoreOf(store dao.Store[Message]) (TxStoreFunc, error) {
	t, ok := store.(dao.TxBinder[Message])
	if !ok {
		return nil, fmt.Errorf("%w: %w: store %T cannot join a transaction: it is not a dao.TxBinder (forward it from a wrapper store, or see WithTxStore)", dao.ErrInvalidArgument, errors.ErrUnsupported, store)
	}
	if !store.Capabilities().Transactions {
		return nil, fmt.Errorf("%w: %w: the %s store cannot join a transaction (see WithTxStore)", dao.ErrInvalidArgument, errors.ErrUnsupported, store.Capabilities().Backend)
	}
	return func(tx *gorm.DB) dao.Store[Message] { return t.WithTx(tx) }, nil
}
