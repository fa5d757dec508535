package dao

import (
	"context"
	"fmt"
	"strings"
	"time"
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
type LostRace int

// The documented lost-race behaviours.
const (
	// LostRaceImpossible: reads and writes happen under one lock, so no
	// other claimer can come between them (the in-memory store).
	LostRaceImpossible LostRace = iota + 1
	// LostRaceSkip: the row is skipped silently; the call returns the other
	// rows and no error (PostgreSQL SKIP LOCKED; the guarded update on
	// MySQL, MariaDB and SQL Server affects zero rows).
	LostRaceSkip
	// LostRaceBusy: writers serialize; a claim that cannot get the write
	// lock within the busy timeout fails with [ErrBusy] and claims nothing
	// it does not return (SQLite).
	LostRaceBusy
	// LostRaceConflict: the losing write gets a version conflict; the call
	// returns [ErrConflict] together with the rows it had already claimed
	// (Elasticsearch).
	LostRaceConflict
)

// String returns a short name of the behaviour.
func (l LostRace) String() string {
	switch l {
	case LostRaceImpossible:
		return "impossible"
	case LostRaceSkip:
		return "skipped silently"
	case LostRaceBusy:
		return "ErrBusy"
	case LostRaceConflict:
		return "ErrConflict with the rows claimed so far"
	}
	return fmt.Sprintf("LostRace(%d)", int(l))
}

// RoundTrips counts the backend round trips of one claim: Fixed per call
// plus PerRow for each candidate row. A one-statement fast path is
// {Fixed: 1}; the portable default is {Fixed: 1, PerRow: 1}.
type RoundTrips struct {
	Fixed  int
	PerRow int
}

// For returns the round trips of a claim that considers n candidate rows.
func (r RoundTrips) For(n int) int { return r.Fixed + r.PerRow*n }

// String renders the count as "1" or "1 + N".
func (r RoundTrips) String() string {
	switch {
	case r.PerRow == 0:
		return fmt.Sprint(r.Fixed)
	case r.PerRow == 1:
		return fmt.Sprintf("%d + N", r.Fixed)
	default:
		return fmt.Sprintf("%d + %dN", r.Fixed, r.PerRow)
	}
}

// Capabilities states what a store promises. The conformance suite reads it
// to decide which lost-race behaviour to expect.
type Capabilities struct {
	// Backend is the backend's name, such as "postgres", "mysql",
	// "mariadb", "sqlite", "sqlserver", "elasticsearch" or "memory".
	Backend string
	// FastPath is true when Claim runs a backend-specific single
	// operation rather than the portable default.
	FastPath bool
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
	// Zero means the store sets none: the claim does not wait for row locks
	// (memory, the PostgreSQL fast path with SKIP LOCKED, Elasticsearch's
	// optimistic writes) or the session's own setting applies (MySQL 8
	// innodb_lock_wait_timeout, SQL Server LOCK_TIMEOUT, SQLite's busy
	// timeout from the DSN).
	LockWaitLimit time.Duration
}

// Collation states how a store compares strings in criteria (Eq, Ne, Lt,
// Le, Gt, Ge, In and the field-to-field comparisons) and orders them in
// OrderBy. The conformance suite expects exactly what it states. Strings
// that compare equal under it are ordered by the next OrderBy term, and in
// the end by primary key. A store with no Insensitive flag and no
// Linguistic order (see [Collation.Binary]) compares strings as the memory
// store does: as Go compares them, byte by byte, which for valid UTF-8 is
// code-point order.
type Collation struct {
	// Name is the backend's name of the collation, such as "binary"
	// (memory), "keyword" (Elasticsearch), "BINARY" (SQLite), the database's
	// LC_COLLATE such as "C.UTF-8" or "en_US.UTF-8" (PostgreSQL), or the
	// table's collation such as "utf8mb4_general_ci" (MySQL, MariaDB).
	Name string
	// CaseInsensitive: strings that differ only in letter case are equal
	// ("ready" = "READY").
	CaseInsensitive bool
	// AccentInsensitive: letters that differ only in accents are equal
	// ("resume" = "résumé").
	AccentInsensitive bool
	// PadSpace: trailing spaces are ignored ("ready " = "ready"), as
	// SQL's PAD SPACE collations compare.
	PadSpace bool
	// Linguistic: the order follows a language's rules (a locale, the
	// Unicode Collation Algorithm) rather than the code-point order of
	// the strings as the other fields fold them (to upper case, without
	// accents, without trailing spaces). Equality is still as the other
	// fields state.
	Linguistic bool
}

// Binary reports whether c compares strings as their bytes: equal only
// when identical, ordered by code point.
func (c Collation) Binary() bool {
	return !c.CaseInsensitive && !c.AccentInsensitive && !c.PadSpace && !c.Linguistic
}

// String renders c as its name and the properties it declares.
func (c Collation) String() string {
	if c.Binary() {
		return c.Name + " (binary)"
	}
	var p []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{c.CaseInsensitive, "case-insensitive"}, {c.AccentInsensitive, "accent-insensitive"},
		{c.PadSpace, "pad space"}, {c.Linguistic, "linguistic order"},
	} {
		if f.on {
			p = append(p, f.name)
		}
	}
	return c.Name + " (" + strings.Join(p, ", ") + ")"
}

// ClaimTrace holds callbacks that observe the stages of a claim, in the
// manner of net/http/httptrace. Tests use it to force a lost race
// deterministically; production code has no need of it. Any callback may be
// nil.
type ClaimTrace struct {
	// CandidatesRead is called by the portable default after it has read
	// the candidate rows and before its first guarded update. ids are the
	// candidates' primary keys in claim order.
	CandidatesRead func(ctx context.Context, ids []any)
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
