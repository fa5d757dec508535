package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

func testCRUD(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.NewStore(t)

	t.Run("CreateFillsIDsAndGetReadsBack", func(t *testing.T) {
		base := baseTime()
		a := &Job{Status: statusReady, Priority: 3, Payload: "a", MaxAttempts: 5, CreatedAt: base}
		b := &Job{Status: "running", Priority: -2, Payload: "b", LockedBy: ptr("w1"), LockedUntil: ptr(base.Add(time.Hour)), Attempts: 1, MaxAttempts: 2, CreatedAt: base.Add(time.Second), Note: ptr("")}
		c := &Job{Status: "done", Payload: "c", CreatedAt: base.Add(2 * time.Second), Note: ptr("n")}
		if err := s.Create(ctx, a, b, c); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if a.ID == 0 || b.ID == 0 || c.ID == 0 || a.ID == b.ID || b.ID == c.ID || a.ID == c.ID {
			t.Fatalf("Create filled ids %d, %d, %d; want three distinct non-zero ids", a.ID, b.ID, c.ID)
		}
		for _, want := range []*Job{a, b, c} {
			got, err := s.Get(ctx, want.ID)
			if err != nil {
				t.Fatalf("Get(%d): %v", want.ID, err)
			}
			if d := diffJob(*want, got); d != "" {
				t.Errorf("Get(%d) differs from what Create wrote: %s", want.ID, d)
			}
		}
		// Get takes any integer type for an int64 key.
		if got, err := s.Get(ctx, int32(a.ID)); err != nil || got.ID != a.ID {
			t.Errorf("Get(int32(%d)) = id %d, %v; want the row", a.ID, got.ID, err)
		}
		// An empty string and NULL are different values.
		if b.Note == nil || *b.Note != "" {
			t.Fatal("fixture broken")
		}
		if got, _ := s.Get(ctx, a.ID); got.Note != nil {
			t.Errorf("Get(%d).Note = %q, want NULL", a.ID, *got.Note)
		}
		if got, _ := s.Get(ctx, b.ID); got.Note == nil || *got.Note != "" {
			t.Errorf("Get(%d).Note = %s, want the empty string", b.ID, fmtPtr(got.Note))
		}
	})

	t.Run("GetMissingIsErrNotFound", func(t *testing.T) {
		_, err := s.Get(ctx, int64(1<<40))
		if !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("Get(missing id) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("DuplicatePrimaryKeyIsErrDuplicate", func(t *testing.T) {
		first := &Job{Status: statusReady, Payload: "original", CreatedAt: baseTime()}
		if err := s.Create(ctx, first); err != nil {
			t.Fatalf("Create: %v", err)
		}
		before := snapshot(t, s)
		dup := &Job{ID: first.ID, Status: "other", Payload: "duplicate", CreatedAt: baseTime()}
		err := s.Create(ctx, dup)
		if !errors.Is(err, dao.ErrDuplicate) {
			t.Errorf("Create with an existing primary key: error = %v, want ErrDuplicate", err)
		}
		if errors.Is(err, dao.ErrDuplicate) && dao.IsRetryable(err) {
			t.Errorf("IsRetryable(%v) = true; a duplicate key is not retryable", err)
		}
		assertUnchanged(t, s, before, "after a duplicate Create")
	})

	t.Run("CreateBatchWithDuplicateIsErrDuplicate", func(t *testing.T) {
		existing := &Job{Status: statusReady, Payload: "existing", CreatedAt: baseTime()}
		if err := s.Create(ctx, existing); err != nil {
			t.Fatalf("Create: %v", err)
		}
		before := snapshot(t, s)
		fresh := &Job{Status: statusReady, Payload: "fresh", CreatedAt: baseTime()}
		dup := &Job{ID: existing.ID, Status: statusReady, Payload: "dup", CreatedAt: baseTime()}
		err := s.Create(ctx, fresh, dup)
		if !errors.Is(err, dao.ErrDuplicate) {
			t.Errorf("Create(batch with an existing primary key): error = %v, want ErrDuplicate", err)
		}
		// One batch is one insert: it fails as a whole.
		assertUnchanged(t, s, before, "after a batch Create with a duplicate")
	})

	t.Run("CreateIfAbsentSkipsExistingKeys", func(t *testing.T) {
		s := h.NewStore(t)
		ci, ok := s.(dao.IdempotentCreator[Job])
		if !ok {
			t.Fatalf("%T has no CreateIfAbsent", s)
		}
		rows := seed(t, s, 3, nil)
		before := snapshot(t, s)
		next := rows[2].ID + 100
		items := []*Job{
			{ID: rows[0].ID, Status: "other", Payload: "dup of a stored row", CreatedAt: baseTime()},
			{ID: next, Status: statusReady, Payload: "new-1", CreatedAt: baseTime()},
			{ID: next, Status: statusReady, Payload: "dup of an earlier item", CreatedAt: baseTime()},
			{ID: next + 1, Status: statusReady, Payload: "new-2", CreatedAt: baseTime()},
		}
		copies := make([]Job, len(items))
		for i, it := range items {
			copies[i] = *it
		}
		n, err := ci.CreateIfAbsent(ctx, items...)
		if err != nil || n != 2 {
			t.Fatalf("CreateIfAbsent = %d, %v; want 2 inserted", n, err)
		}
		for i, it := range items {
			if d := diffJob(copies[i], *it); d != "" {
				t.Errorf("item %d changed by CreateIfAbsent: %s", i, d)
			}
		}
		after := snapshot(t, s)
		if len(after) != len(before)+2 {
			t.Errorf("%d rows after CreateIfAbsent, want %d", len(after), len(before)+2)
		}
		for id, want := range before {
			if d := diffJob(want, after[id]); d != "" {
				t.Errorf("stored row %d changed: %s", id, d)
			}
		}
		for _, want := range []*Job{items[1], items[3]} {
			if got, ok := after[want.ID]; !ok || got.Payload != want.Payload {
				t.Errorf("row %d = %+v (present %v), want payload %q", want.ID, got, ok, want.Payload)
			}
		}
		if n, err := ci.CreateIfAbsent(ctx, items...); err != nil || n != 0 {
			t.Errorf("CreateIfAbsent again = %d, %v; want 0 inserted", n, err)
		}
		if _, err := ci.CreateIfAbsent(ctx, items[1], nil); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("CreateIfAbsent with a nil item: %v, want ErrInvalidArgument", err)
		}
	})

	// A batch or an In list larger than a driver's bind-parameter limit
	// (SQLite 32,766; PostgreSQL 65,535) either works or is refused as
	// ErrInvalidArgument with nothing written; a raw driver error is not
	// the contract.
	t.Run("LargeBatchAndInList", func(t *testing.T) {
		s := h.NewStore(t)
		const n = 8000 // 8,000 rows x 9 columns = 72,000 values
		base := baseTime()
		items := make([]*Job, n)
		for i := range items {
			items[i] = &Job{Status: statusReady, Priority: i % 5, Payload: "bulk", MaxAttempts: 1, CreatedAt: base}
		}
		err := s.Create(ctx, items...)
		count, cerr := s.Count(ctx, dao.Criteria{})
		if cerr != nil {
			t.Fatal(cerr)
		}
		switch {
		case err == nil:
			if count != n {
				t.Errorf("Create(%d rows) succeeded but Count = %d", n, count)
			}
		case errors.Is(err, dao.ErrInvalidArgument):
			if count != 0 {
				t.Errorf("Create(%d rows) = %v but wrote %d rows", n, err, count)
			}
			t.Logf("Create(%d rows) refused: %v", n, err)
			return
		default:
			t.Errorf("Create(%d rows) = %v (%d rows written); want success or ErrInvalidArgument", n, err, count)
			return
		}
		vals := make([]any, 70000)
		for i := range vals {
			vals[i] = int64(i + 1)
		}
		want := int64(0)
		for _, it := range items {
			if it.ID >= 1 && it.ID <= int64(len(vals)) {
				want++
			}
		}
		got, err := s.Count(ctx, dao.In("id", vals...))
		switch {
		case err == nil:
			if got != want {
				t.Errorf("Count(id in 70,000 values) = %d, want %d", got, want)
			}
		case errors.Is(err, dao.ErrInvalidArgument):
			t.Logf("Count(id in 70,000 values) refused: %v", err)
		default:
			t.Errorf("Count(id in 70,000 values) = %v; want a count or ErrInvalidArgument", err)
		}
	})

	t.Run("FindAndCountEmpty", func(t *testing.T) {
		e := h.NewStore(t)
		rows, err := e.Find(ctx, dao.Query{})
		if err != nil || len(rows) != 0 {
			t.Errorf("Find on an empty store = %d rows, %v; want none", len(rows), err)
		}
		n, err := e.Count(ctx, dao.Criteria{})
		if err != nil || n != 0 {
			t.Errorf("Count on an empty store = %d, %v; want 0", n, err)
		}
		got, err := e.Claim(ctx, dao.ClaimRequest{Set: dao.Set{"status": statusClaimed}, Limit: 10})
		if err != nil || len(got) != 0 {
			t.Errorf("Claim on an empty store = %d rows, %v; want none", len(got), err)
		}
	})
}

