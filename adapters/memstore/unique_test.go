package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
)

type keyed struct {
	ID     int64
	Key    string `gorm:"uniqueIndex:idx_key_scope"`
	Scope  string `gorm:"uniqueIndex:idx_key_scope"`
	Status string
}

func TestUniqueKeysEnforced(t *testing.T) {
	ctx := context.Background()
	s, err := memstore.New[keyed]()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &keyed{Key: "a", Scope: "x"}, &keyed{Key: "a", Scope: "y"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &keyed{Key: "b", Scope: "x"}, &keyed{Key: "a", Scope: "x"}); !errors.Is(err, dao.ErrDuplicate) {
		t.Fatalf("duplicate (key, scope) on Create: %v, want ErrDuplicate", err)
	}
	if n, _ := s.Count(ctx, dao.Criteria{}); n != 2 {
		t.Fatalf("a failed Create stored rows: %d rows", n)
	}
	if _, err := s.Update(ctx, dao.Eq("scope", "y"), dao.Set{"scope": "x"}); !errors.Is(err, dao.ErrDuplicate) {
		t.Fatalf("Update into a taken (key, scope): %v, want ErrDuplicate", err)
	}
	if n, err := s.Update(ctx, dao.Criteria{}, dao.Set{"status": "done"}); err != nil || n != 2 {
		t.Fatalf("Update of a column outside every unique key = %d, %v", n, err)
	}
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "done"), Set: dao.Set{"scope": "x"}, Limit: 2})
	if !errors.Is(err, dao.ErrDuplicate) || len(got) != 1 || got[0].Scope != "x" {
		t.Fatalf("claim whose Set collides on the second row: %+v, %v; want the first row and ErrDuplicate", got, err)
	}
}
