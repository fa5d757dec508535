package conformance

import (
	"context"
	"errors"
	"testing"

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
}
