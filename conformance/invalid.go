package conformance

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// testInvalid checks that malformed input fails with ErrInvalidArgument
// and leaves the table as it was.
func testInvalid(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.NewStore(t)
	seed(t, s, 5, func(i int, j *Job) { j.Priority = i })
	before := snapshot(t, s)

	badWhere := []struct {
		name string
		c    dao.Criteria
	}{
		{"unknown field", dao.Eq("no_such_column", 1)},
		{"Go field name instead of column", dao.Eq("Status", "ready")},
		{"string for int column", dao.Eq("priority", "1")},
		{"int for string column", dao.Eq("status", 1)},
		{"float for int column", dao.Gt("priority", 1.5)},
		{"string for time column", dao.Lt("locked_until", "2024-01-01")},
		{"struct value", dao.Eq("priority", struct{ X int }{1})},
		{"nil Eq value", dao.Eq("status", nil)},
		{"nil Ne value", dao.Ne("locked_by", nil)},
		{"nil pointer value", dao.Eq("note", (*string)(nil))},
		{"empty In", dao.In("status")},
		{"In with a wrong type", dao.In("priority", 1, "2")},
		{"In with nil", dao.In("status", "ready", nil)},
		{"Or without operands", dao.Or()},
		{"unknown field nested", dao.And(dao.Eq("status", "ready"), dao.Or(dao.IsNull("nope"), dao.Eq("priority", 1)))},
		{"field comparison with unknown field", dao.LtField("attempts", "nope")},
		{"field comparison of incomparable columns", dao.LtField("status", "priority")},
		{"Increment as a criteria value", dao.Eq("attempts", dao.Incr(1))},
	}
	for _, c := range badWhere {
		if _, err := s.Find(ctx, dao.Query{Where: c.c}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Find(%s: %v) error = %v, want ErrInvalidArgument", c.name, c.c, err)
		}
		if _, err := s.Count(ctx, c.c); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Count(%s: %v) error = %v, want ErrInvalidArgument", c.name, c.c, err)
		}
		if _, err := s.Update(ctx, c.c, dao.Set{"status": "changed"}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Update(%s: %v) error = %v, want ErrInvalidArgument", c.name, c.c, err)
		}
		if _, err := s.Delete(ctx, c.c, 10); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Delete(%s: %v) error = %v, want ErrInvalidArgument", c.name, c.c, err)
		}
		got, err := s.Claim(ctx, dao.ClaimRequest{Where: c.c, Set: dao.Set{"status": statusClaimed}, Limit: 10})
		if !errors.Is(err, dao.ErrInvalidArgument) || len(got) != 0 {
			t.Errorf("Claim(%s: %v) = %d rows, error %v; want no rows and ErrInvalidArgument", c.name, c.c, len(got), err)
		}
	}

	badSet := []struct {
		name string
		set  dao.Set
	}{
		{"empty Set", dao.Set{}},
		{"nil Set", nil},
		{"Set on the primary key", dao.Set{"id": int64(99)}},
		{"Set on the primary key with other fields", dao.Set{"status": "x", "id": int64(99)}},
		{"unknown field", dao.Set{"nope": 1}},
		{"wrong value type", dao.Set{"priority": "high"}},
		{"time column given a string", dao.Set{"locked_until": "tomorrow"}},
		{"NULL on a NOT NULL column", dao.Set{"status": nil}},
		{"Increment on a string column", dao.Set{"status": dao.Incr(1)}},
		{"Increment on a time column", dao.Set{"created_at": dao.Incr(1)}},
	}
	for _, c := range badSet {
		if _, err := s.Update(ctx, dao.Criteria{}, c.set); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Update(all, %s: %v) error = %v, want ErrInvalidArgument", c.name, c.set, err)
		}
		got, err := s.Claim(ctx, dao.ClaimRequest{Set: c.set, Limit: 10})
		if !errors.Is(err, dao.ErrInvalidArgument) || len(got) != 0 {
			t.Errorf("Claim(%s: %v) = %d rows, error %v; want no rows and ErrInvalidArgument", c.name, c.set, len(got), err)
		}
	}

	for _, limit := range []int{0, -1} {
		if n, err := s.Delete(ctx, dao.Criteria{}, limit); !errors.Is(err, dao.ErrInvalidArgument) || n != 0 {
			t.Errorf("Delete(all, limit %d) = %d, %v; want 0 and ErrInvalidArgument", limit, n, err)
		}
	}
	if _, err := s.Find(ctx, dao.Query{Limit: -1}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Find(limit -1) error = %v, want ErrInvalidArgument", err)
	}
	for _, o := range [][]dao.Order{{dao.Asc("nope")}, {dao.Desc("priority"), dao.Asc("")}} {
		if _, err := s.Find(ctx, dao.Query{OrderBy: o}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Find(order %v) error = %v, want ErrInvalidArgument", o, err)
		}
		got, err := s.Claim(ctx, dao.ClaimRequest{Set: dao.Set{"status": statusClaimed}, OrderBy: o, Limit: 10})
		if !errors.Is(err, dao.ErrInvalidArgument) || len(got) != 0 {
			t.Errorf("Claim(order %v) = %d rows, %v; want no rows and ErrInvalidArgument", o, len(got), err)
		}
	}
	for _, id := range []any{"1", 1.5, nil, struct{}{}} {
		if _, err := s.Get(ctx, id); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Get(%#v) error = %v, want ErrInvalidArgument", id, err)
		}
	}
	if err := s.Create(ctx, &Job{Status: statusReady, Payload: "ok", CreatedAt: baseTime()}, nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Create(row, nil) error = %v, want ErrInvalidArgument", err)
	}
	assertUnchanged(t, s, before, "after invalid calls")
	testBadValues(t, s)
	testValueBounds(t, h)
}

