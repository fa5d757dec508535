package dao

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// The optional interfaces: methods that [Table] has and a [Store] need
// not. Code that takes a Store and can use one of them asserts the named
// interface (s.(dao.Migrator)) instead of spelling it out or asserting
// *Table, so that every package asks for the same method set; a wrapper
// store that forwards a method implements the interface too.
//
// A store that wraps another (metrics, tracing, fault injection) by
// embedding a Store keeps only the Store methods: to keep the behaviour
// the library's packages get from a Table, it must also forward the
// optional interfaces of the store it wraps:
//
//   - [KeyUpdater] and [EachUpdater]: the batched, fenced outcome writes of
//     a dispatch worker (and so of a jobs client's queues); without them
//     each outcome is one Update per row;
//   - [TxBinder]: writes in a caller's transaction (jobs.Client.InsertTx,
//     InsertManyTx and CompleteTx, outbox.Repository.Add with a tx,
//     dispatch.Schedules.WithTx); without it those calls fail with an
//     error wrapping errors.ErrUnsupported;
//   - [IdempotentCreator]: inserts that skip an existing unique key in one
//     statement (unique jobs, schedules, coord fences); without it rows are
//     created one by one and a duplicate is an error the caller absorbs;
//   - [Aser] and [TableNamer]: the database handle and table name that
//     Migrate, Drop, the console's row estimates and the pool watch use;
//   - [Modeler]: the model's naming, which coord's fences follow;
//   - [Migrator], [Clock], [Listener]: schema creation, the database's
//     clock and PostgreSQL notifications.
//
// The packages that take a store check for these once, when they are
// built: the absence of a capability that costs speed (or moves a clock)
// is logged there, once, at Warn (dispatch.New, jobs.NewClient,
// outbox.NewRelay); that of one a call needs makes that call fail with an
// error that wraps errors.ErrUnsupported and names the interface.
var (
	_ Migrator                    = (*Table[struct{}])(nil)
	_ Clock                       = (*Table[struct{}])(nil)
	_ Listener                    = (*Table[struct{}])(nil)
	_ IdempotentCreator[struct{}] = (*Table[struct{}])(nil)
	_ TxBinder[struct{}]          = (*Table[struct{}])(nil)
	_ KeyUpdater                  = (*Table[struct{}])(nil)
	_ EachUpdater                 = (*Table[struct{}])(nil)
	_ TableNamer                  = (*Table[struct{}])(nil)
	_ Aser                        = (*Table[struct{}])(nil)
	_ Modeler[struct{}]           = (*Table[struct{}])(nil)
)

// Migrator is a store that creates its table and indexes: [Table.Migrate].
type Migrator interface {
	// Migrate creates or updates the store's schema; errors.ErrUnsupported
	// when the backend has none to create.
	Migrate(ctx context.Context) error
}

// Clock is a store that reads the database's clock: [Table.Now]. Use it
// only when the store's Capabilities().DatabaseClock is true.
type Clock interface {
	// Now returns the database's current time.
	Now(ctx context.Context) (time.Time, error)
}

// Listener is a store that can wait for notifications: [Table.Listen]
// (PostgreSQL LISTEN).
type Listener interface {
	// CanListen reports whether Listen works on this store.
	CanListen() bool
	// Listen calls fn once with the empty payload when it has subscribed
	// to channel, then with the payload of every notification on it,
	// until ctx ends or the connection fails.
	Listen(ctx context.Context, channel string, fn func(payload string)) error
}

// IdempotentCreator is a store that inserts rows unless their unique key
// exists: [Table.CreateIfAbsent].
type IdempotentCreator[T any] interface {
	// CreateIfAbsent inserts the items whose unique keys are absent and
	// returns how many it inserted. Errors: [ErrInvalidArgument] for a nil
	// item or a value the model refuses; the database's errors, mapped.
	CreateIfAbsent(ctx context.Context, items ...*T) (int64, error)
}

// TxBinder is a store that binds itself to a caller's transaction:
// [Table.WithTx].
type TxBinder[T any] interface {
	// WithTx returns the store bound to tx (a *gorm.DB inside a
	// transaction on the SQL backends). A tx the backend cannot bind
	// yields a store whose every call fails with an error wrapping
	// [ErrInvalidArgument]. A wrapper may return the wrapped store's
	// WithTx: the calls in the transaction then bypass the wrapper.
	WithTx(tx any) *Table[T]
}

// KeyUpdater is a store whose fenced update reports the rows it wrote:
// [Table.UpdateKeys]. A dispatch worker writes each group of identical
// outcomes with one UpdateKeys.
type KeyUpdater interface {
	// UpdateKeys applies set to every row matching where and returns the
	// primary keys of the rows it matched. Errors are those of Update:
	// [ErrInvalidArgument] for a bad field or value, the database's
	// errors, mapped.
	UpdateKeys(ctx context.Context, where Criteria, set Set) ([]any, error)
}

// EachUpdater is a store that writes different values to many rows in few
// statements: [Table.UpdateEach]. A dispatch worker writes outcomes that
// differ row by row but set the same columns (failures with their own
// error and retry time) with one UpdateEach.
type EachUpdater interface {
	// UpdateEach writes rows[i].Set and common to the row whose match
	// columns hold rows[i].Match and that matches where, and returns the
	// primary keys of the rows it wrote. Errors: [ErrInvalidArgument] for
	// bad match columns, rows or values, or more than [MaxEachRows] rows;
	// the database's errors, mapped.
	UpdateEach(ctx context.Context, match []string, where Criteria, common Set, rows []RowSet) ([]any, error)
}

// TableNamer is a store that tells the name of the table (or index) it
// reads and writes: [Table.TableName]. It does no I/O and cannot fail.
type TableNamer interface {
	// TableName returns the store's table name.
	TableName() string
}

// Aser is a store that hands out values of its backend's own types:
// [Table.As] (a **gorm.DB or a *dialects.Table on the SQL backends). The
// library's packages use it to reach the database handle for schema work
// and diagnostics.
type Aser interface {
	// As reports whether it could set target, a pointer, to a value of
	// the backend's own type; false, with target unchanged, for a type
	// the backend does not offer.
	As(target any) bool
}

// Modeler is a store that exposes the parsed model of T it was built
// with: [Table.Model]. It does no I/O and cannot fail.
type Modeler[T any] interface {
	// Model returns the parsed model of T, under the store's naming
	// strategy.
	Model() *driver.Model[T]
}

// LibraryTable is the optional interface of a model type whose table and
// indexes a library creates for its own claim, such as the job table of
// package jobs: a store of such a model claims on its backend's fast path
// by default where the backend has one that is safe on the library's
// table (see [driver.LibraryTable], and [StrategyDefault]). An explicit
// [WithStrategy] still wins. A user's own model should not implement it.
type LibraryTable = driver.LibraryTable
