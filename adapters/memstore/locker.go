package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/claimstore/claimstore/dao/driver"
)

// Locker is the in-memory try-lock: a set of held keys under one mutex,
// so an attempt on a held key fails at once instead of waiting, as
// sync.Mutex.TryLock does for one key. Its namespace is the Locker
// itself: a store's locker (dao.Table.TryLock on a store of [New]) and
// one of [NewLocker] are apart. There are no transactions: fn gets a nil
// tx, and its writes stay when it fails. The zero Locker is ready to use;
// it must not be copied after first use.
type Locker struct {
	mu   sync.Mutex
	held map[string]struct{}
}

var _ driver.Locker = (*Locker)(nil)

// NewLocker returns an empty in-memory [Locker], for coord.WithLock.
func NewLocker() *Locker { return &Locker{} }

// TryLock runs fn with a nil tx when key is not held, holding it until fn
// returns or panics, and returns (true, fn's error wrapped); when key is
// held it returns (false, nil) at once. A key driver.CheckLockKey refuses
// is an error wrapping driver.ErrInvalidArgument.
func (l *Locker) TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (bool, error) {
	if err := driver.CheckLockKey(key); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	l.mu.Lock()
	if _, ok := l.held[key]; ok {
		l.mu.Unlock()
		return false, nil
	}
	if l.held == nil {
		l.held = map[string]struct{}{}
	}
	l.held[key] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.held, key)
		l.mu.Unlock()
	}()
	if err := fn(ctx, nil); err != nil {
		return true, fmt.Errorf("unit of work: %w", err)
	}
	return true, nil
}

// TryLock is the store's try-lock: the [Locker] of the store.
func (s *memDriver[T]) TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (bool, error) {
	return s.locks.TryLock(ctx, key, fn)
}
