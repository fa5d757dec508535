package driver

import (
	"fmt"
	"strings"
	"time"
)

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

// Info is what a driver states about its table; it does no I/O. The
// portable layer builds dao.Capabilities from it and from the claim
// strategy it chose.
type Info struct {
	// Backend is the backend's name, such as "postgres", "mysql",
	// "mariadb", "sqlite", "sqlserver", "elasticsearch" or "memory".
	Backend string
	// Table is the name of the table (or index) the driver reads and
	// writes, as the model's naming strategy or an explicit name gives
	// it; for a backend without tables (memory) the model's table name.
	Table string
	// LostRace is what a claimer observes when another claimer takes a row
	// between the candidate read and the guarded update ([Driver.ClaimRow]).
	LostRace LostRace
	// Collation states how the table compares and orders strings.
	Collation Collation
	// ClaimTimeout bounds the wait for the outcome of a claim statement
	// already sent (see dao.Capabilities.ClaimTimeout); zero means none.
	ClaimTimeout time.Duration
	// LockWaitLimit is the server-side limit the driver sets on one
	// guarded update's wait for a row lock; zero means none.
	LockWaitLimit time.Duration
	// InTransaction is true when the driver runs on a transaction the
	// caller opened: the portable layer then refuses Claim with
	// [ErrInTransaction].
	InTransaction bool
	// CurrentTime is true when [Driver.Update] writes a [CurrentTime] Set
	// value as the database's current time in the same statement; the
	// portable layer then stamps autoUpdateTime and soft-delete columns of
	// Update and Delete with it instead of the application clock.
	CurrentTime bool
}

// ClaimerInfo describes a driver's single-operation claim ([Claimer]).
type ClaimerInfo struct {
	// Available is false when the backend cannot run the single operation
	// (a server version without SKIP LOCKED, a dialect without one): the
	// portable layer then refuses to choose it.
	Available bool
	// Default is true when the portable layer should choose it unless told
	// otherwise: the dialect is on the fast-path allow-list, or the model
	// is a [LibraryTable] and the driver's fast path is safe on the table
	// the library created (the SQL driver: MySQL 8.0.1+ and MariaDB 10.6+
	// besides the default list).
	Default bool
	// RoundTrips is what one claim costs on this path.
	RoundTrips RoundTrips
	// LostRace is the lost-race behaviour on this path.
	LostRace LostRace
	// LockWaitLimit is the server-side limit on a row-lock wait on this
	// path; zero means none.
	LockWaitLimit time.Duration
	// CurrentTime is true when [Claimer.ClaimBatch] writes a
	// [CurrentTime] Set value as the database's current time and returns
	// the rows as stored (PostgreSQL's RETURNING); the portable layer then
	// stamps autoUpdateTime columns of a claim with it instead of the
	// application clock.
	CurrentTime bool
}
