package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
)

// TestStoreTryLock checks the store's own try-lock: keys are the store's,
// apart from another store's and a standalone locker's.
func TestStoreTryLock(t *testing.T) {
	ctx := context.Background()
	a, err := memstore.New[conformance.Job]()
	if err != nil {
		t.Fatal(err)
	}
	b, err := memstore.New[conformance.Job]()
	if err != nil {
		t.Fatal(err)
	}
	ran, err := a.TryLock(ctx, "k", func(ctx context.Context, tx any) error {
		if tx != nil {
			t.Errorf("tx = %v, want nil on memory", tx)
		}
		if again, err := a.TryLock(ctx, "k", func(context.Context, any) error { return nil }); again || err != nil {
			t.Errorf("same store, same key: %v, %v; want false, nil", again, err)
		}
		if other, err := b.TryLock(ctx, "k", func(context.Context, any) error { return nil }); !other || err != nil {
			t.Errorf("another store, same key: %v, %v; want true, nil", other, err)
		}
		return nil
	})
	if !ran || err != nil {
		t.Fatalf("TryLock = %v, %v", ran, err)
	}
	if _, err := a.TryLock(ctx, "", func(context.Context, any) error { return nil }); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("empty key: %v, want ErrInvalidArgument", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if ran, err := a.TryLock(cctx, "k", func(context.Context, any) error { return nil }); ran || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, %v; want false, context.Canceled", ran, err)
	}
}
