package dispatch_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// task is the row of the wake and pause tests.
type task struct {
	ID         int64 `gorm:"primaryKey"`
	Done       bool
	LeaseOwner string `gorm:"size:191"`
	LeaseUntil *time.Time
}

// taskWorker returns a worker over a memory store of tasks with a tick of
// tick, whose handler counts its runs and marks the task done.
func taskWorker(t *testing.T, tick time.Duration, paused func() bool) (*dao.Table[task], *dispatch.Worker[task], *atomic.Int64) {
	t.Helper()
	store, err := memstore.New[task]()
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	w, err := dispatch.New(dispatch.Config[task]{
		Store: store, KeyField: "id", Key: func(r *task) any { return r.ID },
		Due:          func(time.Time) dao.Criteria { return dao.Eq("done", false) },
		Handler:      func(context.Context, *dispatch.Job[task]) dao.Set { ran.Add(1); return dao.Set{"done": true} },
		PollInterval: tick, Lease: 10 * tick, Concurrency: 4, Paused: paused,
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, w, &ran
}

// A row added to an idle worker whose tick is an hour runs once Wake is
// called, without waiting for the tick.
func TestWakeClaimsBeforeTheTick(t *testing.T) {
	store, w, ran := taskWorker(t, time.Hour, nil)
	runWorker(t, w.Run)
	waitFor(t, 5*time.Second, "the first claim of an empty table", func() bool { return w.Stats().Claimed == 0 })
	time.Sleep(50 * time.Millisecond)
	if err := store.Create(context.Background(), &task{ID: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if ran.Load() != 0 {
		t.Fatalf("the row ran before Wake, with an hour's tick")
	}
	w.Wake()
	waitFor(t, 5*time.Second, "the row to run after Wake", func() bool { return ran.Load() == 1 })
}

// While Paused says so the worker claims nothing, also when woken; once
// it no longer does, the next tick claims.
func TestPausedClaimsNothing(t *testing.T) {
	var paused atomic.Bool
	paused.Store(true)
	store, w, ran := taskWorker(t, 20*time.Millisecond, paused.Load)
	if err := store.Create(context.Background(), &task{ID: 1}, &task{ID: 2}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w.Run)
	w.Wake()
	time.Sleep(200 * time.Millisecond)
	if n := ran.Load(); n != 0 || w.Stats().Claimed != 0 {
		t.Fatalf("a paused worker ran %d rows, claimed %d", n, w.Stats().Claimed)
	}
	paused.Store(false)
	waitFor(t, 5*time.Second, "both rows to run after the pause", func() bool { return ran.Load() == 2 })
}

// Handler goroutines are reused across rows and end when Run returns:
// after a run of 500 rows, the goroutine count is back to what it was.
// The tick is 100 ms, so that the lease (ten ticks) outlasts a handler
// held up by a loaded machine: a lease lost would run a row twice.
func TestHandlerGoroutinesEndWithRun(t *testing.T) {
	before := runtime.NumGoroutine()
	store, w, ran := taskWorker(t, 100*time.Millisecond, nil)
	for i := range 500 {
		if err := store.Create(context.Background(), &task{ID: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	stop := runWorker(t, w.Run)
	waitFor(t, time.Minute, "500 rows to run", func() bool { return ran.Load() == 500 })
	stop()
	waitFor(t, 5*time.Second, "the worker's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	if n := ran.Load(); n != 500 {
		t.Errorf("%d runs of 500 rows", n)
	}
}