// badValue is a value no backend stores faithfully, so every store refuses
// it: col is the column it is given for, set writes it into a Job.
type badValue struct {
	name string
	col  string
	v    any
	set  func(j *Job)
}

// badValues returns values outside the portable rule of dao.Model. Times
// outside 0001-01-01 00:00:00 to 9999-12-31 23:59:59 UTC, the range every
// backend stores (MySQL DATETIME is the narrowest), are refused as
// instants: the zone a time is given in does not matter.
func badValues() []badValue {
	west := time.FixedZone("UTC-2", -2*3600)
	str := func(name, v string) badValue {
		return badValue{name, "status", v, func(j *Job) { j.Status = v }}
	}
	note := func(name, v string) badValue {
		return badValue{name, "note", ptr(v), func(j *Job) { j.Note = ptr(v) }}
	}
	tm := func(name string, v time.Time) badValue {
		return badValue{name, "locked_until", v, func(j *Job) { j.LockedUntil = ptr(v) }}
	}
	created := func(name string, v time.Time) badValue {
		return badValue{name, "created_at", v, func(j *Job) { j.CreatedAt = v }}
	}
	flt := func(name string, v float64) badValue {
		return badValue{name, "weight", v, func(j *Job) { j.Weight = v }}
	}
	return []badValue{
		str("string holding a NUL byte", "rea\x00dy"),
		str("string that is not UTF-8", "ready\xff"),
		str("string with a truncated UTF-8 sequence", "caf\xc3"),
		str("string with a UTF-16 surrogate encoded in UTF-8", "\xed\xa0\x80"),
		note("string pointer holding a NUL byte", "\x00"),
		tm("time in year 0", time.Date(0, 12, 31, 23, 0, 0, 0, time.UTC)),
		tm("time in year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
		tm("time in year 9999 whose UTC instant is in 10000", time.Date(9999, 12, 31, 23, 0, 0, 0, west)),
		tm("time after 9999-12-31 23:59:59 UTC by half a second", time.Date(9999, 12, 31, 23, 59, 59, 5e8, time.UTC)),
		tm("time of year 1 whose UTC instant is in year 0", time.Date(1, 1, 1, 0, 30, 0, 0, time.FixedZone("UTC+1", 3600))),
		created("NOT NULL time far in the past", time.Date(-200, 1, 1, 0, 0, 0, 0, time.UTC)),
		flt("NaN", math.NaN()),
		flt("+Inf", math.Inf(1)),
		flt("-Inf", math.Inf(-1)),
	}
}

// testBadValues gives each bad value to Create, to criteria (Eq and In)
// in every call that takes criteria, and to the Set of Update and Claim:
// each is ErrInvalidArgument and the table is unchanged.
func testBadValues(t *testing.T, s dao.Store[Job]) {
	ctx := context.Background()
	before := snapshot(t, s)
	for _, b := range badValues() {
		ok := &Job{Status: statusReady, Payload: "good row of a batch with a bad one", MaxAttempts: 3, CreatedAt: baseTime()}
		bad := &Job{Status: statusReady, Payload: "bad", MaxAttempts: 3, CreatedAt: baseTime()}
		b.set(bad)
		if err := s.Create(ctx, bad); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Create(row with %s in %s) error = %v, want ErrInvalidArgument", b.name, b.col, err)
		}
		if err := s.Create(ctx, ok, bad); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Create(good row, row with %s in %s) error = %v, want ErrInvalidArgument", b.name, b.col, err)
		}
		for _, c := range []dao.Criteria{
			dao.Eq(b.col, b.v),
			dao.Lt(b.col, b.v),
			dao.In(b.col, b.v),
			dao.Or(dao.IsNull("locked_by"), dao.And(dao.NotNull(b.col), dao.Ne(b.col, b.v))),
		} {
			if _, err := s.Find(ctx, dao.Query{Where: c}); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("Find(%s: %v) error = %v, want ErrInvalidArgument", b.name, c, err)
			}
			if _, err := s.Count(ctx, c); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("Count(%s: %v) error = %v, want ErrInvalidArgument", b.name, c, err)
			}
			if _, err := s.Update(ctx, c, dao.Set{"payload": "changed"}); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("Update(%s: %v) error = %v, want ErrInvalidArgument", b.name, c, err)
			}
			if _, err := s.Delete(ctx, c, 10); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("Delete(%s: %v) error = %v, want ErrInvalidArgument", b.name, c, err)
			}
			got, err := s.Claim(ctx, dao.ClaimRequest{Where: c, Set: dao.Set{"status": statusClaimed}, Limit: 10})
			if !errors.Is(err, dao.ErrInvalidArgument) || len(got) != 0 {
				t.Errorf("Claim(%s: %v) = %d rows, error %v; want no rows and ErrInvalidArgument", b.name, c, len(got), err)
			}
		}
		set := dao.Set{b.col: b.v, "payload": "changed"}
		if _, err := s.Update(ctx, dao.Criteria{}, set); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Update(all, Set %s in %s) error = %v, want ErrInvalidArgument", b.name, b.col, err)
		}
		got, err := s.Claim(ctx, dao.ClaimRequest{Set: set, Limit: 10})
		if !errors.Is(err, dao.ErrInvalidArgument) || len(got) != 0 {
			t.Errorf("Claim(Set %s in %s) = %d rows, error %v; want no rows and ErrInvalidArgument", b.name, b.col, len(got), err)
		}
	}
	assertUnchanged(t, s, before, "after bad values")
}

