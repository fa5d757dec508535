package difftest

import (
	"context"
	"slices"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// Precedence checks that s evaluates criteria with compound operands, an
// Or wrapped in a single-operand Or among them, as the tree says: in Find,
// Count, Update, Claim (whose guarded write re-asserts the criteria) and
// Delete. s must be empty; the test leaves rows in it.
func Precedence(t *testing.T, s dao.Store[Row]) {
	t.Helper()
	ctx := context.Background()
	rows := []*Row{
		{ID: 1, A: ptr(int64(1)), S: ptr("a")}, // the only row matching where
		{ID: 2, A: ptr(int64(2)), S: ptr("a")},
		{ID: 3, A: ptr(int64(2)), S: ptr("b")}, // matches a = 1 AND s = a OR s = b
		{ID: 4, A: ptr(int64(1)), S: ptr("c")},
	}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	wrappedOr := dao.Or(dao.Or(dao.Eq("s", "a"), dao.Eq("s", "b")))
	where := dao.And(dao.Eq("a", 1), wrappedOr)
	idsOf := func(rows []Row) []int64 { return rowIDs(rows) }
	with := func(w dao.Criteria) []int64 {
		t.Helper()
		got, err := s.Find(ctx, dao.Query{Where: w, OrderBy: []dao.Order{dao.Asc("id")}})
		if err != nil {
			t.Fatal(err)
		}
		return idsOf(got)
	}
	if got := with(where); !slices.Equal(got, []int64{1}) {
		t.Errorf("Find(%v) = %v, want [1]", where, got)
	}
	if n, err := s.Count(ctx, where); err != nil || n != 1 {
		t.Errorf("Count(%v) = %d, %v; want 1", where, n, err)
	}
	if n, err := s.Update(ctx, where, dao.Set{"n": int64(5)}); err != nil || n != 1 {
		t.Errorf("Update(%v) = %d, %v; want 1", where, n, err)
	}
	if got := with(dao.Eq("n", 5)); !slices.Equal(got, []int64{1}) {
		t.Errorf("rows updated: %v, want [1]", got)
	}
	claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: wrappedOr, Set: dao.Set{"t": "c"}, Limit: 1, OrderBy: []dao.Order{dao.Asc("id")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(claimed); !slices.Equal(got, []int64{1}) {
		t.Errorf("Claim(%v) returned %v, want [1]", wrappedOr, got)
	}
	if got := with(dao.Eq("t", "c")); !slices.Equal(got, []int64{1}) {
		t.Errorf("Claim(%v): rows written %v, returned [1]", wrappedOr, got)
	}
	claimed, err = s.Claim(ctx, dao.ClaimRequest{Where: where, Set: dao.Set{"t": "b"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(claimed); !slices.Equal(got, []int64{1}) {
		t.Errorf("Claim(%v) returned %v, want [1]", where, got)
	}
	if got := with(dao.Eq("t", "b")); !slices.Equal(got, []int64{1}) {
		t.Errorf("Claim(%v): rows written %v, returned [1]", where, got)
	}
	if n, err := s.Delete(ctx, where, 10); err != nil || n != 1 {
		t.Errorf("Delete(%v) = %d, %v; want 1", where, n, err)
	}
	if got := with(dao.Criteria{}); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Errorf("rows left after Delete: %v, want [2 3 4]", got)
	}
}
