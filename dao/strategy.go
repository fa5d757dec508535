package dao

import (
	"fmt"
	"time"
)

// Strategy is how a store claims rows; [New] chooses it once and
// [Capabilities] shows it.
type Strategy int

// The claim strategies.
const (
	// StrategyDefault lets [New] choose: the backend's fast path when its
	// dialect is on the fast-path allow-list (PostgreSQL, SQLite, memory),
	// or, for a model whose table a library owns ([LibraryTable], such as
	// the job table), on the library tables' allow-list (also MySQL 8.0.1+
	// and MariaDB 10.6+); else the portable default. Capabilities never
	// shows it.
	StrategyDefault Strategy = iota
	// StrategyPortable is the guarded per-row claim, the correctness floor
	// on every backend: one candidate read, then one guarded update per
	// candidate that re-asserts Where (1 + N round trips).
	StrategyPortable
	// StrategyFastPath is the backend's single operation: one UPDATE … FOR
	// UPDATE SKIP LOCKED … RETURNING on PostgreSQL, a SKIP LOCKED read and
	// one UPDATE in a transaction on MySQL 8.0.1+ and MariaDB 10.6+, one
	// UPDATE … RETURNING on SQLite, one UPDATE through a READPAST read
	// with OUTPUT on SQL Server, one locked pass in memory. [New] refuses it with [ErrInvalidArgument]
	// for a backend that has none.
	StrategyFastPath
)

// String returns the strategy's name: "default", "portable" or "fast path".
func (s Strategy) String() string {
	switch s {
	case StrategyDefault:
		return "default"
	case StrategyPortable:
		return "portable"
	case StrategyFastPath:
		return "fast path"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Option configures [New].
type Option func(*options)

type options struct {
	strategy Strategy
	clock    func() time.Time
	strict   bool // WithClaimSpread(false)
}

// WithStrategy sets the claim strategy (default [StrategyDefault]).
// [StrategyFastPath] opts a backend in whose fast path is not on by
// default (MySQL, MariaDB, SQL Server); [StrategyPortable] makes every claim run the
// guarded per-row default, which benchmarks use to measure what the fast
// path buys.
func WithStrategy(s Strategy) Option { return func(o *options) { o.strategy = s } }

// WithClock sets the application clock the store stamps automatic
// timestamps and soft deletions with where the database's own clock is
// not used (see [Table.Create]); default time.Now. The values written are
// now in UTC, truncated to the column's precision. Tests use it to make
// those values known.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithClaimSpread sets whether the portable claim spreads concurrent
// claimers over their candidates (default true). With spread on:
//
//   - A claim tries its candidates in OrderBy order until a guarded update
//     finds its row taken by another claimer (a lost race). From then on
//     it tries the candidates it has not tried in random order, going on
//     in order after each row it wins, and after two lost races in a row
//     it stops and returns the rows it won (fewer than req.Limit: the
//     documented outcome under contention; the rows it did not try are
//     untouched and stay claimable).
//   - A claim of a store whose previous claim lost a race reads a wider
//     window of candidates: 8 times req.Limit, at most 1,000 beyond it.
//     The window narrows to req.Limit again after a claim that loses no
//     race.
//
// A claim that loses no race tries its first req.Limit candidates in
// order and returns them, exactly as with spread off, and the returned
// slice is always in OrderBy order. Under contention a claim may win a
// candidate further down its window while an earlier one goes to another
// claimer or stays claimable for the next claim, as rows locked by
// another claimer are passed over by SKIP LOCKED on the fast paths.
//
// With spread off every claim reads req.Limit candidates and tries all of
// them in OrderBy order: under contention every claimer races for the
// head of the queue, and most guarded updates wait for the row lock of
// the claimer ahead and then find the row taken. It is kept for
// comparison (benchmarks) and for callers who want every candidate
// tried. The fast path ([StrategyFastPath]) ignores it.
func WithClaimSpread(on bool) Option { return func(o *options) { o.strict = !on } }