func testUpdate(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("SetsMatchingRowsOnly", func(t *testing.T) {
		s := h.NewStore(t)
		rows := seed(t, s, 6, func(i int, j *Job) { j.Priority = i })
		before := snapshot(t, s)
		until := baseTime().Add(time.Hour)
		n, err := s.Update(ctx, dao.Ge("priority", 3), dao.Set{"status": "running", "locked_by": "w9", "locked_until": until, "note": "set"})
		if err != nil || n != 3 {
			t.Fatalf("Update(priority >= 3) = %d, %v; want 3", n, err)
		}
		after := snapshot(t, s)
		for _, r := range rows {
			want := before[r.ID]
			if r.Priority >= 3 {
				want.Status, want.LockedBy, want.LockedUntil, want.Note = "running", ptr("w9"), &until, ptr("set")
			}
			if d := diffJob(want, after[r.ID]); d != "" {
				t.Errorf("row %d (priority %d) after Update: %s", r.ID, r.Priority, d)
			}
		}
	})

	t.Run("IncrAddsToCurrentValue", func(t *testing.T) {
		s := h.NewStore(t)
		rows := seed(t, s, 4, func(i int, j *Job) { j.Attempts = i; j.Priority = 10 * i })
		n, err := s.Update(ctx, dao.Criteria{}, dao.Set{"attempts": dao.Incr(2), "priority": dao.Incr(-5)})
		if err != nil || n != 4 {
			t.Fatalf("Update(Incr) = %d, %v; want 4", n, err)
		}
		for _, r := range rows {
			got, err := s.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Attempts != r.Attempts+2 || got.Priority != r.Priority-5 {
				t.Errorf("row %d: attempts %d→%d (want +2), priority %d→%d (want -5)", r.ID, r.Attempts, got.Attempts, r.Priority, got.Priority)
			}
		}
	})

	t.Run("SetNullAndBack", func(t *testing.T) {
		s := h.NewStore(t)
		rows := seed(t, s, 3, func(i int, j *Job) {
			j.LockedBy, j.LockedUntil, j.Note = ptr("w1"), ptr(baseTime()), ptr("x")
		})
		n, err := s.Update(ctx, dao.Eq("id", rows[0].ID), dao.Set{"locked_by": nil, "locked_until": nil, "note": (*string)(nil)})
		if err != nil || n != 1 {
			t.Fatalf("Update(set NULL) = %d, %v; want 1", n, err)
		}
		got, _ := s.Get(ctx, rows[0].ID)
		if got.LockedBy != nil || got.LockedUntil != nil || got.Note != nil {
			t.Errorf("after setting NULL: locked_by %s, locked_until %s, note %s; want NULL", fmtPtr(got.LockedBy), fmtPtr(got.LockedUntil), fmtPtr(got.Note))
		}
		if c, err := s.Count(ctx, dao.IsNull("locked_by")); err != nil || c != 1 {
			t.Errorf("Count(locked_by IS NULL) = %d, %v; want 1", c, err)
		}
		if n, err := s.Update(ctx, dao.IsNull("note"), dao.Set{"note": ptr("back")}); err != nil || n != 1 {
			t.Errorf("Update(note IS NULL → pointer value) = %d, %v; want 1", n, err)
		}
		if got, _ := s.Get(ctx, rows[0].ID); got.Note == nil || *got.Note != "back" {
			t.Errorf("note = %s, want back", fmtPtr(got.Note))
		}
	})

	t.Run("NoMatchChangesNothing", func(t *testing.T) {
		s := h.NewStore(t)
		seed(t, s, 3, nil)
		before := snapshot(t, s)
		n, err := s.Update(ctx, dao.Eq("status", "nonexistent"), dao.Set{"status": "x"})
		if err != nil || n != 0 {
			t.Errorf("Update(no match) = %d, %v; want 0", n, err)
		}
		assertUnchanged(t, s, before, "Update with no match")
	})

	// The count is of the rows the update matched, as in the reference
	// store, even when a row already held the values: fenced updates
	// ("set status = published where locked_by = me") rely on it.
	t.Run("CountsMatchedRowsWhenValuesUnchanged", func(t *testing.T) {
		s := h.NewStore(t)
		seed(t, s, 3, func(i int, j *Job) { j.Note = ptr("same") })
		n, err := s.Update(ctx, dao.Criteria{}, dao.Set{"note": "same"})
		if err != nil || n != 3 {
			t.Errorf("Update setting the values the rows already hold = %d, %v; want 3 (matched rows)", n, err)
		}
	})
}

