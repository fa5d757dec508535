package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// unscoper is the store method that sees soft-deleted rows
// ([dao.Table.Unscoped]).
type unscoper[T any] interface {
	Unscoped() *dao.Table[T]
}

// unscoped returns s's unscoped form, failing t when s has none.
func unscoped[T any](t *testing.T, s dao.Store[T]) dao.Store[T] {
	t.Helper()
	u, ok := s.(unscoper[T])
	if !ok {
		t.Fatalf("store %T has no Unscoped method (dao.Table has)", s)
	}
	return u.Unscoped()
}

// testModelLifecycle checks what gorm.Model brings, on [SoftJob]: soft
// delete (live rows only for Get, Find, Count, Update and Claim; Delete
// sets deleted_at, bounded, smallest keys first; Unscoped sees every row
// and deletes for good), automatic timestamps (created_at on Create,
// updated_at bumped by Update and Claim, the returned value equal to the
// stored one), and concurrent claims while rows are soft-deleted. Its
// criteria use the columns id, owner, deleted_at and updated_at.
func testModelLifecycle(t *testing.T, ms ModelStores) {
	t.Run("SoftDelete", func(t *testing.T) { checkSoftDelete(t, ms.SoftJob(t)) })
	t.Run("Timestamps", func(t *testing.T) { checkTimestamps(t, ms.SoftJob(t)) })
	t.Run("ClaimWhileDeleting", func(t *testing.T) { checkClaimWhileDeleting(t, ms.SoftJob(t), 8) })
}

// seedSoftJobs creates n jobs without owner and returns their
// keys in ascending order.
func seedSoftJobs(t *testing.T, s dao.Store[SoftJob], n int) []uint {
	t.Helper()
	rows := make([]*SoftJob, n)
	for i := range rows {
		rows[i] = &SoftJob{Queue: fmt.Sprintf("q%d", i%3)}
	}
	for start := 0; start < n; start += createBatch {
		if err := s.Create(context.Background(), rows[start:min(start+createBatch, n)]...); err != nil {
			t.Fatalf("Create rows %d..: %v", start, err)
		}
	}
	keys := make([]uint, n)
	for i, r := range rows {
		keys[i] = r.ID
	}
	slices.Sort(keys)
	return keys
}

