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
	// dialect is on the fast-path allow-list (PostgreSQL, memory), else
	// the portable default. Capabilities never shows it.
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
}

// WithStrategy sets the claim strategy (default [StrategyDefault]).
// [StrategyFastPath] opts a backend in whose fast path is not on by
// default (MySQL, MariaDB, SQLite, SQL Server); [StrategyPortable] makes every claim run the
// guarded per-row default, which benchmarks use to measure what the fast
// path buys.
func WithStrategy(s Strategy) Option { return func(o *options) { o.strategy = s } }

// WithClock sets the application clock the store stamps automatic
// timestamps and soft deletions with where the database's own clock is
// not used (see [Table.Create]); default time.Now. The values written are
// now in UTC, truncated to the column's precision. Tests use it to make
// those values known.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }
