package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// criteriaFixture fills the rows of the criteria test: every nullable
// column has NULLs, empty strings and values; attempts and max_attempts are
// equal, smaller and larger; locked_by equals note on one row.
func criteriaFixture(base time.Time) func(i int, j *Job) {
	type row struct {
		status      string
		priority    int
		lockedBy    *string
		lockedUntil *time.Time
		attempts    int
		maxAttempts int
		note        *string
	}
	h := func(n int) *time.Time { return ptr(base.Add(time.Duration(n) * time.Hour)) }
	fix := []row{
		{"ready", 0, nil, nil, 0, 3, nil},
		{"ready", 2, nil, nil, 3, 3, ptr("")},
		{"running", 5, ptr("w1"), h(1), 1, 3, ptr("a")},
		{"done", -1, ptr("w2"), h(-1), 2, 2, nil},
		{"ready", 2, ptr("w1"), h(-2), 4, 3, ptr("b")},
		{"failed", 7, nil, h(3), 0, 0, ptr("a")},
		{"running", 1, ptr("w3"), nil, 1, 5, ptr("w3")},
		{"ready", 3, ptr(""), h(0), 2, 1, ptr("")},
		{"done", 0, ptr("w2"), h(2), 5, 5, ptr("c")},
		{"failed", 9, nil, nil, 3, 4, nil},
		{"ready", -4, ptr("w1"), h(-3), 0, 1, ptr("a")},
		{"running", 2, ptr("w2"), h(5), 2, 3, nil},
	}
	return func(i int, j *Job) {
		f := fix[i%len(fix)]
		j.Status, j.Priority, j.LockedBy, j.LockedUntil = f.status, f.priority, f.lockedBy, f.lockedUntil
		j.Attempts, j.MaxAttempts, j.Note = f.attempts, f.maxAttempts, f.note
	}
}

const criteriaRows = 12

// criteriaCase is one criteria expression and the predicate it must equal
// under SQL's three-valued logic (a comparison with NULL is not true).
type criteriaCase struct {
	name string
	c    dao.Criteria
	pred func(j *Job) bool
}

