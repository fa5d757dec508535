package dao

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// The optional interfaces: methods that [Table] has and a [Store] need
// not. Code that takes a Store and can use one of them asserts the named
// interface (s.(dao.Migrator)) instead of spelling it out, so that every
// package asks for the same method set; a wrapper store that forwards a
// method implements the interface too.
var (
	_ Migrator                    = (*Table[struct{}])(nil)
	_ Clock                       = (*Table[struct{}])(nil)
	_ Listener                    = (*Table[struct{}])(nil)
	_ IdempotentCreator[struct{}] = (*Table[struct{}])(nil)
	_ TxBinder[struct{}]          = (*Table[struct{}])(nil)
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
	// returns how many it inserted.
	CreateIfAbsent(ctx context.Context, items ...*T) (int64, error)
}

// TxBinder is a store that binds itself to a caller's transaction:
// [Table.WithTx].
type TxBinder[T any] interface {
	// WithTx returns the store bound to tx (a *gorm.DB inside a
	// transaction on the SQL backends).
	WithTx(tx any) *Table[T]
}

// LibraryTable is the optional interface of a model type whose table and
// indexes a library creates for its own claim, such as the job table of
// package jobs: a store of such a model claims on its backend's fast path
// by default where the backend has one that is safe on the library's
// table (see [driver.LibraryTable], and [StrategyDefault]). An explicit
// [WithStrategy] still wins. A user's own model should not implement it.
type LibraryTable = driver.LibraryTable