// testUpdateKeys checks UpdateKeys: it writes exactly the rows the
// criteria match, reports exactly their keys, and under concurrent
// callers with the same fence reports each row to one caller only.
func testUpdateKeys(t *testing.T, h Harness) {
	ctx := context.Background()
	updater := func(t *testing.T, s dao.Store[Job]) dao.KeyUpdater {
		t.Helper()
		u, ok := s.(dao.KeyUpdater)
		if !ok {
			t.Fatalf("%T has no UpdateKeys", s)
		}
		return u
	}

	t.Run("ReportsTheFencedRowsItWrote", func(t *testing.T) {
		s := h.NewStore(t)
		rows := seed(t, s, 6, func(i int, j *Job) { j.LockedBy = ptr("w1") })
		// Row 1's lease went to another worker: the fence must refuse it.
		if n, err := s.Update(ctx, dao.Eq("id", rows[1].ID), dao.Set{"locked_by": "w2"}); err != nil || n != 1 {
			t.Fatalf("Update(row 1 to w2) = %d, %v", n, err)
		}
		before := snapshot(t, s)
		fence := dao.And(dao.In("id", rows[0].ID, rows[1].ID, rows[2].ID), dao.Eq("locked_by", "w1"))
		keys, err := updater(t, s).UpdateKeys(ctx, fence, dao.Set{"status": "done", "locked_by": ""})
		if err != nil {
			t.Fatalf("UpdateKeys: %v", err)
		}
		got := map[string]int{}
		for _, k := range keys {
			got[fmt.Sprint(k)]++
		}
		want := map[string]int{fmt.Sprint(rows[0].ID): 1, fmt.Sprint(rows[2].ID): 1}
		if !maps.Equal(got, want) {
			t.Errorf("UpdateKeys returned keys %v, want %v", got, want)
		}
		after := snapshot(t, s)
		for _, r := range rows {
			w := before[r.ID]
			if r.ID == rows[0].ID || r.ID == rows[2].ID {
				w.Status, w.LockedBy = "done", ptr("")
			}
			if d := diffJob(w, after[r.ID]); d != "" {
				t.Errorf("row %d after UpdateKeys: %s", r.ID, d)
			}
		}
		keys, err = updater(t, s).UpdateKeys(ctx, fence, dao.Set{"status": "done", "locked_by": ""})
		if err != nil || len(keys) != 0 {
			t.Errorf("UpdateKeys once the fence matches nothing = %v, %v; want no keys", keys, err)
		}
		assertUnchanged(t, s, after, "UpdateKeys with no match")
	})

	t.Run("ConcurrentFencedWritesReportEachRowOnce", func(t *testing.T) {
		s := h.NewStore(t)
		const n, callers = 60, 6
		seed(t, s, n, func(i int, j *Job) { j.LockedBy = ptr("w1") })
		u := updater(t, s)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			seen = map[string]int{}
			errs []error
		)
		for c := range callers {
			wg.Go(func() {
				keys, err := u.UpdateKeys(ctx, dao.Eq("locked_by", "w1"), dao.Set{"locked_by": fmt.Sprintf("c%d", c)})
				mu.Lock()
				defer mu.Unlock()
				if err != nil && !dao.IsRetryable(err) {
					errs = append(errs, err)
				}
				for _, k := range keys {
					seen[fmt.Sprint(k)]++
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("UpdateKeys: %v", err)
		}
		dup := 0
		for _, c := range seen {
			dup += c - 1
		}
		rows, err := s.Find(ctx, dao.Query{})
		if err != nil {
			t.Fatal(err)
		}
		mismatch := 0
		for _, r := range rows {
			owner := ""
			if r.LockedBy != nil {
				owner = *r.LockedBy
			}
			if (owner != "w1") != (seen[fmt.Sprint(r.ID)] == 1) {
				mismatch++
			}
		}
		t.Logf("%d callers over %d rows: %d keys reported, %d reported twice, %d rows whose write and report disagree", callers, n, len(seen), dup, mismatch)
		if dup != 0 || mismatch != 0 {
			t.Errorf("%d keys reported more than once, %d rows written but not reported (or reported but not written)", dup, mismatch)
		}
	})
}

func testDelete(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("BoundedSmallestIDsFirst", func(t *testing.T) {
		s := h.NewStore(t)
		rows := seed(t, s, 10, func(i int, j *Job) {
			if i%2 == 1 {
				j.Status = "done"
			}
		})
		done := filterIDs(rows, func(j *Job) bool { return j.Status == "done" })
		n, err := s.Delete(ctx, dao.Eq("status", "done"), 2)
		if err != nil || n != 2 {
			t.Fatalf("Delete(status = done, limit 2) = %d, %v; want 2", n, err)
		}
		left := snapshot(t, s)
		for i, id := range done {
			_, present := left[id]
			if present != (i >= 2) {
				t.Errorf("after Delete(limit 2): done row %d present = %v; want the two smallest ids (%v) gone", id, present, done[:2])
			}
		}
		if len(left) != 8 {
			t.Errorf("after Delete(limit 2): %d rows left, want 8", len(left))
		}
		// Sweep in bounded batches until nothing is left to delete.
		var total int64 = 2
		for range 10 {
			n, err := s.Delete(ctx, dao.Eq("status", "done"), 2)
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if n > 2 {
				t.Fatalf("Delete(limit 2) removed %d rows", n)
			}
			if n == 0 {
				break
			}
			total += n
		}
		if total != int64(len(done)) {
			t.Errorf("the sweep deleted %d rows, want %d", total, len(done))
		}
		if c, _ := s.Count(ctx, dao.Criteria{}); c != 5 {
			t.Errorf("after the sweep Count = %d, want the 5 rows that did not match", c)
		}
		if c, _ := s.Count(ctx, dao.Eq("status", statusReady)); c != 5 {
			t.Errorf("after the sweep Count(ready) = %d, want 5", c)
		}
	})

	t.Run("Idempotent", func(t *testing.T) {
		s := h.NewStore(t)
		rows := seed(t, s, 3, nil)
		for i, want := range []int64{1, 0, 0} {
			n, err := s.Delete(ctx, dao.Eq("id", rows[1].ID), 100)
			if err != nil || n != want {
				t.Errorf("Delete(id = %d) call %d = %d, %v; want %d", rows[1].ID, i+1, n, err, want)
			}
		}
		if _, err := s.Get(ctx, rows[1].ID); !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("Get(deleted) error = %v, want ErrNotFound", err)
		}
		if c, _ := s.Count(ctx, dao.Criteria{}); c != 2 {
			t.Errorf("Count = %d, want 2", c)
		}
	})

	t.Run("LimitAboveMatches", func(t *testing.T) {
		s := h.NewStore(t)
		seed(t, s, 4, func(i int, j *Job) { j.Priority = i })
		n, err := s.Delete(ctx, dao.Lt("priority", 2), 1000)
		if err != nil || n != 2 {
			t.Errorf("Delete(priority < 2, limit 1000) = %d, %v; want 2", n, err)
		}
		got := snapshot(t, s)
		for _, r := range got {
			if r.Priority < 2 {
				t.Errorf("row %d with priority %d survived", r.ID, r.Priority)
			}
		}
		if len(got) != 2 {
			t.Errorf("%d rows left, want 2", len(got))
		}
	})
}

// testOrder checks Find's ordering (multi-key, both directions, the primary
// key as the final tie breaker) and limits, and the order of strings under
// the declared collation.
func testOrder(t *testing.T, h Harness) {
	t.Run("Collation", func(t *testing.T) { testCollationOrder(t, h) })
	ctx := context.Background()
	s := h.NewStore(t)
	base := baseTime()
	rows := seed(t, s, 12, func(i int, j *Job) {
		j.Priority = []int{2, 1, 3, 2, 1, 3, 2, 1, 3, 2, 0, -1}[i]
		j.Status = []string{"b", "a", "c", "a", "b", "c", "b", "a", "a", "c", "b", "a"}[i]
		j.CreatedAt = base.Add(time.Duration((i*7)%12) * time.Minute)
	})
	cases := []struct {
		name  string
		order []dao.Order
		less  func(a, b *Job) int
	}{
		{"none(id asc)", nil, func(a, b *Job) int { return 0 }},
		{"id desc", []dao.Order{dao.Desc("id")}, func(a, b *Job) int { return cmpInt(b.ID, a.ID) }},
		{"priority asc", []dao.Order{dao.Asc("priority")}, func(a, b *Job) int { return cmpInt(a.Priority, b.Priority) }},
		{"priority desc", []dao.Order{dao.Desc("priority")}, func(a, b *Job) int { return cmpInt(b.Priority, a.Priority) }},
		{"priority desc, created_at asc", []dao.Order{dao.Desc("priority"), dao.Asc("created_at")}, func(a, b *Job) int {
			if c := cmpInt(b.Priority, a.Priority); c != 0 {
				return c
			}
			return a.CreatedAt.Compare(b.CreatedAt)
		}},
		{"status asc, priority desc, id desc", []dao.Order{dao.Asc("status"), dao.Desc("priority"), dao.Desc("id")}, func(a, b *Job) int {
			if c := cmpInt(a.Status, b.Status); c != 0 {
				return c
			}
			if c := cmpInt(b.Priority, a.Priority); c != 0 {
				return c
			}
			return cmpInt(b.ID, a.ID)
		}},
		{"created_at desc", []dao.Order{dao.Desc("created_at")}, func(a, b *Job) int { return b.CreatedAt.Compare(a.CreatedAt) }},
	}
	for _, c := range cases {
		want := slices.Clone(rows)
		sortJobs(want, c.less)
		for _, limit := range []int{0, 1, 5, 12, 50} {
			got, err := s.Find(ctx, dao.Query{OrderBy: c.order, Limit: limit})
			if err != nil {
				t.Fatalf("Find(order %s, limit %d): %v", c.name, limit, err)
			}
			w := ids(want)
			if limit > 0 && limit < len(w) {
				w = w[:limit]
			}
			if !slices.Equal(ids(got), w) {
				t.Errorf("Find(order %s, limit %d) = ids %v, want %v", c.name, limit, ids(got), w)
			}
		}
	}
	// Ordering combines with criteria and limit.
	got, err := s.Find(ctx, dao.Query{Where: dao.Eq("status", "a"), OrderBy: []dao.Order{dao.Desc("priority")}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(rows), func(j Job) bool { return j.Status != "a" })
	sortJobs(want, func(a, b *Job) int { return cmpInt(b.Priority, a.Priority) })
	if w := ids(want)[:3]; !slices.Equal(ids(got), w) {
		t.Errorf("Find(status = a, priority desc, limit 3) = %v, want %v", ids(got), w)
	}
}

func cmpInt[V int | int64 | string](a, b V) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
