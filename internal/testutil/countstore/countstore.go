// Package countstore wraps a store in a metrics wrapper that counts the
// calls of its writes, as a program's metrics or tracing wrapper does, so
// that tests can see which writes the library's packages make through a
// wrapped store. [Plain] embeds dao.Store and forwards nothing else;
// [Forwarding] also forwards the optional interfaces of package dao.
package countstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// Forwarding implements every optional interface of package dao that the
// library's packages use.
var (
	_ dao.KeyUpdater                  = (*Forwarding[struct{}])(nil)
	_ dao.EachUpdater                 = (*Forwarding[struct{}])(nil)
	_ dao.TxBinder[struct{}]          = (*Forwarding[struct{}])(nil)
	_ dao.IdempotentCreator[struct{}] = (*Forwarding[struct{}])(nil)
	_ dao.TableNamer                  = (*Forwarding[struct{}])(nil)
	_ dao.Aser                        = (*Forwarding[struct{}])(nil)
	_ dao.Modeler[struct{}]           = (*Forwarding[struct{}])(nil)
	_ dao.Clock                       = (*Forwarding[struct{}])(nil)
	_ dao.Listener                    = (*Forwarding[struct{}])(nil)
	_ dao.Migrator                    = (*Forwarding[struct{}])(nil)
)

// Counts are the calls a wrapper has passed on, by method.
type Counts struct {
	Update, UpdateKeys, UpdateEach, WithTx atomic.Int64
}

// Plain counts the Updates of the store it wraps and has no method but
// those of dao.Store: the wrapper that loses the optional interfaces.
type Plain[T any] struct {
	dao.Store[T]
	Counts Counts
}

// NewPlain returns s wrapped in a Plain.
func NewPlain[T any](s dao.Store[T]) *Plain[T] { return &Plain[T]{Store: s} }

// Update counts the call and passes it on.
func (s *Plain[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	s.Counts.Update.Add(1)
	return s.Store.Update(ctx, where, set)
}

// Forwarding counts the Updates, UpdateKeys, UpdateEach and WithTx of the
// table it wraps, and forwards every optional interface of package dao
// the library's packages use to it.
type Forwarding[T any] struct {
	Plain[T]
	table *dao.Table[T]
}

// NewForwarding returns t wrapped in a Forwarding.
func NewForwarding[T any](t *dao.Table[T]) *Forwarding[T] {
	return &Forwarding[T]{Plain: Plain[T]{Store: t}, table: t}
}

// UpdateKeys counts the call and forwards it: dao.KeyUpdater.
func (s *Forwarding[T]) UpdateKeys(ctx context.Context, where dao.Criteria, set dao.Set) ([]any, error) {
	s.Counts.UpdateKeys.Add(1)
	return s.table.UpdateKeys(ctx, where, set)
}

// UpdateEach counts the call and forwards it: dao.EachUpdater.
func (s *Forwarding[T]) UpdateEach(ctx context.Context, match []string, where dao.Criteria, common dao.Set, rows []dao.RowSet) ([]any, error) {
	s.Counts.UpdateEach.Add(1)
	return s.table.UpdateEach(ctx, match, where, common, rows)
}

// WithTx counts the call and forwards it: dao.TxBinder. The store it
// returns is the wrapped table's, uncounted.
func (s *Forwarding[T]) WithTx(tx any) *dao.Table[T] {
	s.Counts.WithTx.Add(1)
	return s.table.WithTx(tx)
}

// CreateIfAbsent forwards the call: dao.IdempotentCreator.
func (s *Forwarding[T]) CreateIfAbsent(ctx context.Context, items ...*T) (int64, error) {
	return s.table.CreateIfAbsent(ctx, items...)
}

// TableName forwards the call: dao.TableNamer.
func (s *Forwarding[T]) TableName() string { return s.table.TableName() }

// As forwards the call: dao.Aser.
func (s *Forwarding[T]) As(target any) bool { return s.table.As(target) }

// Model forwards the call: dao.Modeler.
func (s *Forwarding[T]) Model() *driver.Model[T] { return s.table.Model() }

// Now forwards the call: dao.Clock.
func (s *Forwarding[T]) Now(ctx context.Context) (time.Time, error) { return s.table.Now(ctx) }

// CanListen forwards the call: dao.Listener.
func (s *Forwarding[T]) CanListen() bool { return s.table.CanListen() }

// Listen forwards the call: dao.Listener.
func (s *Forwarding[T]) Listen(ctx context.Context, channel string, fn func(payload string)) error {
	return s.table.Listen(ctx, channel, fn)
}

// Migrate forwards the call: dao.Migrator.
func (s *Forwarding[T]) Migrate(ctx context.Context) error { return s.table.Migrate(ctx) }
