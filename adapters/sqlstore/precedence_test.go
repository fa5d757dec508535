package sqlstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/difftest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// precedenceVariants are the claim paths of each server: the default, and
// the other path where one exists.
var precedenceVariants = []struct {
	name string
	open func(testing.TB) *gorm.DB
	opts []sqlstore.Option
}{
	{"sqlite", testdb.SQLite, nil},
	{"postgres", testdb.Postgres, nil},
	{"postgres_portable", testdb.Postgres, []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}},
	{"mysql", testdb.MySQL, nil},
	{"mysql_fast_path", testdb.MySQL, []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyFastPath)}},
}

// precedenceRows seeds four rows: only the first has priority 1 and status
// ready or queued; the third is queued with another priority.
func precedenceRows(t *testing.T, s *store) []*job {
	t.Helper()
	rows := []*job{
		{Name: "in", Status: "ready", Priority: 1},
		{Name: "ready-p2", Status: "ready", Priority: 2},
		{Name: "queued-p2", Status: "queued", Priority: 2},
		{Name: "done-p1", Status: "done", Priority: 1},
	}
	if err := s.Create(context.Background(), rows...); err != nil {
		t.Fatal(err)
	}
	return rows
}

func statusIDs(t *testing.T, s *store, status string) []int64 {
	t.Helper()
	rows, err := s.Find(context.Background(), dao.Query{Where: dao.Eq("status", status)})
	if err != nil {
		t.Fatal(err)
	}
	return ids(rows)
}

// An Or wrapped in a single-operand Or under an And keeps its own
// precedence in every statement: reads, counts, updates, deletes and
// claims see only the rows the tree selects.
func TestWrappedOrPrecedence(t *testing.T) {
	ctx := context.Background()
	where := dao.And(dao.Eq("priority", 1), dao.Or(dao.Or(dao.Eq("status", "ready"), dao.Eq("status", "queued"))))
	for _, v := range precedenceVariants {
		t.Run(v.name, func(t *testing.T) {
			s := newStore(t, v.open(t), v.opts...)
			rows := precedenceRows(t, s)
			in := []int64{rows[0].ID}

			found, err := s.Find(ctx, dao.Query{Where: where})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(found); !slices.Equal(got, in) {
				t.Errorf("Find returned %v, want %v", got, in)
			}
			if n, err := s.Count(ctx, where); err != nil || n != 1 {
				t.Errorf("Count = %d, %v; want 1", n, err)
			}
			claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: where, Set: dao.Set{"status": "claimed"}, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(claimed); !slices.Equal(got, in) {
				t.Errorf("Claim returned %v, want %v", got, in)
			}
			if got := statusIDs(t, s, "claimed"); !slices.Equal(got, in) {
				t.Errorf("rows claimed in the table: %v, want %v", got, in)
			}
			// The claimed row no longer matches; the rest still do not.
			if n, err := s.Update(ctx, where, dao.Set{"owner": "x"}); err != nil || n != 0 {
				t.Errorf("Update = %d, %v; want 0", n, err)
			}
			if n, err := s.Delete(ctx, where, 10); err != nil || n != 0 {
				t.Errorf("Delete = %d, %v; want 0", n, err)
			}
			if n, err := s.Count(ctx, dao.Criteria{}); err != nil || n != 4 {
				t.Errorf("rows left: %d, %v; want 4", n, err)
			}
		})
	}
}

// A claim whose criteria are an Or (here wrapped in another Or) writes
// exactly the rows it returns: the guarded update re-asserts the whole Or
// next to the primary key, not just its first operand.
func TestClaimOrCriteriaClaimsOnlyReturnedRows(t *testing.T) {
	ctx := context.Background()
	or := dao.Or(dao.Eq("status", "ready"), dao.Eq("status", "queued"))
	for name, where := range map[string]dao.Criteria{"or": or, "wrapped_or": dao.Or(or)} {
		for _, v := range precedenceVariants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				s := newStore(t, v.open(t), v.opts...)
				rows := precedenceRows(t, s)
				claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: where, Set: dao.Set{"status": "claimed"}, Limit: 1, OrderBy: []dao.Order{dao.Asc("id")}})
				if err != nil {
					t.Fatal(err)
				}
				want := []int64{rows[0].ID}
				if got := ids(claimed); !slices.Equal(got, want) {
					t.Errorf("criteria %v: Claim returned %v, want %v", where, got, want)
				}
				if got := statusIDs(t, s, "claimed"); !slices.Equal(got, want) {
					t.Errorf("criteria %v: rows claimed in the table: %v, returned %v", where, got, want)
				}
			})
		}
	}
}

// The shared precedence check of every store, on each claim path.
func TestCriteriaPrecedenceShared(t *testing.T) {
	for _, v := range precedenceVariants {
		t.Run(v.name, func(t *testing.T) {
			difftest.Precedence(t, diffTarget(t, v.open(t), v.opts...).Store)
		})
	}
}
