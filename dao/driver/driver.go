package driver

import (
	"context"
	"time"
)

// Driver is what an adapter implements for one table (or index) of rows of
// the model type T. The portable layer (dao.New) calls it only with
// requests it has checked against [Driver.Model]: columns exist, values
// are normalized, limits are in range, items are not nil. It wraps every
// error the driver returns with one prefix, so a driver adds context (the
// statement, the id) but no "claimstore:" prefix.
//
// Every error a driver returns that is not the caller's context error
// wraps one of the sentinels of this package ([ErrBusy], [ErrConflict],
// [ErrDuplicate], [ErrUnavailable], [ErrNotFound], [ErrInvalidArgument])
// together with the backend's native error.
//
// A driver must be safe for concurrent use.
type Driver[T any] interface {
	// Model returns the parsed model of T the driver was built for.
	Model() *Model[T]

	// Info states what the driver promises; it does no I/O.
	Info() Info

	// Insert stores items (at least one, none nil, values checked by
	// [Model.CheckRow]) and fills generated primary keys back into them.
	// Either every item is stored or none; a unique violation wraps
	// [ErrDuplicate].
	Insert(ctx context.Context, items []*T) error

	// Select returns the rows matching q.Where in q.OrderBy order, at most
	// q.Limit of them when q.Limit > 0.
	Select(ctx context.Context, q Query) ([]T, error)

	// Count returns how many rows match where.
	Count(ctx context.Context, where Criteria) (int64, error)

	// Update applies set to every row matching where and returns the
	// number of rows it matched, also those that already held the values.
	Update(ctx context.Context, where Criteria, set Set) (int64, error)

	// Delete removes at most limit (> 0) rows matching where, smallest
	// primary keys first, and returns how many it removed.
	Delete(ctx context.Context, where Criteria, limit int) (int64, error)

	// ReadCandidates is the candidate read of the portable claim: Select
	// with the claim's bounds. Once sent, it runs detached from ctx's
	// cancellation and bounded by the driver's claim timeout, with the
	// server-side limits the backend can set on one statement; a read the
	// claim timeout cut short wraps [ErrUnavailable].
	ReadCandidates(ctx context.Context, q Query) ([]Candidate[T], error)

	// ClaimRow is the guarded update of the portable claim: it writes set
	// to the row whose primary key is c.Row's, only if the row still
	// matches where at the moment of the write (UPDATE … SET … WHERE pk = ?
	// AND (<where>), or a write conditioned on the version read), and
	// reports whether it did. It returns true only for a write known to be
	// committed. A row another claimer took first is (false, nil) on
	// backends whose lost race is silent; backends with optimistic
	// concurrency return an error wrapping [ErrConflict]. Once it has sent
	// its write it learns that write's outcome even when ctx ends
	// meanwhile (for example by running it on a context detached from
	// ctx's cancellation, bounded by the driver's claim timeout): a write
	// is never abandoned. It must not change c.Row.
	ClaimRow(ctx context.Context, c *Candidate[T], where Criteria, set Set) (bool, error)
}

// Candidate is one row of a candidate read, with the version the backend
// read it at.
type Candidate[T any] struct {
	// Row is the row as read.
	Row T
	// Version is the backend's own version of the row as read, which
	// ClaimRow gets back: Elasticsearch's sequence number and primary term,
	// for a write conditioned on them. nil for backends whose guarded
	// update re-asserts the criteria instead.
	Version any
}

// Candidates returns rows as candidates without a version, for drivers
// whose guarded update re-asserts the criteria.
func Candidates[T any](rows []T) []Candidate[T] {
	out := make([]Candidate[T], len(rows))
	for i := range rows {
		out[i].Row = rows[i]
	}
	return out
}

// Claimer is the optional single-operation claim of a driver (PostgreSQL's
// UPDATE … FOR UPDATE SKIP LOCKED … RETURNING, a locking read and one
// UPDATE in a transaction, or a claim under the driver's own lock). The
// portable layer uses it instead of its guarded per-row claim when the
// claim strategy says so.
type Claimer[T any] interface {
	// ClaimerInfo describes the single operation; it does no I/O.
	ClaimerInfo() ClaimerInfo

	// ClaimBatch claims up to req.Limit rows matching req.Where in
	// req.OrderBy order, applies req.Set and returns them in their
	// post-claim state and in that order. It returns a row only once its
	// claim is committed. It checks ctx before sending anything and sends
	// nothing once ctx is done; once it has sent a statement it learns
	// its outcome (see [Driver.ClaimRow]) and returns what committed,
	// with an error wrapping ctx.Err() when ctx ended meanwhile.
	ClaimBatch(ctx context.Context, req ClaimRequest) ([]T, error)
}

// TxClaimer is the optional interface of a driver bound to a caller's
// transaction ([TxBinder]) whose single-operation claim can run inside
// that transaction: [dao.Table.ClaimInTx].
type TxClaimer[T any] interface {
	// ClaimInTx claims up to req.Limit rows matching req.Where in
	// req.OrderBy order inside the bound transaction, applies req.Set and
	// returns them in their post-claim state and in that order. The rows
	// stay locked by the transaction, and are claimed for every other
	// caller once it commits; a rollback leaves them as they were. A
	// backend or server version that cannot run it returns an error
	// wrapping [errors.ErrUnsupported] and sends nothing.
	ClaimInTx(ctx context.Context, req ClaimRequest) ([]T, error)
}

