package outboxenv

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// maxAttempts is the most times [Retry] runs a write.
const maxAttempts = 20

// IsBusy reports whether err is a write that found the database locked by
// another writer and may be tried again: the dao's retryable errors, and
// SQLite's BUSY and LOCKED, which a BEGIN IMMEDIATE reports before any
// store maps them.
func IsBusy(err error) bool {
	if err == nil {
		return false
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && (coded.Code()&0xff == 5 || coded.Code()&0xff == 6) {
		return true
	}
	return dao.IsRetryable(err) || strings.Contains(err.Error(), "database is locked")
}

// Retry runs write until it succeeds, fails with an error no retry can
// cure (see [IsBusy]), has failed 20 times, or ctx ends; between attempts
// it waits 10 ms more each time. It returns the number of retries and the
// last error.
func Retry(ctx context.Context, write func() error) (int64, error) {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || attempt == maxAttempts || !IsBusy(err) {
			return int64(attempt - 1), err
		}
		select {
		case <-ctx.Done():
			return int64(attempt - 1), err
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
}

// busyRetryStore is a message store whose claims and updates (the relay's
// marks) are retried quietly by [Retry] when the database is busy, as
// SQLite is whenever another connection holds its single write lock; it
// counts the retries in retries.
type busyRetryStore struct {
	dao.Store[outbox.Message]
	retries *atomic.Int64
}

// Claim claims up to req.Limit rows; after a busy failure it claims the
// rest of the limit again and returns every row claimed.
func (s busyRetryStore) Claim(ctx context.Context, req dao.ClaimRequest) ([]outbox.Message, error) {
	var all []outbox.Message
	n, err := Retry(ctx, func() error {
		got, err := s.Store.Claim(ctx, req)
		all = append(all, got...)
		req.Limit -= len(got)
		if err != nil && req.Limit <= 0 {
			return nil // the failure came after the last row
		}
		return err
	})
	s.retries.Add(n)
	return all, err
}

// Update runs the update, retried while the database is busy.
func (s busyRetryStore) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	var rows int64
	n, err := Retry(ctx, func() error {
		var err error
		rows, err = s.Store.Update(ctx, where, set)
		return err
	})
	s.retries.Add(n)
	return rows, err
}

// WithBusyRetries returns a repository with options opts over store whose
// claims and marks are retried quietly while the database is busy (see
// [Retry]), counting the retries in retries; writes in a caller's
// transaction go to the store bound to it, unwrapped. A store of the
// memory backend, which is never busy, is used as it is.
func WithBusyRetries(store dao.Store[outbox.Message], retries *atomic.Int64, opts ...outbox.Option) (*outbox.Repository, error) {
	if _, ok := txBinding(store); !ok {
		return outbox.New(store, opts...)
	}
	wrap := func(s dao.Store[outbox.Message]) dao.Store[outbox.Message] {
		return busyRetryStore{Store: s, retries: retries}
	}
	return Wrapped(store, wrap, nil, opts...)
}

// StoreWrapper returns a store that adds behaviour to s.
type StoreWrapper func(s dao.Store[outbox.Message]) dao.Store[outbox.Message]

// Wrapped returns a repository with options opts over wrap(store). A
// write in a caller's transaction goes to store bound to that
// transaction, passed through txWrap unless txWrap is nil.
func Wrapped(store dao.Store[outbox.Message], wrap, txWrap StoreWrapper, opts ...outbox.Option) (*outbox.Repository, error) {
	if bind, ok := txBinding(store); ok {
		opts = append(opts, outbox.WithTxStore(func(tx *gorm.DB) dao.Store[outbox.Message] {
			if txWrap == nil {
				return bind(tx)
			}
			return txWrap(bind(tx))
		}))
	}
	return outbox.New(wrap(store), opts...)
}

// txBinding returns the function that binds store to a caller's
// transaction, and false when store cannot bind one (the memory backend).
// It is the one place that knows how a store binds to a transaction.
func txBinding(store dao.Store[outbox.Message]) (outbox.TxStoreFunc, bool) {
	t, ok := store.(dao.TxBinder[outbox.Message])
	if !ok || !store.Capabilities().Transactions {
		return nil, false
	}
	return func(tx *gorm.DB) dao.Store[outbox.Message] { return t.WithTx(tx) }, true
}
