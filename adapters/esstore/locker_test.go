package esstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
)

// TestTryLockUnsupported checks that the Elasticsearch store, which has no
// try-lock, says so with errors.ErrUnsupported and sends nothing.
func TestTryLockUnsupported(t *testing.T) {
	fake := newFake(t)
	s := newStore[conformance.Job](t, fake.URL())
	fake.ResetRequests()
	ran, err := coord.WithLock(context.Background(), s, "k", func(context.Context, any) error {
		t.Error("fn ran")
		return nil
	})
	if ran || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WithLock = %v, %v; want false and errors.ErrUnsupported", ran, err)
	}
	if reqs := fake.Requests(); len(reqs) != 0 {
		t.Errorf("requests sent: %v", reqs)
	}
}
