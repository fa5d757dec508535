package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// testUpdateEach checks UpdateEach: each row gets its own values and the
// common ones, only when its fence and the criteria match; it reports
// exactly the keys it wrote; bad input is dao.ErrInvalidArgument and
// changes nothing.
func testUpdateEach(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.NewStore(t)
	u, ok := s.(dao.EachUpdater)
	if !ok {
		t.Fatalf("%T has no UpdateEach", s)
	}
	rows := seed(t, s, 8, func(i int, j *Job) { j.LockedBy = ptr("w1"); j.Status = "pending" })
	// Row 1's lease went to another worker, row 2 no longer matches the
	// criteria: both must be left as they are.
	if n, err := s.Update(ctx, dao.Eq("id", rows[1].ID), dao.Set{"locked_by": "w2"}); err != nil || n != 1 {
		t.Fatalf("Update(row 1 to w2) = %d, %v", n, err)
	}
	if n, err := s.Update(ctx, dao.Eq("id", rows[2].ID), dao.Set{"status": "paused"}); err != nil || n != 1 {
		t.Fatalf("Update(row 2 paused) = %d, %v", n, err)
	}
	before := snapshot(t, s)
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	var sets []dao.RowSet
	for i, r := range rows[:6] {
		note := any(fmt.Sprintf("n%d'\"%d", i, i))
		if i == 4 {
			note = nil // NULL in a per-row column
		}
		sets = append(sets, dao.RowSet{
			Match: []any{r.ID, "w1"},
			Set:   dao.Set{"attempts": i * 10, "note": note, "locked_until": at.Add(time.Duration(i) * time.Minute)},
		})
	}
	keys, err := u.UpdateEach(ctx, []string{"id", "locked_by"}, dao.Eq("status", "pending"), dao.Set{"locked_by": "", "status": "done"}, sets)
	if err != nil {
		t.Fatalf("UpdateEach: %v", err)
	}
	got := map[string]int{}
	for _, k := range keys {
		got[fmt.Sprint(k)]++
	}
	want := map[string]int{}
	for _, i := range []int{0, 3, 4, 5} {
		want[fmt.Sprint(rows[i].ID)] = 1
	}
	if !maps.Equal(got, want) {
		t.Errorf("UpdateEach returned keys %v, want %v (rows 1 and 2 fenced out)", got, want)
	}
	after := snapshot(t, s)
	for i, r := range rows {
		w := before[r.ID]
		if want[fmt.Sprint(r.ID)] == 1 {
			w.Status, w.LockedBy, w.Attempts = "done", ptr(""), i*10
			w.LockedUntil = ptr(at.Add(time.Duration(i) * time.Minute))
			w.Note = nil
			if i != 4 {
				w.Note = ptr(fmt.Sprintf("n%d'\"%d", i, i))
			}
		}
		if d := diffJob(w, after[r.ID]); d != "" {
			t.Errorf("row %d after UpdateEach: %s", r.ID, d)
		}
	}
	for name, bad := range map[string]func() ([]any, error){
		"a first match column that is not the key": func() ([]any, error) {
			return u.UpdateEach(ctx, []string{"locked_by"}, dao.Criteria{}, nil, []dao.RowSet{{Match: []any{"w1"}, Set: dao.Set{"attempts": 1}}})
		},
		"rows writing other columns": func() ([]any, error) {
			return u.UpdateEach(ctx, []string{"id"}, dao.Criteria{}, nil, []dao.RowSet{
				{Match: []any{rows[6].ID}, Set: dao.Set{"attempts": 1}}, {Match: []any{rows[7].ID}, Set: dao.Set{"note": "x"}}})
		},
		"an Increment": func() ([]any, error) {
			return u.UpdateEach(ctx, []string{"id"}, dao.Criteria{}, nil, []dao.RowSet{{Match: []any{rows[6].ID}, Set: dao.Set{"attempts": dao.Incr(1)}}})
		},
		"a value of the wrong type": func() ([]any, error) {
			return u.UpdateEach(ctx, []string{"id"}, dao.Criteria{}, nil, []dao.RowSet{{Match: []any{rows[6].ID}, Set: dao.Set{"attempts": "many"}}})
		},
		"too few match values": func() ([]any, error) {
			return u.UpdateEach(ctx, []string{"id", "locked_by"}, dao.Criteria{}, nil, []dao.RowSet{{Match: []any{rows[6].ID}, Set: dao.Set{"attempts": 1}}})
		},
		"an unknown column": func() ([]any, error) {
			return u.UpdateEach(ctx, []string{"id"}, dao.Criteria{}, nil, []dao.RowSet{{Match: []any{rows[6].ID}, Set: dao.Set{"nope": 1}}})
		},
	} {
		if keys, err := bad(); !errors.Is(err, dao.ErrInvalidArgument) || len(keys) != 0 {
			t.Errorf("UpdateEach with %s = %v, %v; want dao.ErrInvalidArgument", name, keys, err)
		}
	}
	assertUnchanged(t, s, after, "UpdateEach with bad input")
}
