package sweep_test

import (
	"context"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/sweep"
)

type item struct {
	ID  int64 `gorm:"primaryKey"`
	Old bool
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	s, err := memstore.New[item]()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if err := s.Create(ctx, &item{Old: i < 5}); err != nil {
			t.Fatal(err)
		}
	}
	old := dao.Eq("old", true)
	if n, err := sweep.Delete(ctx, s, old, 2, 1); n != 2 || err != nil {
		t.Fatalf("one batch of 2: %d, %v", n, err)
	}
	if n, err := sweep.Delete(ctx, s, old, 2, 0); n != 3 || err != nil {
		t.Fatalf("until none is left: %d, %v", n, err)
	}
	if n, err := s.Count(ctx, dao.Criteria{}); n != 2 || err != nil {
		t.Fatalf("left: %d, %v", n, err)
	}
}