// testValueBounds checks that the values at the edges of what every
// backend stores are accepted and read back: the first and the last
// second of the time range, non-ASCII text, the largest finite floats.
func testValueBounds(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.NewStore(t)
	first, last := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	rows := []*Job{
		{Status: "é✓😀", Payload: "x", LockedUntil: ptr(first), CreatedAt: last, Weight: math.MaxFloat64, Note: ptr("ß")},
		{Status: statusReady, Payload: "y", LockedUntil: ptr(last), CreatedAt: first, Weight: -math.MaxFloat64},
		{Status: statusReady, Payload: "z", LockedUntil: ptr(last.In(time.FixedZone("UTC-2", -2*3600))), CreatedAt: baseTime(), Weight: 1e-300},
	}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatalf("Create(rows with values at the edges of the portable ranges): %v", err)
	}
	for _, r := range rows {
		got, err := s.Get(ctx, r.ID)
		if err != nil {
			t.Fatalf("Get(%d): %v", r.ID, err)
		}
		if d := diffJob(*r, got); d != "" {
			t.Errorf("row %d reads back changed: %s", r.ID, d)
		}
	}
	cases := []struct {
		c    dao.Criteria
		want int64
	}{
		{dao.Eq("status", "é✓😀"), 1},
		{dao.Le("locked_until", first), 1},
		{dao.Ge("locked_until", last), 2},
		{dao.Eq("weight", math.MaxFloat64), 1},
		{dao.Lt("weight", 0.0), 1},
	}
	for _, c := range cases {
		if n, err := s.Count(ctx, c.c); err != nil || n != c.want {
			t.Errorf("Count(%v) = %d, %v; want %d", c.c, n, err, c.want)
		}
	}
	if n, err := s.Update(ctx, dao.Eq("payload", "x"), dao.Set{"locked_until": last, "weight": -1.5, "note": "∑"}); err != nil || n != 1 {
		t.Errorf("Update(Set values at the edges) = %d, %v; want 1", n, err)
	}
}
