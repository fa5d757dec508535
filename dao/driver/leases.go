package driver

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Lease is one row of a lease table: who holds the leadership called
// Name, in which term, and until when by the database's clock.
type Lease struct {
	// Name names the election (the row's primary key).
	Name string
	// Holder is the id of the candidate that holds, or last held, the
	// lease.
	Holder string
	// Term counts the changes of leader of Name: 1 for the first holder,
	// one more at every takeover of an expired or released lease. A
	// renewal by the holder of an unexpired lease keeps it.
	Term int64
	// ElectedAt is when the current term began, by the database's clock
	// (UTC).
	ElectedAt time.Time
	// ExpiresAt is when the lease ends unless renewed, by the database's
	// clock (UTC). A released lease has ExpiresAt at or before the time of
	// its release.
	ExpiresAt time.Time
	// Now is the database's clock when the row was read (UTC), so that
	// ExpiresAt.Sub(Now) is the time left on the lease whatever the
	// skew of the reader's clock.
	Now time.Time
}

// Expired reports whether the lease had expired when it was read
// (ExpiresAt at or before Now, both by the database's clock).
func (l Lease) Expired() bool { return !l.ExpiresAt.After(l.Now) }

// LeaseStore keeps leader leases: one row per election name, acquired,
// renewed and taken over in one atomic operation decided by the store's
// own clock, never the caller's. Adapters implement it next to their
// Driver (sqlstore.NewLeases, memstore.NewLeases, esstore.NewLeases);
// package coord elects leaders over it. Implementations must be safe for
// concurrent use.
type LeaseStore interface {
	// AcquireLease tries to make holder the holder of name's lease for
	// ttl (> 0, whole milliseconds, at most 24 h), counted from the
	// store's clock at the operation, in one atomic operation:
	//
	//   - no row for name: it is created with term 1;
	//   - the row's lease has expired (or was released) by the store's
	//     clock: holder takes it over and the term grows by one, whoever
	//     held it before (holder included);
	//   - holder holds the unexpired lease: it is renewed (ExpiresAt moves
	//     to now + ttl) and the term is kept;
	//   - another holder holds the unexpired lease: nothing changes.
	//
	// It returns the lease as it is after the operation and whether holder
	// holds it. Errors wrap [ErrInvalidArgument] for an empty or too long
	// name or holder (more than 191 bytes, or not valid UTF-8) or a ttl
	// out of range (nothing is sent), or the sentinel of the backend's
	// failure.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (lease Lease, held bool, err error)

	// ReleaseLease ends holder's lease on name in term term at once (its
	// ExpiresAt becomes the store's current time), so that the next
	// AcquireLease of any candidate takes it over. It reports whether it
	// released a lease; false (and no error) when holder does not hold
	// name's unexpired lease in that term. Errors as AcquireLease's.
	ReleaseLease(ctx context.Context, name, holder string, term int64) (released bool, err error)

	// GetLease reads name's lease, with the store's clock in Lease.Now.
	// Errors wrap [ErrNotFound] when name has no row, [ErrInvalidArgument]
	// for a bad name, or the backend's failure.
	GetLease(ctx context.Context, name string) (Lease, error)
}

// MaxLeaseID is the longest election name or holder id, in bytes, a
// [LeaseStore] accepts: 191 bytes fit an indexed VARCHAR of utf8mb4 on
// every MySQL row format.
const MaxLeaseID = 191

// MaxLease is the longest lease a [LeaseStore] accepts: 24 hours.
const MaxLease = 24 * time.Hour

// MaxLeaseTTL is [MaxLease].
//
// Deprecated: use MaxLease.
const MaxLeaseTTL = MaxLease

// CheckLeaseID returns an error wrapping [ErrInvalidArgument] when id
// (an election name or a holder id; what names it in the message) is
// empty, longer than [MaxLeaseID] bytes, not valid UTF-8 or holds a NUL
// byte, and nil otherwise.
func CheckLeaseID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty lease %s", ErrInvalidArgument, what)
	case len(id) > MaxLeaseID:
		return fmt.Errorf("%w: lease %s is %d bytes, longer than %d", ErrInvalidArgument, what, len(id), MaxLeaseID)
	case !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: lease %s %q is not valid UTF-8 without NUL", ErrInvalidArgument, what, id)
	}
	return nil
}

// CheckLease returns an error wrapping [ErrInvalidArgument] when the
// lease length lease is not a whole number of milliseconds between 1 ms
// and [MaxLease], and nil otherwise.
func CheckLease(lease time.Duration) error {
	if lease < time.Millisecond || lease > MaxLease || lease%time.Millisecond != 0 {
		return fmt.Errorf("%w: lease %v is not a whole number of milliseconds from 1ms to %v", ErrInvalidArgument, lease, MaxLease)
	}
	return nil
}

// CheckLeaseTTL is [CheckLease].
//
// Deprecated: use CheckLease.
func CheckLeaseTTL(ttl time.Duration) error { return CheckLease(ttl) }

// CheckAcquire checks the arguments of [LeaseStore.AcquireLease] with
// [CheckLeaseID] and [CheckLease].
func CheckAcquire(name, holder string, ttl time.Duration) error {
	if err := CheckLeaseID("name", name); err != nil {
		return err
	}
	if err := CheckLeaseID("holder", holder); err != nil {
		return err
	}
	return CheckLease(ttl)
}
