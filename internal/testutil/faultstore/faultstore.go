// Package faultstore wraps a dao.Store so that tests can make its
// operations fail the way a real database's do, without a mock of the
// database itself: the wrapped store is a real one.
package faultstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/claimstore/claimstore/dao"
)

// FlakyUpdates is a store whose every other Update fails with
// dao.ErrUnavailable before it reaches the wrapped store, as a store does
// whose connection drops between statements. Every other operation goes
// to the wrapped store unchanged.
type FlakyUpdates[T any] struct {
	dao.Store[T]
	updates, failed atomic.Int64
}

// Wrap returns s with every other Update failing.
func Wrap[T any](s dao.Store[T]) *FlakyUpdates[T] { return &FlakyUpdates[T]{Store: s} }

// Update fails the first, third, fifth … call with an error wrapping
// dao.ErrUnavailable, and passes the others to the wrapped store.
func (s *FlakyUpdates[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if s.updates.Add(1)%2 == 1 {
		s.failed.Add(1)
		return 0, fmt.Errorf("update: connection lost: %w", dao.ErrUnavailable)
	}
	return s.Store.Update(ctx, where, set)
}

// Updates returns how many times Update was called.
func (s *FlakyUpdates[T]) Updates() int64 { return s.updates.Load() }

// Failed returns how many Updates failed on purpose.
func (s *FlakyUpdates[T]) Failed() int64 { return s.failed.Load() }