func softJobKeys(rows []SoftJob) []uint {
	out := make([]uint, len(rows))
	for i := range rows {
		out[i] = rows[i].ID
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func checkSoftDelete(t *testing.T, s dao.Store[SoftJob]) {
	ctx := context.Background()
	keys := seedSoftJobs(t, s, 10)

	n, err := s.Delete(ctx, dao.IsNull("owner"), 3)
	if err != nil || n != 3 {
		t.Fatalf("Delete(owner IS NULL, limit 3) = %d, %v; want 3", n, err)
	}
	deleted, live := keys[:3], keys[3:]
	for _, k := range deleted {
		if _, err := s.Get(ctx, k); !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("Get(soft-deleted %d) error = %v, want ErrNotFound", k, err)
		}
	}
	if _, err := s.Get(ctx, live[0]); err != nil {
		t.Errorf("Get(live %d): %v", live[0], err)
	}
	got, err := s.Find(ctx, dao.Query{})
	if err != nil || !slices.Equal(softJobKeys(got), live) {
		t.Errorf("Find = %v, %v; want the live rows %v (Delete takes the smallest keys first)", softJobKeys(got), err, live)
	}
	if c, err := s.Count(ctx, dao.Criteria{}); err != nil || c != int64(len(live)) {
		t.Errorf("Count = %d, %v; want %d", c, err, len(live))
	}
	if c, err := s.Count(ctx, dao.NotNull("deleted_at")); err != nil || c != 0 {
		t.Errorf("Count(deleted_at IS NOT NULL) = %d, %v; want 0: the store sees live rows only", c, err)
	}
	u, err := s.Update(ctx, dao.IsNull("owner"), dao.Set{"owner": "u"})
	if err != nil || u != int64(len(live)) {
		t.Errorf("Update(owner IS NULL) = %d, %v; want %d live rows", u, err, len(live))
	}
	claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("owner", "u"), Set: dao.Set{"owner": "c"}, Limit: 100})
	if err != nil || !slices.Equal(softJobKeys(claimed), live) {
		t.Errorf("Claim = %v, %v; want the live rows %v", softJobKeys(claimed), err, live)
	}
	if n, err := s.Delete(ctx, dao.In("id", deleted[0], deleted[1]), 10); err != nil || n != 0 {
		t.Errorf("Delete(already soft-deleted) = %d, %v; want 0", n, err)
	}

	all := unscoped(t, s)
	if c, err := all.Count(ctx, dao.Criteria{}); err != nil || c != 10 {
		t.Errorf("Unscoped().Count = %d, %v; want 10", c, err)
	}
	gone, err := all.Find(ctx, dao.Query{Where: dao.NotNull("deleted_at")})
	if err != nil || !slices.Equal(softJobKeys(gone), deleted) {
		t.Fatalf("Unscoped().Find(deleted_at IS NOT NULL) = %v, %v; want %v", softJobKeys(gone), err, deleted)
	}
	for _, r := range gone {
		if !r.DeletedAt.Valid || r.DeletedAt.Time.Before(r.CreatedAt) || r.Owner != nil {
			t.Errorf("soft-deleted row %d: deleted_at %+v, created_at %v, owner %v; want deleted_at set, not before created_at, owner untouched",
				r.ID, r.DeletedAt, r.CreatedAt, r.Owner)
		}
	}
	if r, err := all.Get(ctx, deleted[0]); err != nil || r.ID != deleted[0] {
		t.Errorf("Unscoped().Get(%d) = %d, %v", deleted[0], r.ID, err)
	}
	if n, err := all.Delete(ctx, dao.NotNull("deleted_at"), 2); err != nil || n != 2 {
		t.Errorf("Unscoped().Delete(deleted_at IS NOT NULL, limit 2) = %d, %v; want 2", n, err)
	}
	if c, err := all.Count(ctx, dao.Criteria{}); err != nil || c != 8 {
		t.Errorf("Unscoped().Count after deleting 2 for good = %d, %v; want 8", c, err)
	}
	for _, k := range deleted[:2] {
		if _, err := all.Get(ctx, k); !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("Unscoped().Get(%d, deleted for good) error = %v, want ErrNotFound", k, err)
		}
	}
	if _, err := all.Get(ctx, deleted[2]); err != nil {
		t.Errorf("Unscoped().Get(%d, still soft-deleted): %v", deleted[2], err)
	}
}

// tick waits until the millisecond changes, so that the next stamp
// differs from the last one.
func tick() { time.Sleep(3 * time.Millisecond) }

func checkTimestamps(t *testing.T, s dao.Store[SoftJob]) {
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	row := &SoftJob{Queue: "q"}
	if err := s.Create(ctx, row); err != nil {
		t.Fatal(err)
	}
	if row.CreatedAt.Before(before) || !row.UpdatedAt.Equal(row.CreatedAt) {
		t.Errorf("Create set created_at %v, updated_at %v; want now, both equal", row.CreatedAt, row.UpdatedAt)
	}
	stored, err := s.Get(ctx, row.ID)
	if err != nil || !stored.CreatedAt.Equal(row.CreatedAt) || !stored.UpdatedAt.Equal(row.UpdatedAt) {
		t.Errorf("stored created_at %v, updated_at %v (%v); want the values Create set, %v and %v",
			stored.CreatedAt, stored.UpdatedAt, err, row.CreatedAt, row.UpdatedAt)
	}

	tick()
	if n, err := s.Update(ctx, dao.Eq("id", row.ID), dao.Set{"owner": "u"}); err != nil || n != 1 {
		t.Fatalf("Update = %d, %v", n, err)
	}
	updated, err := s.Get(ctx, row.ID)
	if err != nil || !updated.UpdatedAt.After(stored.UpdatedAt) || !updated.CreatedAt.Equal(stored.CreatedAt) {
		t.Errorf("after Update: updated_at %v, created_at %v (%v); want updated_at after %v, created_at kept",
			updated.UpdatedAt, updated.CreatedAt, err, stored.UpdatedAt)
	}

	tick()
	claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("owner", "u"), Set: dao.Set{"owner": "c"}, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	after, err := s.Get(ctx, row.ID)
	if err != nil || !claimed[0].UpdatedAt.After(updated.UpdatedAt) || !after.UpdatedAt.Equal(claimed[0].UpdatedAt) {
		t.Errorf("Claim returned updated_at %v, stored %v (%v); want them equal and after %v",
			claimed[0].UpdatedAt, after.UpdatedAt, err, updated.UpdatedAt)
	}

	// A claim whose Set writes updated_at keeps that value.
	mine := baseTime()
	claimed, err = s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("owner", "c"), Set: dao.Set{"owner": "d", "updated_at": mine}, Limit: 1})
	if err != nil || len(claimed) != 1 || !claimed[0].UpdatedAt.Equal(mine) {
		t.Fatalf("Claim with updated_at in Set = %v, %v; want updated_at %v", claimed, err, mine)
	}
	if got, err := s.Get(ctx, row.ID); err != nil || !got.UpdatedAt.Equal(mine) {
		t.Errorf("stored updated_at = %v, %v; want %v", got.UpdatedAt, err, mine)
	}
}