func criteriaCases(base time.Time) []criteriaCase {
	s := func(p *string) (string, bool) {
		if p == nil {
			return "", false
		}
		return *p, true
	}
	strIs := func(p *string, f func(string) bool) bool { v, ok := s(p); return ok && f(v) }
	timeIs := func(p *time.Time, f func(time.Time) bool) bool { return p != nil && f(*p) }
	other := time.FixedZone("UTC+5:30", 5*3600+1800)
	return []criteriaCase{
		{"all (zero Criteria)", dao.Criteria{}, func(j *Job) bool { return true }},
		{"And() matches all", dao.And(), func(j *Job) bool { return true }},
		{"Eq string", dao.Eq("status", "ready"), func(j *Job) bool { return j.Status == "ready" }},
		{"Ne string", dao.Ne("status", "ready"), func(j *Job) bool { return j.Status != "ready" }},
		{"Lt string", dao.Lt("status", "failed"), func(j *Job) bool { return j.Status < "failed" }},
		{"Ge string", dao.Ge("status", "ready"), func(j *Job) bool { return j.Status >= "ready" }},
		{"Eq int", dao.Eq("priority", 2), func(j *Job) bool { return j.Priority == 2 }},
		{"Eq int64", dao.Eq("priority", int64(2)), func(j *Job) bool { return j.Priority == 2 }},
		{"Eq int8 negative", dao.Eq("priority", int8(-4)), func(j *Job) bool { return j.Priority == -4 }},
		{"Eq uint", dao.Eq("priority", uint(3)), func(j *Job) bool { return j.Priority == 3 }},
		{"Eq pointer to value", dao.Eq("priority", ptr(5)), func(j *Job) bool { return j.Priority == 5 }},
		{"Ne int", dao.Ne("priority", 2), func(j *Job) bool { return j.Priority != 2 }},
		{"Lt int", dao.Lt("priority", 2), func(j *Job) bool { return j.Priority < 2 }},
		{"Le int", dao.Le("priority", 2), func(j *Job) bool { return j.Priority <= 2 }},
		{"Gt int", dao.Gt("priority", 2), func(j *Job) bool { return j.Priority > 2 }},
		{"Ge int", dao.Ge("priority", 2), func(j *Job) bool { return j.Priority >= 2 }},
		{"Gt negative", dao.Gt("priority", -2), func(j *Job) bool { return j.Priority > -2 }},
		{"Eq nullable string (NULL never matches)", dao.Eq("locked_by", "w1"), func(j *Job) bool { return strIs(j.LockedBy, func(v string) bool { return v == "w1" }) }},
		{"Ne nullable string does not match NULL", dao.Ne("locked_by", "w1"), func(j *Job) bool { return strIs(j.LockedBy, func(v string) bool { return v != "w1" }) }},
		{"Eq empty string is not NULL", dao.Eq("note", ""), func(j *Job) bool { return strIs(j.Note, func(v string) bool { return v == "" }) }},
		{"Ne empty string does not match NULL", dao.Ne("note", ""), func(j *Job) bool { return strIs(j.Note, func(v string) bool { return v != "" }) }},
		{"Eq string pointer", dao.Eq("note", ptr("a")), func(j *Job) bool { return strIs(j.Note, func(v string) bool { return v == "a" }) }},
		{"IsNull", dao.IsNull("note"), func(j *Job) bool { return j.Note == nil }},
		{"NotNull", dao.NotNull("note"), func(j *Job) bool { return j.Note != nil }},
		{"IsNull time", dao.IsNull("locked_until"), func(j *Job) bool { return j.LockedUntil == nil }},
		{"NotNull time", dao.NotNull("locked_until"), func(j *Job) bool { return j.LockedUntil != nil }},
		{"Lt time (NULL never matches)", dao.Lt("locked_until", base), func(j *Job) bool { return timeIs(j.LockedUntil, func(v time.Time) bool { return v.Before(base) }) }},
		{"Le time", dao.Le("locked_until", base), func(j *Job) bool { return timeIs(j.LockedUntil, func(v time.Time) bool { return !v.After(base) }) }},
		{"Gt time", dao.Gt("locked_until", base.Add(time.Hour)), func(j *Job) bool {
			return timeIs(j.LockedUntil, func(v time.Time) bool { return v.After(base.Add(time.Hour)) })
		}},
		{"Eq time", dao.Eq("locked_until", base.Add(2*time.Hour)), func(j *Job) bool {
			return timeIs(j.LockedUntil, func(v time.Time) bool { return v.Equal(base.Add(2 * time.Hour)) })
		}},
		{"Ne time", dao.Ne("locked_until", base), func(j *Job) bool { return timeIs(j.LockedUntil, func(v time.Time) bool { return !v.Equal(base) }) }},
		{"Lt time in another zone", dao.Lt("locked_until", base.In(other)), func(j *Job) bool { return timeIs(j.LockedUntil, func(v time.Time) bool { return v.Before(base) }) }},
		{"In strings", dao.In("status", "ready", "failed"), func(j *Job) bool { return j.Status == "ready" || j.Status == "failed" }},
		{"In one value", dao.In("status", "done"), func(j *Job) bool { return j.Status == "done" }},
		{"In ints with a miss", dao.In("priority", 1, 3, 99), func(j *Job) bool { return j.Priority == 1 || j.Priority == 3 }},
		{"In mixed integer types", dao.In("priority", int64(-1), int32(7), uint8(9)), func(j *Job) bool { return j.Priority == -1 || j.Priority == 7 || j.Priority == 9 }},
		{"In nullable (NULL never matches)", dao.In("note", "a", ""), func(j *Job) bool { return strIs(j.Note, func(v string) bool { return v == "a" || v == "" }) }},
		{"EqField", dao.EqField("attempts", "max_attempts"), func(j *Job) bool { return j.Attempts == j.MaxAttempts }},
		{"NeField", dao.NeField("attempts", "max_attempts"), func(j *Job) bool { return j.Attempts != j.MaxAttempts }},
		{"LtField", dao.LtField("attempts", "max_attempts"), func(j *Job) bool { return j.Attempts < j.MaxAttempts }},
		{"LeField", dao.LeField("attempts", "max_attempts"), func(j *Job) bool { return j.Attempts <= j.MaxAttempts }},
		{"GtField", dao.GtField("attempts", "max_attempts"), func(j *Job) bool { return j.Attempts > j.MaxAttempts }},
		{"GeField", dao.GeField("attempts", "max_attempts"), func(j *Job) bool { return j.Attempts >= j.MaxAttempts }},
		{"EqField nullable (NULL never matches)", dao.EqField("locked_by", "note"), func(j *Job) bool {
			a, okA := s(j.LockedBy)
			b, okB := s(j.Note)
			return okA && okB && a == b
		}},
		{"NeField nullable (NULL never matches)", dao.NeField("locked_by", "note"), func(j *Job) bool {
			a, okA := s(j.LockedBy)
			b, okB := s(j.Note)
			return okA && okB && a != b
		}},
		{"GtField time", dao.GtField("locked_until", "created_at"), func(j *Job) bool {
			return timeIs(j.LockedUntil, func(v time.Time) bool { return v.After(j.CreatedAt) })
		}},
		{"And", dao.And(dao.Eq("status", "ready"), dao.Gt("priority", 0)), func(j *Job) bool { return j.Status == "ready" && j.Priority > 0 }},
		{"Or", dao.Or(dao.Eq("status", "done"), dao.IsNull("locked_by")), func(j *Job) bool { return j.Status == "done" || j.LockedBy == nil }},
		{"Or of one", dao.Or(dao.Eq("status", "failed")), func(j *Job) bool { return j.Status == "failed" }},
		{"Or with match-all operand", dao.Or(dao.Eq("status", "failed"), dao.Criteria{}), func(j *Job) bool { return true }},
		{"And of Ors", dao.And(
			dao.Or(dao.Eq("status", "ready"), dao.Eq("status", "running")),
			dao.Or(dao.IsNull("note"), dao.Ge("priority", 2)),
		), func(j *Job) bool {
			return (j.Status == "ready" || j.Status == "running") && (j.Note == nil || j.Priority >= 2)
		}},
		{"Or of Ands", dao.Or(
			dao.And(dao.Eq("status", "ready"), dao.LtField("attempts", "max_attempts")),
			dao.And(dao.Eq("status", "running"), dao.Lt("locked_until", base.Add(3*time.Hour))),
		), func(j *Job) bool {
			return (j.Status == "ready" && j.Attempts < j.MaxAttempts) ||
				(j.Status == "running" && timeIs(j.LockedUntil, func(v time.Time) bool { return v.Before(base.Add(3 * time.Hour)) }))
		}},
		{"three levels (the outbox eligibility shape)", dao.And(
			dao.Ne("status", "done"),
			dao.Or(
				dao.Eq("status", "ready"),
				dao.And(dao.Eq("status", "failed"), dao.LtField("attempts", "max_attempts")),
				dao.And(dao.Eq("status", "running"), dao.Or(dao.IsNull("locked_until"), dao.Lt("locked_until", base.Add(2*time.Hour)))),
			),
		), func(j *Job) bool {
			return j.Status != "done" && (j.Status == "ready" ||
				(j.Status == "failed" && j.Attempts < j.MaxAttempts) ||
				(j.Status == "running" && (j.LockedUntil == nil || j.LockedUntil.Before(base.Add(2*time.Hour)))))
		}},
		{"And with a NULL comparison inside Or", dao.And(dao.Or(dao.Ne("note", "a"), dao.Eq("priority", 0)), dao.NotNull("locked_by")), func(j *Job) bool {
			return (strIs(j.Note, func(v string) bool { return v != "a" }) || j.Priority == 0) && j.LockedBy != nil
		}},
	}
}

