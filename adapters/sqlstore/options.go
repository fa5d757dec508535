package sqlstore

import (
	"time"

	"github.com/claimstore/claimstore/dao"
)

// Option configures [New].
type Option func(*options)

type options struct {
	table        string
	strategy     dao.Strategy
	claimTimeout time.Duration
	lockWait     time.Duration
	noSpread     bool // WithClaimSpread(false)
}

// DefaultClaimTimeout and DefaultLockWaitLimit are the bounds a store uses
// unless [WithClaimTimeout] or [WithLockWaitLimit] set others.
const (
	DefaultClaimTimeout  = 30 * time.Second
	DefaultLockWaitLimit = 5 * time.Second
)

// WithClaimTimeout sets how long a claim waits for the outcome of a
// statement it has already sent (default [DefaultClaimTimeout]). Once sent,
// a claim statement runs on a context detached from the caller's
// cancellation, so that the rows it commits are learned and returned
// rather than stranded; d bounds that wait. When d passes before the
// outcome is learned, the driver gives the connection up and the claim
// returns no rows and [dao.ErrUnavailable]: the claim was rolled back, or
// committed with its acknowledgement lost (its rows come back when their
// lease expires). Server-side limits derived from d (a statement limit of
// d/3) and from [WithLockWaitLimit] end a stuck claim before d passes
// where the claim path sets them (see the package documentation). d <= 0
// keeps the default.
func WithClaimTimeout(d time.Duration) Option {
	return func(o *options) { o.claimTimeout = d }
}

// WithLockWaitLimit sets the server-side limit on how long one claim
// statement waits for a row lock held by another transaction (default
// [DefaultLockWaitLimit]). A claim whose statement reaches it returns the
// rows already committed with an error wrapping [dao.ErrBusy]. d <= 0 keeps
// the default. The limit is rounded up to what the server accepts (whole
// seconds on MySQL and MariaDB).
func WithLockWaitLimit(d time.Duration) Option {
	return func(o *options) { o.lockWait = d }
}

// WithTable makes the store use table name instead of the table name GORM
// derives from T. A dotted name ("schema.table") is schema-qualified. The
// names of the claim statements' common table expressions ("claim_ids",
// "claimed", "delete_batch") are refused by [New].
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithStrategy sets the claim strategy (see [dao.WithStrategy]). By default
// PostgreSQL and SQLite (one UPDATE … RETURNING; the bundled SQLite is
// 3.35.0 or later) claim on their fast path and every other dialect on the
// portable default, except that a model whose table a library owns
// ([dao.LibraryTable]: the job table, jobs.Row) claims on the fast path
// also on MySQL 8.0.1+ and MariaDB 10.6+ (New reads the server's version;
// an older server keeps the portable default). [dao.StrategyPortable]
// given here still wins for such a model. [dao.StrategyFastPath] opts in MySQL 8.0.1+ and
// MariaDB 10.6+ (SKIP LOCKED) and SQL Server (one UPDATE through a
// READPAST, UPDLOCK read, OUTPUT INSERTED.*). On MySQL or MariaDB servers
// older than that the fast path's first claim fails with the server's
// syntax error.
// [dao.StrategyPortable] makes every claim run the portable default, which
// benchmarks use to measure what the fast path buys.
func WithStrategy(s dao.Strategy) Option { return func(o *options) { o.strategy = s } }

// WithClaimSpread sets whether the portable default spreads concurrent
// claimers over their candidates (default true; see [dao.WithClaimSpread]
// for what it changes). With it, eight claimers on MariaDB claim about
// five times the rows per second of the same statements run without it
// (docs/benchmarks.md, "MariaDB").
// The fast path ignores it.
func WithClaimSpread(on bool) Option { return func(o *options) { o.noSpread = !on } }
