package conformance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// eligible is the claim criteria of most claim tests.
var eligible = dao.Eq("status", statusReady)

// claimSet is the Set of a lease claim by worker until until.
func claimSet(worker string, until time.Time) dao.Set {
	return dao.Set{"status": statusClaimed, "locked_by": worker, "locked_until": until, "attempts": dao.Incr(1)}
}

// claimed returns row as a claim by worker until until leaves it.
func claimed(row Job, worker string, until time.Time) Job {
	row.Status, row.LockedBy, row.LockedUntil = statusClaimed, &worker, &until
	row.Attempts++
	return row
}

func testClaim(t *testing.T, h Harness) {
	t.Run("LimitHonoured", func(t *testing.T) { testClaimLimitHonoured(t, h) })
	t.Run("OrderHonoured", func(t *testing.T) { testClaimOrderHonoured(t, h) })
	t.Run("DefaultOrderIsPrimaryKey", func(t *testing.T) { testClaimDefaultOrderIsPrimaryKey(t, h) })
	t.Run("CriteriaHonoured", func(t *testing.T) { testClaimCriteriaHonoured(t, h) })
	t.Run("PostClaimStateReturnedAndDurable", func(t *testing.T) { testClaimPostClaimStateReturnedAndDurable(t, h) })
	t.Run("NonPositiveLimitClaimsNothing", func(t *testing.T) { testClaimNonPositiveLimitClaimsNothing(t, h) })
	t.Run("NoEligibleRows", func(t *testing.T) { testClaimNoEligibleRows(t, h) })
	t.Run("SetEqualToCurrentValues", func(t *testing.T) { testClaimSetEqualToCurrentValues(t, h) })
	t.Run("ClaimedRowsAreNotClaimedAgain", func(t *testing.T) { testClaimClaimedRowsAreNotClaimedAgain(t, h) })
}

func testClaimLimitHonoured(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	rows := seed(t, s, 10, nil)
	var all []int64
	for _, step := range []struct{ limit, want int }{{3, 3}, {1, 1}, {100, 6}, {5, 0}} {
		got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("w", until), Limit: step.limit})
		if err != nil {
			t.Fatalf("Claim(limit %d): %v", step.limit, err)
		}
		if len(got) != step.want {
			t.Errorf("Claim(limit %d) returned %d rows, want %d", step.limit, len(got), step.want)
		}
		all = append(all, ids(got)...)
	}
	slices.Sort(all)
	if want := sortedIDs(rows); !slices.Equal(all, want) {
		t.Errorf("the claims returned ids %v, want each of %v once", all, want)
	}
}

func testClaimOrderHonoured(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	base := baseTime()
	rows := seed(t, s, 10, func(i int, j *Job) {
		j.Priority = []int{1, 5, 3, 5, 0, 9, 3, 5, 1, 9}[i]
		j.CreatedAt = base.Add(time.Duration(10-i) * time.Minute)
	})
	want := slices.Clone(rows)
	sortJobs(want, func(a, b *Job) int {
		if c := cmpInt(b.Priority, a.Priority); c != 0 {
			return c
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	order := []dao.Order{dao.Desc("priority"), dao.Asc("created_at")}
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("w", until), Limit: 4, OrderBy: order})
	if err != nil {
		t.Fatal(err)
	}
	if w := ids(want[:4]); !slices.Equal(ids(got), w) {
		t.Errorf("Claim(priority desc, created_at asc, limit 4) = ids %v, want %v in that order", ids(got), w)
	}
	got, err = s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("w", until), Limit: 100, OrderBy: []dao.Order{dao.Asc("created_at")}})
	if err != nil {
		t.Fatal(err)
	}
	rest := slices.Clone(want[4:])
	sortJobs(rest, func(a, b *Job) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if w := ids(rest); !slices.Equal(ids(got), w) {
		t.Errorf("Claim(created_at asc) = ids %v, want %v in that order", ids(got), w)
	}
}

func testClaimDefaultOrderIsPrimaryKey(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	rows := seed(t, s, 6, func(i int, j *Job) { j.Priority = 6 - i })
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("w", until), Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if w := ids(rows[:4]); !slices.Equal(ids(got), w) {
		t.Errorf("Claim(no order, limit 4) = ids %v, want the smallest ids %v in order", ids(got), w)
	}
}