// testCriteria checks that every criteria case selects the same rows in
// Find, Count, Update and Claim, which backends render separately, and
// that string comparisons follow the declared collation.
func testCriteria(t *testing.T, h Harness) {
	t.Run("Collation", func(t *testing.T) { testCollationCriteria(t, h) })
	ctx := context.Background()
	s := h.NewStore(t)
	base := baseTime()
	rows := seed(t, s, criteriaRows, criteriaFixture(base))
	for i, c := range criteriaCases(base) {
		want := filterIDs(rows, c.pred)
		got, err := s.Find(ctx, dao.Query{Where: c.c})
		if err != nil {
			t.Errorf("%s: Find(%v): %v", c.name, c.c, err)
			continue
		}
		if g := sortedIDs(got); !slices.Equal(g, want) {
			t.Errorf("%s: Find(%v) = ids %v, want %v", c.name, c.c, g, want)
		}
		if n, err := s.Count(ctx, c.c); err != nil || n != int64(len(want)) {
			t.Errorf("%s: Count(%v) = %d, %v; want %d", c.name, c.c, n, err, len(want))
		}
		// payload is in no criteria case, so marking rows through it
		// leaves every case's selection intact.
		mark := fmt.Sprintf("update-%d", i)
		if n, err := s.Update(ctx, c.c, dao.Set{"payload": mark}); err != nil || n != int64(len(want)) {
			t.Errorf("%s: Update(%v) = %d, %v; want %d", c.name, c.c, n, err, len(want))
		}
		if got, err := s.Find(ctx, dao.Query{Where: dao.Eq("payload", mark)}); err != nil || !slices.Equal(sortedIDs(got), want) {
			t.Errorf("%s: Update(%v) changed ids %v (%v); want %v", c.name, c.c, sortedIDs(got), err, want)
		}
		mark = fmt.Sprintf("claim-%d", i)
		claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: c.c, Set: dao.Set{"payload": mark}, Limit: 1000})
		if err != nil {
			t.Errorf("%s: Claim(%v): %v", c.name, c.c, err)
			continue
		}
		if g := sortedIDs(claimed); !slices.Equal(g, want) {
			t.Errorf("%s: Claim(%v) returned ids %v, want %v", c.name, c.c, g, want)
		}
		for _, r := range claimed {
			if r.Payload != mark {
				t.Errorf("%s: Claim returned row %d with payload %q, want the claim's %q", c.name, r.ID, r.Payload, mark)
			}
		}
		if got, err := s.Find(ctx, dao.Query{Where: dao.Eq("payload", mark)}); err != nil || !slices.Equal(sortedIDs(got), want) {
			t.Errorf("%s: Claim(%v) changed ids %v (%v); want %v", c.name, c.c, sortedIDs(got), err, want)
		}
	}
}

