package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
)

// testJobStop checks Stop and StopAndCancel. With a drain timeout far
// longer than the test, StopAndCancel cancels a blocked job's work at
// once (cause dispatch.ErrDrained), releases it with its attempt given
// back and returns once Run has returned; Stop lets a short job finish
// and writes its completion before it returns.
func testJobStop(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	long := func(cfg *jobs.Config, _ *jobs.Workers) { cfg.DrainTimeout = 10 * time.Minute }
	ctx := context.Background()

	c := startJobs(t, st, long)
	blocked := insert(t, c.Client, NoteArgs{N: 1, Mode: "block"}, nil)
	waitJob(t, c.Client, blocked.ID, 30*time.Second, "running", inState(jobs.StateRunning))
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	began := time.Now()
	if err := c.StopAndCancel(stopCtx); err != nil {
		t.Fatalf("StopAndCancel: %v (after %v)", err, time.Since(began))
	}
	t.Logf("StopAndCancel returned after %v (drain timeout 10 min)", time.Since(began).Round(time.Millisecond))
	c.log.mu.Lock()
	cause := c.log.ctxErr[blocked.ID]
	c.log.mu.Unlock()
	if !errors.Is(cause, dispatch.ErrDrained) {
		t.Errorf("cancelled job's context cause: %v, want dispatch.ErrDrained", cause)
	}
	got, err := newJobClient(t, st).Get(ctx, blocked.ID)
	if err != nil || got.State != jobs.StateAvailable || got.Attempt != 0 || got.LeaseOwner != "" {
		t.Errorf("job whose work StopAndCancel cancelled: %+v, %v; want available, attempt 0, no lease", got, err)
	}
	if err := c.StopAndCancel(stopCtx); err != nil {
		t.Errorf("StopAndCancel of a stopped client: %v", err)
	}

	// Stop waits for the running job and writes its outcome.
	d := startJobs(t, st, long)
	waitJob(t, d.Client, blocked.ID, 30*time.Second, "running again", inState(jobs.StateRunning))
	if _, err := d.Cancel(ctx, blocked.ID); err != nil { // let it end: its context ends within a tick
		t.Fatal(err)
	}
	short := insert(t, d.Client, NoteArgs{N: 2}, &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	if err := d.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got, err := d.Get(ctx, blocked.ID); err != nil || got.State != jobs.StateCancelled {
		t.Errorf("job cancelled while Stop waited: %+v, %v; want its cancellation written before Stop returned", got, err)
	}
	if got, err := d.Get(ctx, short.ID); err != nil || got.State != jobs.StateScheduled {
		t.Errorf("job scheduled later: %+v, %v", got, err)
	}
}

// startArgs is the args of the periodic runtime check's jobs.
type startArgs struct {
	Which string `json:"which"`
}

func (startArgs) Kind() string { return "conformance_periodic_runtime" }

// testJobPeriodicRuntime checks periodic jobs changed while clients run:
// one added to a running client fires at its occurrences; RunOnStart
// inserts one job, marked as a start, when two clients start before the
// next occurrence; one removed from a running client fires no more.
func testJobPeriodicRuntime(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Schedules == nil {
		h.skipOrFail(t, CheckJobsPeriodic, "JobStores.Schedules")
	}
	ctx := context.Background()
	hourly := jobs.PeriodicJob{
		Key: "hourly", Cron: "0 0 * * * *", RunOnStart: true,
		Construct: func() (jobs.Args, *jobs.InsertOpts) { return startArgs{Which: "hourly"}, nil },
	}
	mod := func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.ScheduleStore = st.Schedules
		cfg.Periodic = []jobs.PeriodicJob{hourly}
		if err := jobs.AddWorker(ws, jobs.WorkFunc[startArgs](func(context.Context, *jobs.Job[startArgs]) error { return nil })); err != nil {
			t.Fatal(err)
		}
	}
	a := startJobs(t, st, mod)
	b := startJobs(t, st, mod)
	// which lists the jobs of periodic job w (only its start jobs for
	// "hourly": an hour may turn during the check).
	which := func(w string) []jobs.Row {
		t.Helper()
		md := `{"periodic":"` + w + `"}`
		if w == "hourly" {
			md = `{"periodic":"hourly","start":true}`
		}
		rows, err := a.List(ctx, jobs.ListParams{Kind: startArgs{}.Kind(), Metadata: json.RawMessage(md), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	waitCount := func(w string, atLeast int) []jobs.Row {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			rows := which(w)
			if len(rows) >= atLeast {
				return rows
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d jobs of periodic job %s after 30 s, want at least %d", len(rows), w, atLeast)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitCount("hourly", 1)
	time.Sleep(10 * jobsTick) // both clients have recorded their start
	starts := which("hourly")
	if len(starts) != 1 {
		t.Errorf("%d start jobs of an hourly RunOnStart periodic job after two clients started, want 1", len(starts))
	}
	var md jobs.PeriodicMetadata
	if err := json.Unmarshal([]byte(starts[0].Metadata), &md); err != nil || !md.Start || md.Occurrence.Minute() != 0 || md.Occurrence.Second() != 0 {
		t.Errorf("start job's metadata %s (%v): want a start before the next whole hour", starts[0].Metadata, err)
	}

	// Added while running: fires every second.
	every := jobs.PeriodicJob{
		Key: "added", Cron: "* * * * * *",
		Construct: func() (jobs.Args, *jobs.InsertOpts) { return startArgs{Which: "added"}, nil },
	}
	if err := a.AddPeriodic(ctx, every); err != nil {
		t.Fatal(err)
	}
	if err := a.AddPeriodic(ctx, every); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("adding a periodic job twice: %v, want dao.ErrInvalidArgument", err)
	}
	waitCount("added", 2)

	// Removed while running: no job after the removal has settled.
	if err := a.RemovePeriodic(ctx, "added"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a fire under way when it was removed ends
	n := len(which("added"))
	time.Sleep(2500 * time.Millisecond)
	if m := len(which("added")); m != n {
		t.Errorf("%d jobs of a removed per-second periodic job, %d 2.5 s later; want none added", n, m)
	}
	b.stop()
	a.stop()
}

// testJobQueuesRuntime checks queues added and removed while clients
// run. A queue added to a running client runs its jobs at once, and one
// added to a client that started with no queue too; removed, it drains —
// its blocked job is cancelled after the drain timeout and released with
// its attempt given back — and its later jobs wait for another client,
// while the client's other queues go on. Adding a queue the client runs
// or a bad name is dao.ErrInvalidArgument, removing one it does not run
// dao.ErrNotFound.
func testJobQueuesRuntime(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	ctx := context.Background()
	c := startJobs(t, st, func(cfg *jobs.Config, _ *jobs.Workers) { cfg.DrainTimeout = 200 * time.Millisecond })
	if err := c.AddQueue("later", jobs.QueueConfig{MaxWorkers: 2}); err != nil {
		t.Fatalf("AddQueue to a running client: %v", err)
	}
	first := insert(t, c.Client, NoteArgs{N: 1}, &jobs.InsertOpts{Queue: "later"})
	waitJob(t, c.Client, first.ID, 30*time.Second, "completed in the added queue", inState(jobs.StateCompleted))
	waitQueues(t, c.Client, "the added queue recorded", func(qs []jobs.QueueInfo) bool { return len(qs) == 2 })
	for _, name := range []string{"later", jobs.DefaultQueue, "", "bad name"} {
		if err := c.AddQueue(name, jobs.QueueConfig{}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("AddQueue(%q): %v, want dao.ErrInvalidArgument", name, err)
		}
	}
	if err := c.AddQueue("negative", jobs.QueueConfig{MaxWorkers: -1}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("AddQueue with MaxWorkers -1: %v, want dao.ErrInvalidArgument", err)
	}

	blocked := insert(t, c.Client, NoteArgs{N: 2, Mode: "block"}, &jobs.InsertOpts{Queue: "later", MaxAttempts: 1})
	waitJob(t, c.Client, blocked.ID, 30*time.Second, "running", inState(jobs.StateRunning))
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.RemoveQueue(rctx, "later"); err != nil {
		t.Fatalf("RemoveQueue of a running queue: %v", err)
	}
	c.log.mu.Lock()
	cause := c.log.ctxErr[blocked.ID]
	c.log.mu.Unlock()
	if !errors.Is(cause, dispatch.ErrDrained) {
		t.Errorf("the removed queue's blocked job: context cause %v, want dispatch.ErrDrained", cause)
	}
	if got, err := c.Get(ctx, blocked.ID); err != nil || got.State != jobs.StateAvailable || got.Attempt != 0 || got.LeaseOwner != "" {
		t.Errorf("job drained by RemoveQueue: %+v, %v; want available, attempt 0, no lease", got, err)
	}
	if err := c.RemoveQueue(rctx, "later"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("RemoveQueue of a removed queue: %v, want dao.ErrNotFound", err)
	}
	if _, err := c.Cancel(ctx, blocked.ID); err != nil {
		t.Fatal(err)
	}
	waiting := insert(t, c.Client, NoteArgs{N: 3}, &jobs.InsertOpts{Queue: "later"})
	other := insert(t, c.Client, NoteArgs{N: 4}, nil)
	waitJob(t, c.Client, other.ID, 30*time.Second, "completed in the queue the client still runs", inState(jobs.StateCompleted))
	time.Sleep(10 * jobsTick)
	if runs := c.log.attempts(waiting.ID); len(runs) != 0 {
		t.Errorf("a job of the removed queue ran in the client that removed it: attempts %v", runs)
	}

	// A client that started with no queue runs one added later.
	d := startJobs(t, st, func(cfg *jobs.Config, _ *jobs.Workers) { cfg.Queues = nil })
	time.Sleep(4 * jobsTick)
	if err := d.AddQueue("later", jobs.QueueConfig{}); err != nil {
		t.Fatalf("AddQueue to a running client that started with no queue: %v", err)
	}
	waitJob(t, d.Client, waiting.ID, 30*time.Second, "completed by the client that added its queue", inState(jobs.StateCompleted))
	if runs := d.log.attempts(waiting.ID); len(runs) != 1 {
		t.Errorf("job of the added queue: attempts %v in the client that added it, want one", runs)
	}
}