func testClaimCriteriaHonoured(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	base := baseTime()
	rows := seed(t, s, criteriaRows, criteriaFixture(base))
	before := snapshot(t, s)
	where := dao.And(
		dao.Ne("status", "done"),
		dao.Or(
			dao.And(dao.Eq("status", "ready"), dao.LtField("attempts", "max_attempts")),
			dao.And(dao.Eq("status", "running"), dao.Lt("locked_until", base.Add(2*time.Hour))),
		),
	)
	want := filterIDs(rows, func(j *Job) bool {
		return (j.Status == "ready" && j.Attempts < j.MaxAttempts) ||
			(j.Status == "running" && j.LockedUntil != nil && j.LockedUntil.Before(base.Add(2*time.Hour)))
	})
	if len(want) == 0 || len(want) == len(rows) {
		t.Fatal("fixture broken")
	}
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: where, Set: claimSet("w", until), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if g := sortedIDs(got); !slices.Equal(g, want) {
		t.Errorf("Claim(%v) = ids %v, want %v", where, g, want)
	}
	after := snapshot(t, s)
	for id, b := range before {
		w := b
		if slices.Contains(want, id) {
			w = claimed(b, "w", until)
		}
		if d := diffJob(w, after[id]); d != "" {
			t.Errorf("row %d after the claim: %s", id, d)
		}
	}
}

func testClaimPostClaimStateReturnedAndDurable(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	rows := seed(t, s, 5, func(i int, j *Job) {
		j.Attempts = i
		j.Note = ptr("before")
	})
	set := claimSet("worker-7", until)
	set["note"] = nil
	set["priority"] = dao.Incr(10)
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: set, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Claim(limit 3) returned %d rows", len(got))
	}
	for i, g := range got {
		want := claimed(rows[i], "worker-7", until)
		want.Note = nil
		want.Priority += 10
		if d := diffJob(want, g); d != "" {
			t.Errorf("claimed row %d as returned by Claim: %s", g.ID, d)
		}
		fresh, err := s.Get(ctx, g.ID)
		if err != nil {
			t.Fatalf("Get(%d): %v", g.ID, err)
		}
		if d := diffJob(fresh, g); d != "" {
			t.Errorf("row %d: Claim returned a state that differs from a fresh Get: %s", g.ID, d)
		}
	}
	mine, err := s.Find(ctx, dao.Query{Where: dao.Eq("locked_by", "worker-7")})
	if err != nil || !slices.Equal(sortedIDs(mine), sortedIDs(got)) {
		t.Errorf("Find(locked_by = worker-7) = %v, %v; want the claimed ids %v", sortedIDs(mine), err, sortedIDs(got))
	}
	if n, err := s.Count(ctx, eligible); err != nil || n != 2 {
		t.Errorf("Count(eligible) after claiming 3 of 5 = %d, %v; want 2", n, err)
	}
	for _, r := range rows[3:] {
		g, _ := s.Get(ctx, r.ID)
		if d := diffJob(r, g); d != "" {
			t.Errorf("unclaimed row %d changed: %s", r.ID, d)
		}
	}
}

func testClaimNonPositiveLimitClaimsNothing(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	seed(t, s, 3, nil)
	before := snapshot(t, s)
	for _, limit := range []int{0, -1, -1000} {
		got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("w", until), Limit: limit})
		if err != nil || len(got) != 0 {
			t.Errorf("Claim(limit %d) = %d rows, %v; want none and no error", limit, len(got), err)
		}
	}
	assertUnchanged(t, s, before, "Claim with limit <= 0")
}

func testClaimNoEligibleRows(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	seed(t, s, 3, func(i int, j *Job) { j.Status = "done" })
	before := snapshot(t, s)
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("w", until), Limit: 5})
	if err != nil || len(got) != 0 {
		t.Errorf("Claim with no eligible row = %d rows, %v; want none and no error", len(got), err)
	}
	assertUnchanged(t, s, before, "Claim with no eligible row")
}

// testClaimSetEqualToCurrentValues: a claim whose Set happens to leave a
// row's values as they were still claims the row: the guarded update
// matched it.
func testClaimSetEqualToCurrentValues(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.NewStore(t)
	rows := seed(t, s, 3, func(i int, j *Job) { j.Note = ptr("same") })
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: dao.Set{"note": "same"}, Limit: 10})
	if err != nil || !slices.Equal(sortedIDs(got), sortedIDs(rows)) {
		t.Errorf("Claim(set note = its current value) = ids %v, %v; want all of %v", sortedIDs(got), err, sortedIDs(rows))
	}
}

func testClaimClaimedRowsAreNotClaimedAgain(t *testing.T, h Harness) {
	ctx := context.Background()
	until := baseTime().Add(5 * time.Minute)
	s := h.NewStore(t)
	seed(t, s, 4, nil)
	first, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("a", until), Limit: 2})
	if err != nil || len(first) != 2 {
		t.Fatalf("first Claim = %d rows, %v", len(first), err)
	}
	second, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("b", until), Limit: 10})
	if err != nil || len(second) != 2 {
		t.Fatalf("second Claim = %d rows, %v; want the 2 rows left", len(second), err)
	}
	for _, id := range ids(second) {
		if slices.Contains(ids(first), id) {
			t.Errorf("row %d claimed by both claims", id)
		}
	}
}