// testTimeZones stores times given in a non-UTC zone and checks that they
// read back as the same instants and compare as instants.
func testTimeZones(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.NewStore(t)
	zone := time.FixedZone("UTC-7", -7*3600)
	base := baseTime()
	rows := seed(t, s, 4, func(i int, j *Job) {
		j.CreatedAt = base.Add(time.Duration(i) * time.Hour).In(zone)
		j.LockedUntil = ptr(base.Add(time.Duration(i) * time.Hour))
	})
	for _, r := range rows {
		got, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !sameTime(got.CreatedAt, r.CreatedAt) {
			t.Errorf("row %d: created_at written as %v reads back as %v", r.ID, r.CreatedAt, got.CreatedAt)
		}
	}
	cases := []struct {
		name string
		c    dao.Criteria
		want int
	}{
		{"Lt UTC value on a column written in UTC-7", dao.Lt("created_at", base.Add(2*time.Hour)), 2},
		{"Ge value in UTC-7 on a column written in UTC", dao.Ge("locked_until", base.Add(2*time.Hour).In(zone)), 2},
		{"EqField across zones", dao.EqField("created_at", "locked_until"), 4},
		{"Eq value in another zone", dao.Eq("created_at", base.Add(time.Hour).In(time.FixedZone("UTC+9", 9*3600))), 1},
	}
	for _, c := range cases {
		if n, err := s.Count(ctx, c.c); err != nil || n != int64(c.want) {
			t.Errorf("%s: Count(%v) = %d, %v; want %d", c.name, c.c, n, err, c.want)
		}
	}
}