// checkClaimWhileDeleting runs workers claimers (owner IS NULL → owner =
// wN) and two deleters (Delete(owner IS NULL, 5) until none is left)
// together, released at once. Every row must end claimed exactly once or soft-deleted, never
// both: a soft-deleted row is never claimed, a claimed row never deleted.
func checkClaimWhileDeleting(t *testing.T, s dao.Store[SoftJob], workers int) {
	ctx := context.Background()
	n := 200
	if testing.Short() {
		n = 60
	}
	keys := seedSoftJobs(t, s, n)
	var (
		mu      sync.Mutex
		claimed = map[uint]int{}
		errs    []error
		wg      sync.WaitGroup
		deletes int64
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	start := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				d, err := s.Delete(ctx, dao.IsNull("owner"), 5)
				mu.Lock()
				deletes += d
				mu.Unlock()
				if err != nil && !dao.IsRetryable(err) {
					fail(fmt.Errorf("delete: %w", err))
					return
				}
				if err == nil && d == 0 {
					return
				}
			}
		}()
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			<-start
			for {
				got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.IsNull("owner"), Set: dao.Set{"owner": owner}, Limit: 3,
					// The deleters take the smallest keys first: claiming
					// from the other end makes the two meet halfway.
					OrderBy: []dao.Order{dao.Desc("id")}})
				if err != nil && !dao.IsRetryable(err) {
					fail(fmt.Errorf("claim: %w", err))
					return
				}
				mu.Lock()
				for i := range got {
					if got[i].DeletedAt.Valid {
						errs = append(errs, fmt.Errorf("claimed row %d returned soft-deleted (%v)", got[i].ID, got[i].DeletedAt.Time))
					}
					claimed[got[i].ID]++
				}
				mu.Unlock()
				if err == nil && len(got) == 0 {
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	gone, err := unscoped(t, s).Find(ctx, dao.Query{Where: dao.NotNull("deleted_at")})
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[uint]bool{}
	for _, r := range gone {
		deleted[r.ID] = true
		if r.Owner != nil {
			t.Errorf("row %d is soft-deleted and owned by %q", r.ID, *r.Owner)
		}
	}
	if int64(len(deleted)) != deletes {
		t.Errorf("Delete calls reported %d rows, %d rows are soft-deleted", deletes, len(deleted))
	}
	for _, k := range keys {
		switch c := claimed[k]; {
		case c > 1:
			t.Errorf("row %d claimed %d times", k, c)
		case c == 1 && deleted[k]:
			t.Errorf("row %d both claimed and soft-deleted", k)
		case c == 0 && !deleted[k]:
			t.Errorf("row %d neither claimed nor soft-deleted", k)
		}
	}
	t.Logf("%d rows, %d claimers and two deleters: %d claimed, %d soft-deleted", n, workers, len(claimed), len(deleted))
	if c, err := s.Count(ctx, dao.Criteria{}); err != nil || c != int64(len(claimed)) {
		t.Errorf("Count of live rows = %d, %v; want the %d claimed", c, err, len(claimed))
	}
}
