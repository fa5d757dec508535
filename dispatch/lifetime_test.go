package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/leaktest"
)

// dispatchFuncs are what the stack of a goroutine the worker started
// holds.
const dispatchFuncs = "claimstore/dispatch.("

// TestRunOutlivesEveryGoroutineItStarted: Run returns only once every
// goroutine it started has ended, a handler that ignores its cancelled
// context included: past the drain timeout its lease is released, and
// Run waits for it to return.
func TestRunOutlivesEveryGoroutineItStarted(t *testing.T) {
	store, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	addKeys(t, sc, "stubborn", "quick-1", "quick-2")
	release := make(chan struct{})
	started := make(chan struct{})
	w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
		if fr.Schedule.Key != "stubborn" {
			return nil
		}
		close(started)
		<-release // ignores ctx
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		WorkerID: "lifetime", PollInterval: 10 * time.Millisecond, Lease: time.Hour,
		DrainTimeout: 50 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-started
	waitFired(t, store, 2, "the two quick schedules fired")
	cancel()
	select {
	case err := <-done:
		close(release)
		t.Fatalf("Run returned (%v) while a handler it started still ran", err)
	case <-time.After(time.Second): // drain timeout and two write timeouts passed
	}
	if s := get(t, sc, "stubborn"); s.LeaseOwner != "" {
		t.Errorf("the stubborn handler's lease is still held by %q after the drain: want it released", s.LeaseOwner)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of its last handler's return")
	}
	if live := leaktest.Remaining(dispatchFuncs); len(live) > 0 {
		t.Fatalf("%d goroutines of the worker alive after Run returned:\n%s", len(live), strings.Join(live, "\n\n"))
	}
}

// A schedule worker whose Config.Due narrows it to some keys fires those
// and leaves the others as they are, for the workers that have their code.
func TestScheduleWorkerDueNarrowsItsSchedules(t *testing.T) {
	store, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	addKeys(t, sc, "mine", "theirs")
	f := newFires()
	w := newScheduleWorker(t, store, func(_ context.Context, fr dispatch.Fire) error { f.record(fr); return nil }, dispatch.Policy{},
		dispatch.Config[dispatch.Schedule]{
			WorkerID: "narrow", PollInterval: 10 * time.Millisecond,
			Due: func(time.Time) dao.Criteria { return dao.Eq(dispatch.ColKey, "mine") },
		})
	stop := runWorker(t, w.Run)
	waitFired(t, store, 1, "the worker's own schedule fired")
	time.Sleep(20 * 10 * time.Millisecond)
	stop()
	if s := get(t, sc, "theirs"); f.count("theirs") != 0 || s.Status != dispatch.StatusActive || s.FailureCount != 0 || s.LeaseOwner != "" {
		t.Errorf("schedule outside the worker's Due: fired %d times, %+v", f.count("theirs"), s)
	}
}
