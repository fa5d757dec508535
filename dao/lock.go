package dao

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimstore/claimstore/dao/driver"
)

// TryLock runs fn under the non-blocking, transaction-scoped try-lock
// named key, on the backend's [driver.Locker] (see package coord, whose
// WithLock takes a Table, for the semantics and each backend's lock). It
// returns (false, nil) at once when another holder has the lock, and
// (true, err) once fn has run in the lock's transaction: tx is a
// *gorm.DB inside that transaction on the SQL backends, which
// [Table.WithTx] binds a store to, and nil on memory and Elasticsearch,
// which have no transactions.
//
// Errors: a key [driver.CheckLockKey] refuses wraps [ErrInvalidArgument];
// a store bound to a caller's transaction ([Table.WithTx]) wraps
// [ErrInTransaction], since the lock needs a transaction of its own; a
// backend without a locker wraps [errors.ErrUnsupported]; fn's error and
// database errors are wrapped with the prefix "claimstore: try-lock:".
func (t *Table[T]) TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (bool, error) {
	if err := t.begin(ctx); err != nil {
		return false, fmt.Errorf("claimstore: try-lock: %w", err)
	}
	if err := driver.CheckLockKey(key); err != nil {
		return false, fmt.Errorf("claimstore: try-lock: %w", err)
	}
	if fn == nil {
		return false, fmt.Errorf("claimstore: try-lock: %w: nil fn", ErrInvalidArgument)
	}
	if t.inTx {
		return false, fmt.Errorf("claimstore: try-lock: %w: the lock takes a transaction of its own", ErrInTransaction)
	}
	l, ok := t.drv.(driver.Locker)
	if !ok {
		return false, fmt.Errorf("claimstore: try-lock: %s: %w", t.caps.Backend, errors.ErrUnsupported)
	}
	ran, err := l.TryLock(ctx, key, fn)
	if err != nil {
		return ran, fmt.Errorf("claimstore: try-lock: %w", err)
	}
	return ran, nil
}

// Locker runs a unit of work under a non-blocking, transaction-scoped
// try-lock: the interface of package dao/driver, which [Table] implements
// with [Table.TryLock] and the SQL backends' lockers over a *gorm.DB
// implement too. Package coord's WithLock takes one.
type Locker = driver.Locker

// CheckLockKey checks a try-lock key as every locker does: 1 to
// driver.MaxLockKey (255) bytes of valid UTF-8 without NUL. Other keys
// are an error wrapping [ErrInvalidArgument].
func CheckLockKey(key string) error { return driver.CheckLockKey(key) }
