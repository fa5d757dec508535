package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// TestAddIdempotentConcurrent: eight concurrent Adds of one key create
// one row; all return it.
func TestAddIdempotentConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		ctx := context.Background()
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		ids := map[int64]bool{}
		for i := range 8 {
			wg.Go(func() {
				s, c, err := sc.Add(ctx, dispatch.Spec{Key: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Payload: []byte(fmt.Sprint(i))})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("add %d: %v", i, err)
					return
				}
				if c {
					created++
				}
				ids[s.ID] = true
			})
		}
		wg.Wait()
		n, err := store.Count(ctx, dao.Eq(dispatch.ColKey, "nightly"))
		if err != nil || n != 1 || created != 1 || len(ids) != 1 {
			t.Fatalf("rows %d (err %v), created %d, distinct ids %d; want 1, 1, 1", n, err, created, len(ids))
		}
		s := get(t, sc, "nightly")
		if s.Kind != dispatch.KindCron || s.Status != dispatch.StatusActive || s.MaxFailures != dispatch.DefaultMaxFailures {
			t.Fatalf("stored %+v", s)
		}
		if h := s.NextFireAt.In(mustZone(t, "Europe/Berlin")); h.Hour() != 3 || h.Minute() != 0 || !s.NextFireAt.After(time.Now()) {
			t.Fatalf("next fire %v, want the next 03:00 Berlin time", h)
		}
	})
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestUpsertAndLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		clk := newClock()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{Now: clk.Now, MaxFailures: 7})
		ctx := context.Background()
		at := clk.Now().Add(time.Hour)
		s, err := sc.Upsert(ctx, dispatch.Spec{Key: "remind", At: at, Payload: []byte("v1")})
		if err != nil || !s.NextFireAt.Equal(at) || s.MaxFailures != 7 || s.Kind != dispatch.KindOnce {
			t.Fatalf("upsert new: %+v, %v", s, err)
		}
		// The same definition writes nothing (UpdatedAt would move).
		time.Sleep(5 * time.Millisecond)
		s2, err := sc.Upsert(ctx, dispatch.Spec{Key: "remind", At: at, Payload: []byte("v1")})
		if d := s2.UpdatedAt.Sub(s.UpdatedAt); err != nil || d < -time.Millisecond || d > time.Millisecond || s2.ID != s.ID {
			t.Fatalf("upsert same: %+v, %v", s2, err)
		}
		// Add leaves an existing definition alone.
		s3, created, err := sc.Add(ctx, dispatch.Spec{Key: "remind", Payload: []byte("other")})
		if err != nil || created || string(s3.Payload) != "v1" {
			t.Fatalf("add existing: %+v, %v, %v", s3, created, err)
		}
		// A new definition replaces it and re-arms.
		if _, err := store.Update(ctx, dao.Eq(dispatch.ColKey, "remind"), dao.Set{dispatch.ColStatus: string(dispatch.StatusFailed), dispatch.ColFailureCount: 7}); err != nil {
			t.Fatal(err)
		}
		s4, err := sc.Upsert(ctx, dispatch.Spec{Key: "remind", Cron: "*/5 * * * *", Payload: []byte("v2")})
		if err != nil || s4.Kind != dispatch.KindCron || s4.Status != dispatch.StatusActive || s4.FailureCount != 0 || string(s4.Payload) != "v2" ||
			!s4.NextFireAt.Equal(time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC)) {
			t.Fatalf("upsert changed: %+v, %v", s4, err)
		}
		if err := sc.Pause(ctx, "remind"); err != nil {
			t.Fatal(err)
		}
		if err := sc.Pause(ctx, "remind"); err != nil {
			t.Fatalf("pause twice: %v", err)
		}
		if get(t, sc, "remind").Status != dispatch.StatusPaused {
			t.Fatal("not paused")
		}
		if err := sc.Resume(ctx, "remind"); err != nil || get(t, sc, "remind").Status != dispatch.StatusActive {
			t.Fatalf("resume: %v", err)
		}
		if err := sc.Pause(ctx, "missing"); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("pause missing: %v", err)
		}
		// Resume re-arms a failed schedule; a fired one is terminal.
		if _, err := store.Update(ctx, dao.Eq(dispatch.ColKey, "remind"), dao.Set{dispatch.ColStatus: string(dispatch.StatusFailed), dispatch.ColFailureCount: 3}); err != nil {
			t.Fatal(err)
		}
		if err := sc.Resume(ctx, "remind"); err != nil {
			t.Fatal(err)
		}
		if s := get(t, sc, "remind"); s.Status != dispatch.StatusActive || s.FailureCount != 0 || !s.NextFireAt.Equal(clk.Now()) {
			t.Fatalf("resumed failed: %+v", s)
		}
		if _, err := store.Update(ctx, dao.Eq(dispatch.ColKey, "remind"), dao.Set{dispatch.ColStatus: string(dispatch.StatusFired)}); err != nil {
			t.Fatal(err)
		}
		if err := sc.Pause(ctx, "remind"); !errors.Is(err, dispatch.ErrTerminal) {
			t.Fatalf("pause fired: %v", err)
		}
		for i := range 5 {
			if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("k%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		page, err := sc.List(ctx, dispatch.ListOptions{AfterKey: "k1", Limit: 2})
		if err != nil || len(page) != 2 || page[0].Key != "k2" || page[1].Key != "k3" {
			t.Fatalf("list page: %v, %v", page, err)
		}
		fired, err := sc.List(ctx, dispatch.ListOptions{Status: dispatch.StatusFired})
		if err != nil || len(fired) != 1 || fired[0].Key != "remind" {
			t.Fatalf("list fired: %v, %v", fired, err)
		}
		if err := sc.Delete(ctx, "remind"); err != nil {
			t.Fatal(err)
		}
		if err := sc.Delete(ctx, "remind"); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})
}

