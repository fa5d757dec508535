package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// Leases is the in-memory [driver.LeaseStore]: one lease per election
// name in a map under a mutex, with the process's clock as the store's
// clock. It elects a leader among goroutines of one process (tests, and
// programs that run several candidates in one process); nothing survives
// the process. Use [NewLeases]; the zero value is not usable.
type Leases struct {
	now func() time.Time

	mu   sync.Mutex
	rows map[string]driver.Lease
}

// NewLeases returns an empty in-memory lease store whose clock is
// time.Now.
func NewLeases() *Leases { return NewLeasesClock(time.Now) }

// NewLeasesClock returns an empty in-memory lease store whose clock is
// now, for tests that move time by hand. A nil now means time.Now.
func NewLeasesClock(now func() time.Time) *Leases {
	if now == nil {
		now = time.Now
	}
	return &Leases{now: now, rows: map[string]driver.Lease{}}
}

// AcquireLease implements [driver.LeaseStore.AcquireLease] under the
// store's mutex: insert, take over an expired lease with term + 1, renew
// the holder's unexpired lease with the term kept, or change nothing.
// Errors wrap [dao.ErrInvalidArgument] for bad arguments, or ctx.Err().
func (l *Leases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (driver.Lease, bool, error) {
	if err := driver.CheckAcquire(name, holder, ttl); err != nil {
		return driver.Lease{}, false, fmt.Errorf("claimstore: memstore: acquire lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UTC()
	row, ok := l.rows[name]
	switch {
	case !ok:
		row = driver.Lease{Name: name, Holder: holder, Term: 1, ElectedAt: now}
	case !row.ExpiresAt.After(now):
		row.Holder, row.Term, row.ElectedAt = holder, row.Term+1, now
	case row.Holder != holder:
		row.Now = now
		return row, false, nil
	}
	row.ExpiresAt = now.Add(ttl)
	row.Now = now
	l.rows[name] = row
	return row, true, nil
}

// ReleaseLease implements [driver.LeaseStore.ReleaseLease]: the lease
// expires now when holder holds it unexpired in term. Errors as
// AcquireLease's.
func (l *Leases) ReleaseLease(ctx context.Context, name, holder string, term int64) (bool, error) {
	if err := driver.CheckLeaseID("name", name); err != nil {
		return false, fmt.Errorf("claimstore: memstore: release lease: %w", err)
	}
	if err := driver.CheckLeaseID("holder", holder); err != nil {
		return false, fmt.Errorf("claimstore: memstore: release lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UTC()
	row, ok := l.rows[name]
	if !ok || row.Holder != holder || row.Term != term || !row.ExpiresAt.After(now) {
		return false, nil
	}
	row.ExpiresAt = now
	l.rows[name] = row
	return true, nil
}

// GetLease implements [driver.LeaseStore.GetLease]. Errors wrap
// [dao.ErrNotFound] when name has no lease, [dao.ErrInvalidArgument] for
// a bad name, or ctx.Err().
func (l *Leases) GetLease(ctx context.Context, name string) (driver.Lease, error) {
	if err := driver.CheckLeaseID("name", name); err != nil {
		return driver.Lease{}, fmt.Errorf("claimstore: memstore: get lease: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	row, ok := l.rows[name]
	if !ok {
		return driver.Lease{}, fmt.Errorf("claimstore: memstore: get lease %q: %w", name, dao.ErrNotFound)
	}
	row.Now = l.now().UTC()
	return row, nil
}

var _ driver.LeaseStore = (*Leases)(nil)
