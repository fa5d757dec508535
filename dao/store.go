package dao

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// Store is the portable contract over one table (or index) of rows of the
// model type T. Every method that does I/O takes a context first and returns
// errors that wrap one of this package's sentinels.
type Store[T any] interface {
	// Create inserts items in one batch and fills generated primary keys
	// back into them. A unique violation is [ErrDuplicate].
	Create(ctx context.Context, items ...*T) error

	// Get returns the row whose primary key is id, or [ErrNotFound].
	Get(ctx context.Context, id any) (T, error)

	// Find returns the rows matching q.Where, ordered by q.OrderBy (then by
	// primary key), at most q.Limit of them when q.Limit > 0.
	Find(ctx context.Context, q Query) ([]T, error)

	// Count returns how many rows match where.
	Count(ctx context.Context, where Criteria) (int64, error)

	// Update applies set to every row matching where and returns the number
	// of rows changed. An empty set is [ErrInvalidArgument].
	Update(ctx context.Context, where Criteria, set Set) (int64, error)

	// Delete removes at most limit rows matching where (smallest primary
	// keys first) and returns how many it removed; limit must be > 0, so a
	// retention sweep runs in bounded batches. It is idempotent: rows that
	// are already gone are not counted.
	Delete(ctx context.Context, where Criteria, limit int) (int64, error)

	// Claim atomically selects up to req.Limit rows matching req.Where,
	// applies req.Set to them and returns them in their post-claim state,
	// ordered by req.OrderBy. No two concurrent callers, in one process or
	// many, ever receive the same row from a claim. When it fails part-way it
	// returns the rows it did claim together with the error, so no row is
	// stranded until its lease expires. Claim commits its own work and is
	// refused with [ErrInTransaction] on a store bound to a transaction.
	Claim(ctx context.Context, req ClaimRequest) ([]T, error)

	// Capabilities states what this store promises; it does no I/O.
	Capabilities() Capabilities
}

// LostRace names what a claimer observes when another claimer takes a row
// between the moment it finds the row eligible and the moment it writes it.
// The values and their meaning are documented in package driver.
type LostRace = driver.LostRace

// The documented lost-race behaviours.
const (
	// LostRaceImpossible: reads and writes happen under one lock (memory).
	LostRaceImpossible = driver.LostRaceImpossible
	// LostRaceSkip: the row is skipped silently (PostgreSQL, MySQL,
	// MariaDB, SQL Server).
	LostRaceSkip = driver.LostRaceSkip
	// LostRaceBusy: writers serialize; a claim that cannot get the write
	// lock fails with [ErrBusy] (SQLite).
	LostRaceBusy = driver.LostRaceBusy
	// LostRaceConflict: the losing write gets [ErrConflict], returned with
	// the rows claimed so far (Elasticsearch).
	LostRaceConflict = driver.LostRaceConflict
)

// RoundTrips counts the backend round trips of one claim: Fixed per call
// plus PerRow for each candidate row (see driver.RoundTrips).
type RoundTrips = driver.RoundTrips

// Collation states how a store compares and orders strings (see
// driver.Collation for its fields).
type Collation = driver.Collation

// Capabilities states what a store promises. The conformance suite reads it
// to decide which lost-race behaviour to expect.
type Capabilities struct {
	// Backend is the backend's name, such as "postgres", "mysql",
	// "mariadb", "sqlite", "sqlserver", "elasticsearch" or "memory".
	Backend string
	// Strategy is the claim strategy the store runs: [StrategyPortable]
	// (the guarded per-row default) or [StrategyFastPath] (the backend's
	// single operation).
	Strategy Strategy
	// ClaimRoundTrips is the number of round trips one claim costs.
	ClaimRoundTrips RoundTrips
	// LostRace is the documented lost-race behaviour.
	LostRace LostRace
	// Collation states how the store compares and orders strings.
	Collation Collation
	// ClaimTimeout is how long a claim waits for the outcome of an
	// operation it has already sent, however the caller's context ends: the
	// operation runs detached from the caller's cancellation so that what
	// it commits is returned, never stranded. Past it the claim returns
	// [ErrUnavailable] and the outcome of that operation is unknown (a
	// committed claim whose acknowledgement is lost comes back after its
	// lease). Zero means no bound: the operation cannot hang on a network
	// (memory; SQLite, whose busy timeout bounds its wait for the write
	// lock).
	ClaimTimeout time.Duration
	// LockWaitLimit is the server-side limit the store sets on one claim
	// statement's wait for a lock held by another transaction; past it the
	// claim returns the rows it committed with an error wrapping [ErrBusy].
	// It bounds the wait of a caller without a deadline: the SQL backends
	// end a waiting statement when the caller's context ends.
	// Zero means the store sets none: the claim does not wait for row locks
	// (memory, the PostgreSQL fast path with SKIP LOCKED, Elasticsearch's
	// optimistic writes) or the session's own setting applies (MySQL 8
	// innodb_lock_wait_timeout, SQL Server LOCK_TIMEOUT, SQLite's busy
	// timeout from the DSN).
	LockWaitLimit time.Duration
	// Transactions is true when [Table.WithTx] can bind the store to a
	// caller's transaction (the SQL backends, with a *gorm.DB).
	Transactions bool
	// DatabaseClock is true when [Table.Now] reads the database's clock
	// (the SQL backends); false when it returns errors.ErrUnsupported.
	DatabaseClock bool
}

// ClaimTrace holds callbacks that observe the stages of a claim, in the
// manner of net/http/httptrace. Tests use CandidatesRead to force a lost
// race deterministically; package dispatch uses Conflict to count the
// conflicts its claims absorb (dispatch.Stats.ConflictRetries). Any
// callback may be nil. Callbacks run on the claiming goroutine, so they
// must be quick and safe for concurrent use when the context is shared.
type ClaimTrace struct {
	// CandidatesRead is called by a claim that reads candidates before it
	// writes them (the portable default; the memory store's claim, under
	// its lock) after it has read the candidate rows and before its first
	// write. ids are the candidates' primary keys in claim order.
	CandidatesRead func(ctx context.Context, ids []any)
	// Conflict is called once each time the database ends one of the
	// claim's writes with a conflict ([ErrConflict]: a deadlock victim, a
	// serialization failure, or a certification failure on MariaDB Galera
	// Cluster, returned there as deadlock error 1213) that the claim
	// absorbs instead of returning it: the portable default counts that
	// row as a lost race and goes on with its other candidates; the MySQL
	// and MariaDB fast path runs its transaction again (three runs at
	// most, the last lost one returning no rows and no error); the SQL
	// Server fast path runs its statement again likewise. The SQL
	// backends (package sqlstore) call it; other backends may not.
	Conflict func(ctx context.Context)
}

type claimTraceKey struct{}

// WithClaimTrace returns a context that carries trace; claims run with that
// context call its callbacks.
func WithClaimTrace(ctx context.Context, trace *ClaimTrace) context.Context {
	return context.WithValue(ctx, claimTraceKey{}, trace)
}

// ContextClaimTrace returns the trace carried by ctx, or nil.
func ContextClaimTrace(ctx context.Context) *ClaimTrace {
	t, _ := ctx.Value(claimTraceKey{}).(*ClaimTrace)
	return t
}
