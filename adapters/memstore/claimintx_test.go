package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/difftest"
)

// The memory store runs no caller transactions: ClaimInTx is refused with
// errors.ErrUnsupported and claims nothing.
func TestClaimInTxUnsupported(t *testing.T) {
	ctx := context.Background()
	s, err := memstore.New[difftest.Row]()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &difftest.Row{ID: 1}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ClaimInTx(ctx, dao.ClaimRequest{Where: dao.Criteria{}, Set: dao.Set{"n": int64(7)}, Limit: 1})
	if !errors.Is(err, errors.ErrUnsupported) || rows != nil {
		t.Fatalf("ClaimInTx = %v, %v; want errors.ErrUnsupported", rows, err)
	}
	if n, err := s.Count(ctx, dao.Eq("n", int64(7))); err != nil || n != 0 {
		t.Fatalf("rows claimed: %d, %v; want none", n, err)
	}
}
