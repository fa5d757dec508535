package driver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// TestCheckLease checks the bounds of a lease length, and that the
// deprecated CheckLeaseTTL and MaxLeaseTTL answer as CheckLease and
// MaxLease do.
func TestCheckLease(t *testing.T) {
	for _, tc := range []struct {
		lease time.Duration
		ok    bool
	}{
		{time.Millisecond, true},
		{30 * time.Second, true},
		{driver.MaxLease, true},
		{0, false},
		{-time.Second, false},
		{time.Microsecond, false},
		{time.Second + time.Microsecond, false},
		{driver.MaxLease + time.Millisecond, false},
	} {
		err := driver.CheckLease(tc.lease)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, driver.ErrInvalidArgument)) {
			t.Errorf("CheckLease(%v) = %v, want ok %v (else ErrInvalidArgument)", tc.lease, err, tc.ok)
		}
		old := driver.CheckLeaseTTL(tc.lease)
		if (old == nil) != (err == nil) {
			t.Errorf("CheckLeaseTTL(%v) = %v, CheckLease = %v", tc.lease, old, err)
		}
	}
	if driver.MaxLeaseTTL != driver.MaxLease {
		t.Errorf("MaxLeaseTTL %v, MaxLease %v", driver.MaxLeaseTTL, driver.MaxLease)
	}
}
