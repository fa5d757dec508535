package dao

import (
	"context"
	"errors"

	"github.com/claimstore/claimstore/dao/driver"
)

// Error sentinels. Every error a store returns wraps exactly one of these
// together with the native error of the backend; test with errors.Is, and
// with errors.As for the driver's own error type. They are the same values
// as the sentinels of package driver, which adapters return.
var (
	// ErrNotFound reports that Get found no row with the given primary key.
	ErrNotFound = driver.ErrNotFound

	// ErrInvalidArgument reports malformed input: an unknown field, a value
	// whose type does not fit the column, an empty In list, a nil value
	// where one is required, a non-positive Delete limit, an empty Set, a
	// claim strategy the backend cannot run. Nothing was sent to the
	// database.
	ErrInvalidArgument = driver.ErrInvalidArgument

	// ErrBusy reports lock contention that the backend gave up waiting on,
	// such as SQLite's SQLITE_BUSY / SQLITE_LOCKED or a lock wait past the
	// store's limit. Retryable.
	ErrBusy = driver.ErrBusy

	// ErrConflict reports a lost optimistic-concurrency race (an
	// Elasticsearch version conflict), a deadlock, or a serialization
	// failure. Retryable.
	ErrConflict = driver.ErrConflict

	// ErrDuplicate reports a unique-constraint violation. Not retryable.
	ErrDuplicate = driver.ErrDuplicate

	// ErrUnavailable reports that the backend could not be reached: the
	// connection was refused, reset or closed. Retryable.
	ErrUnavailable = driver.ErrUnavailable

	// ErrInTransaction reports that Claim was called on a store bound to an
	// open transaction. A claim must commit on its own: inside a caller's
	// transaction its rows would stay invisible to other workers until that
	// transaction commits.
	ErrInTransaction = driver.ErrInTransaction
)

// IsRetryable reports whether err is one that a retry of the same call can
// cure: [ErrBusy], [ErrConflict] (which covers deadlocks and serialization
// failures) or [ErrUnavailable]. Context cancellation and deadline errors are
// not retryable, also when they wrap one of those: an error such as
// "context deadline exceeded: database busy" (a SQLite write whose wait for
// the write lock, or a statement whose wait for a row lock, the caller's
// context ended) says the call stopped because its context ended, and the
// same call with that context cannot succeed. A caller that retries with a
// new context finds the cause with errors.Is (here [ErrBusy]). It returns
// false for nil.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable)
}