// KeyUpdater is the optional interface of a driver whose update can tell
// which rows it matched in the same operation: PostgreSQL's and SQLite's
// UPDATE … RETURNING, SQL Server's OUTPUT INSERTED, a locking read and an
// UPDATE of the keys read in one transaction on MySQL and MariaDB. The
// portable layer uses it for [dao.Table.UpdateKeys] (the batched, fenced
// outcome writes of a dispatch worker); without it, it reads the matching
// keys and updates them one by one.
type KeyUpdater[T any] interface {
	// UpdateKeys applies set to every row matching where, as
	// [Driver.Update] does, and returns the primary keys of the rows it
	// matched, in no particular order, each in the form the backend's
	// driver scans it (an int64 for an integer key, a string for text).
	// Nothing is written when it returns an error, except on a backend
	// whose Update is not atomic (none of the SQL backends).
	UpdateKeys(ctx context.Context, where Criteria, set Set) ([]any, error)
}

// AbsentInserter is the optional interface of a driver that can insert
// many rows in one operation, skipping those a unique key already holds:
// PostgreSQL's and SQLite's INSERT … ON CONFLICT DO NOTHING, MySQL's and
// MariaDB's INSERT IGNORE. The portable layer uses it for
// [dao.Table.CreateIfAbsent]; without it, it inserts row by row.
type AbsentInserter[T any] interface {
	// InsertIfAbsent stores each of items (at least one, none nil, values
	// checked by [Model.CheckRow]) unless a stored row, or an earlier item,
	// holds one of its unique keys, and returns how many it stored. It
	// does not change items (generated keys are not filled back).
	InsertIfAbsent(ctx context.Context, items []*T) (int64, error)
}

// Getter is the optional interface of a driver with a read by primary key
// of its own, such as Elasticsearch's real-time get API, which sees a
// document before a refresh makes it searchable.
type Getter[T any] interface {
	// Get returns the row whose primary key is id (in plain form), or an
	// error wrapping [ErrNotFound].
	Get(ctx context.Context, id any) (T, error)
}

// TxBinder is the optional interface of a driver that can run inside a
// transaction the caller opened.
type TxBinder[T any] interface {
	// BindTx returns a driver that runs every call inside tx, whose type
	// the driver documents (a *gorm.DB inside a transaction for the SQL
	// drivers). A tx of another type, or nil, is an error wrapping
	// [ErrInvalidArgument]. The returned driver's Info has
	// InTransaction set.
	BindTx(tx any) (Driver[T], error)
}

// Migrator is the optional interface of a driver that can create its table
// (or index) and add missing columns and indexes.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// Clock is the optional interface of a driver that can read its
// database's clock, so that leases computed on several servers agree.
type Clock interface {
	// Now returns the database's current time in UTC.
	Now(ctx context.Context) (time.Time, error)
}

// EachUpdate is one [EachUpdater.UpdateEach]: different values written
// to many rows, each found by its match values. The portable layer has
// checked every name and value: Match and Columns are model columns (the
// first match column is the primary key), each of Rows holds
// len(Match)+len(Columns) plain values (the match values, then the
// written ones), Common is a checked Set without Increment values written
// to every row, and Where (possibly match-all) is checked criteria every
// row must also match.
type EachUpdate struct {
	Match   []string
	Columns []string
	Rows    [][]any
	Common  Set
	Where   Criteria
}

// EachUpdater is the optional interface of a driver that writes different
// values to many rows in fewer statements than one per row.
type EachUpdater[T any] interface {
	// UpdateEach writes, to each row of u.Rows found by its match values
	// and matching u.Where, its values of u.Columns and u.Common, and
	// returns the primary keys of the rows written, as they were given.
	// Rows that are not found, or do not match, are left out. On error
	// it returns the keys of the rows it is sure were written.
	UpdateEach(ctx context.Context, u EachUpdate) ([]any, error)
}

// Listener is the optional interface of a driver whose database delivers
// notifications between sessions (PostgreSQL's LISTEN and NOTIFY).
type Listener interface {
	// Listen subscribes to channel on a connection of its own, calls fn
	// once with the empty payload when the subscription is in place, and
	// then with the payload of each notification, in the order the
	// database delivers them, until ctx ends or the connection fails; it
	// returns the error that ended it (wrapping ctx.Err() when ctx
	// ended). fn runs on Listen's goroutine and must return quickly.
	// Notifications sent while no Listen runs are lost: a listener treats
	// them as hints and looks at the table itself at the empty payload,
	// each time it has (re)subscribed.
	Listen(ctx context.Context, channel string, fn func(payload string)) error
}

// As is the optional escape hatch of a driver: As reports whether it could
// set target (a pointer) to a value of the backend's own type, such as a
// **gorm.DB. Each driver documents the types it supports.
type As interface {
	As(target any) bool
}

// EachRow returns the criteria and the Set of one row of u, whose values
// are vals: the row found by its match values and matching u.Where, and
// its values of u.Columns with u.Common. Drivers that write row by row
// use it.
func EachRow(u EachUpdate, vals []any) (Criteria, Set) {
	kids := make([]Criteria, 0, len(u.Match)+1)
	for i, c := range u.Match {
		kids = append(kids, Compare(OpEq, c, vals[i]))
	}
	if !u.Where.IsAll() {
		kids = append(kids, u.Where)
	}
	set := make(Set, len(u.Columns)+len(u.Common))
	for k, v := range u.Common {
		set[k] = v
	}
	for i, c := range u.Columns {
		set[c] = vals[len(u.Match)+i]
	}
	return Logic(OpAnd, kids), set
}