func TestAddInvalid(t *testing.T) {
	store, _ := memBackend().open(t)
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	ctx := context.Background()
	for name, sp := range map[string]dispatch.Spec{
		"empty key":    {},
		"long key":     {Key: string(make([]byte, dispatch.MaxKeyLen+1))},
		"bad cron":     {Key: "k", Cron: "every day"},
		"bad zone":     {Key: "k", Cron: "* * * * *", TimeZone: "Nowhere/Else"},
		"zone no cron": {Key: "k", TimeZone: "UTC"},
		"negative max": {Key: "k", MaxFailures: -1},
	} {
		if _, _, err := sc.Add(ctx, sp); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", name, err)
		}
	}
	if n, _ := store.Count(ctx, dao.Criteria{}); n != 0 {
		t.Fatalf("%d rows written by invalid adds", n)
	}
	if _, _, err := sc.Add(ctx, dispatch.Spec{Key: "k", Cron: "0 0 1 1 * 2020"}); !errors.Is(err, dispatch.ErrNoNextOccurrence) {
		t.Errorf("cron in the past: %v", err)
	}
	if _, _, err := sc.WithTx(nil).Add(ctx, dispatch.Spec{Key: "k"}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("WithTx on memory: %v", err)
	}
}

// TestAddInTransaction: a schedule added in a rolled-back transaction does
// not exist; in a committed one it does.
func TestAddInTransaction(t *testing.T) {
	for _, b := range backends()[1:] {
		t.Run(b.name, func(t *testing.T) {
			store, db := b.open(t)
			sc := newSchedules(t, store, dispatch.SchedulesConfig{})
			ctx := context.Background()
			rollback := errors.New("rollback")
			err := db.Transaction(func(tx *gorm.DB) error {
				if _, _, err := sc.WithTx(tx).Add(ctx, dispatch.Spec{Key: "in-tx"}); err != nil {
					return err
				}
				return rollback
			})
			if !errors.Is(err, rollback) {
				t.Fatal(err)
			}
			if _, err := sc.Get(ctx, "in-tx"); !errors.Is(err, dao.ErrNotFound) {
				t.Fatalf("after rollback: %v", err)
			}
			err = db.Transaction(func(tx *gorm.DB) error {
				_, _, err := sc.WithTx(tx).Add(ctx, dispatch.Spec{Key: "in-tx"})
				if err != nil {
					return err
				}
				// Idempotent inside the transaction too.
				_, created, err := sc.WithTx(tx).Add(ctx, dispatch.Spec{Key: "in-tx"})
				if created {
					t.Error("second add in the transaction created a row")
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			get(t, sc, "in-tx")
		})
	}
}
