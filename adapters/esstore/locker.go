package esstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// DefaultLockLease is the lease of an Elasticsearch try-lock unless
// [WithLockLease] sets another: the holder renews it every third of it
// while its unit of work runs, and a holder that dies without releasing
// it keeps the lock until it expires.
const DefaultLockLease = 30 * time.Second

// DefaultLockTTL is [DefaultLockLease].
//
// Deprecated: use DefaultLockLease.
const DefaultLockTTL = DefaultLockLease

// WithLockTTL is [WithLockLease].
//
// Deprecated: use WithLockLease.
func WithLockTTL(d time.Duration) Option { return WithLockLease(d) }

// WithLockLease sets the lease of the store's try-locks (default
// [DefaultLockLease]): how long a dead holder keeps a lock, and a third of
// it the renewal interval. It must be well above the clock skew between
// servers. d < 1ms makes New fail with dao.ErrInvalidArgument.
func WithLockLease(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: lock lease %v", dao.ErrInvalidArgument, d)
		}
		o.lockTTL = d
		return nil
	}
}

// lockRelease bounds the write that releases a lease, which runs detached
// from the caller's cancellation.
const lockRelease = 5 * time.Second

// lease is the source of a lock document.
type lease struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// ExpiresAt is the end of the lease in Unix milliseconds of the
	// holder's clock; 0 once released.
	ExpiresAt int64 `json:"expires_at"`
}

// lockMapping is the strict mapping of the lock index.
var lockMapping = obj{"mappings": obj{
	"dynamic": "strict",
	"properties": obj{
		"key":        obj{"type": "keyword", "index": false},
		"holder":     obj{"type": "keyword", "index": false},
		"expires_at": obj{"type": "long", "index": false},
	},
}}

// errLeaseLost ends the unit of work's context when a renewal finds the
// lease taken over.
var errLeaseLost = errors.New("lease lost")

// TryLock is the store's try-lock: a lease document in the lock index
// (the store's index followed by "-claimstore-locks", created by
// Migrate), whose id is the key in unpadded base64url. An attempt is a
// real-time get and one write conditioned on what it read: op_type=create
// when there is no document, if_seq_no and if_primary_term when the
// lease there has expired or was released; a version conflict, or a lease
// that has not expired, is (false, nil) at once. While fn runs the lease
// is renewed every third of its TTL ([WithLockLease]) by the same
// conditioned write; a renewal that fails (the lease was taken over after
// a pause longer than the TTL) cancels fn's context, and TryLock then returns an error
// wrapping dao.ErrConflict. When fn returns or panics the lease is
// released (its expiry set to 0). fn gets a nil tx: Elasticsearch has no
// transactions, and fn's writes stay when it fails. A holder that dies
// keeps the lock for up to the TTL. Expiry is compared with the local
// clock of each server, so their clocks must agree to well within
// the TTL.
func (s *esDriver[T]) TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (bool, error) {
	const op = "try-lock"
	if err := driver.CheckLockKey(key); err != nil {
		return false, err
	}
	id := base64.RawURLEncoding.EncodeToString([]byte(key))
	_, body, esErr, err := s.do(ctx, op, esapi.GetRequest{Index: s.lockIndex(), DocumentID: id})
	if err != nil {
		return false, err
	}
	if esErr != nil && esErr.Type != "" {
		return false, fmt.Errorf("%w (has Migrate run?)", wrapES(op, esErr))
	}
	var cur struct {
		Found       bool  `json:"found"`
		SeqNo       int64 `json:"_seq_no"`
		PrimaryTerm int64 `json:"_primary_term"`
		Source      lease `json:"_source"`
	}
	if err := json.Unmarshal(body, &cur); err != nil {
		return false, fmt.Errorf("%s: decode response: %w", op, err)
	}
	if cur.Found && cur.Source.ExpiresAt > time.Now().UnixMilli() {
		return false, nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	l := &leaseHold{s: s.lockIndex(), client: s.client, id: id, ttl: s.lockTTL, lease: lease{Key: key, Holder: hex.EncodeToString(b[:])}}
	if cur.Found {
		l.seqNo, l.term = cur.SeqNo, cur.PrimaryTerm
	}
	ok, err := l.write(ctx, !cur.Found, time.Now().Add(s.lockTTL))
	if err != nil || !ok {
		return false, err
	}

	lctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.renew(lctx, stop, cancel)
	}()
	defer func() {
		close(stop)
		wg.Wait()
		cancel(nil)
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), lockRelease)
		defer done()
		if context.Cause(lctx) != errLeaseLost {
			_, _ = l.write(rctx, false, time.UnixMilli(0))
		}
	}()
	err = fn(lctx, nil)
	if context.Cause(lctx) == errLeaseLost {
		return true, fmt.Errorf("%s: %w: the lease was taken over while the unit of work ran (its error: %v)", op, dao.ErrConflict, err)
	}
	if err != nil {
		return true, fmt.Errorf("unit of work: %w", err)
	}
	return true, nil
}

// lockIndex is the index of the store's lock documents.
func (s *esDriver[T]) lockIndex() string { return s.index + "-claimstore-locks" }

// leaseHold is a lease this process holds: the version it last wrote.
type leaseHold struct {
	s      string // lock index
	client esapi.Transport
	id     string
	ttl    time.Duration
	lease  lease
	seqNo  int64
	term   int64
}

// write stores the lease with the given expiry, created anew or
// conditioned on the version last read or written, and reports whether it
// won; a version conflict is (false, nil).
func (l *leaseHold) write(ctx context.Context, create bool, expires time.Time) (bool, error) {
	l.lease.ExpiresAt = expires.UnixMilli()
	seqNo, term, ok, err := writeVersioned(ctx, l.client, "try-lock: write lease", l.s, l.id, l.lease, create, l.seqNo, l.term)
	if !ok || err != nil {
		return false, err
	}
	l.seqNo, l.term = seqNo, term
	return true, nil
}

// renew extends the lease every TTL/3 until stop is closed; when a
// renewal loses the lease, it cancels the unit of work with errLeaseLost.
func (l *leaseHold) renew(ctx context.Context, stop <-chan struct{}, cancel context.CancelCauseFunc) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			ok, err := l.write(ctx, false, time.Now().Add(l.ttl))
			if err == nil && !ok {
				cancel(errLeaseLost)
				return
			}
		}
	}
}
