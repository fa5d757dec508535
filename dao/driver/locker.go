package driver

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Locker is the optional interface of a driver (or of a handle on a
// database, such as the SQL backends' lockers over a *gorm.DB) that runs
// a unit of work under a transaction-scoped, non-blocking try-lock.
type Locker interface {
	// TryLock tries once, without waiting, to take the lock named key
	// (checked by [CheckLockKey]) in a transaction of its own. When
	// another holder has it, TryLock returns (false, nil) at once and fn
	// does not run. Otherwise it runs fn with that transaction, whose
	// type the backend documents (a *gorm.DB inside the transaction for
	// the SQL backends; nil for backends without transactions), commits
	// when fn returns nil and rolls back when fn returns an error or
	// panics; the lock is released with the transaction's end, and by
	// the server when the holder's connection or process dies. It
	// returns (true, err) once fn has run: fn's error wrapped, or the
	// commit's. A panic in fn is re-raised after the rollback and the
	// release. Errors of the attempt itself (the database unreachable)
	// are (false, err) with err wrapping a sentinel of this package.
	TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (bool, error)
}

// MaxLockKey is the longest try-lock key, in bytes: what SQL Server's
// sp_getapplock takes as a resource name (255 characters), so that every
// backend can name a key it is given.
const MaxLockKey = 255

// CheckLockKey checks a try-lock key: 1 to [MaxLockKey] bytes of valid
// UTF-8 without NUL. Other keys are an error wrapping
// [ErrInvalidArgument]; nothing is sent to a database.
func CheckLockKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty lock key", ErrInvalidArgument)
	case len(key) > MaxLockKey:
		return fmt.Errorf("%w: lock key of %d bytes, longer than %d", ErrInvalidArgument, len(key), MaxLockKey)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: lock key %q is not valid UTF-8", ErrInvalidArgument, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: lock key %q holds a NUL byte", ErrInvalidArgument, key)
	}
	return nil
}
