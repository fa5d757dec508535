package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
)

// Names of the jobs group's checks that [JobsHarness.Skip] accepts.
const (
	// CheckJobsTx is the transactional insert check; it needs
	// JobStores.Begin.
	CheckJobsTx = "Jobs/Tx"
	// CheckJobsPeriodic is the periodic job check; it needs
	// JobStores.Schedules.
	CheckJobsPeriodic = "Jobs/Periodic"
	// CheckJobsProcesses are the multi-process checks; they need
	// JobsHarness.Setup and Open.
	CheckJobsProcesses = "Jobs/Processes"
)

// JobStores are the stores of one job queue.
type JobStores struct {
	// Jobs is a store of the job table, migrated by jobs.Migrate.
	Jobs dao.Store[jobs.Row]
	// Queues is a store of the queue table, migrated by jobs.Migrate.
	Queues dao.Store[jobs.Queue]
	// Schedules, optional, is a store of a schedule table of its own
	// (dispatch.MigrateScheduleStore) for the periodic job check.
	Schedules dao.Store[dispatch.Schedule]
	// Begin, optional, opens a transaction on the job table's database
	// and returns it as the jobs client's InsertTx takes it (a *gorm.DB
	// for the SQL backends), with its commit and rollback.
	Begin func(t *testing.T) (tx any, commit, rollback func() error)
}

// JobsHarness connects the jobs group to one backend.
type JobsHarness struct {
	// NewStores returns stores over fresh, empty, migrated tables,
	// removed when t finishes. Required.
	NewStores func(t *testing.T) JobStores
	// Setup, optional, creates fresh migrated tables that several
	// processes can open (on a database server or file), removed when t
	// finishes, and returns a target string naming them; Open, in this
	// process and in child processes (the same test binary run again),
	// opens stores over them. Both are needed for [CheckJobsProcesses].
	Setup func(t *testing.T) (target string)
	Open  func(t *testing.T, target string) JobStores
	// Skip opts out of checks by name: [CheckJobsTx], [CheckJobsPeriodic],
	// [CheckJobsProcesses]. A check that lacks what it needs fails unless
	// Skip names it.
	Skip []string
}

// RunJobs runs the jobs group against the backend of h, as subtests of t
// named "Jobs/...": every check goes through package jobs' public API
// over the harness's stores:
//
//   - Lifecycle: an inserted job runs once with its args decoded and ends
//     completed, attempt 1, finalized, lease released.
//   - Retry: a failing job follows its backoff, keeps each attempt's
//     error in order, and completes; one that always fails is discarded
//     after MaxAttempts with every error; a panic is recorded with its
//     stack; a job past its timeout fails with jobs.ErrTimeout.
//   - UnknownKind: a job whose kind has no worker is discarded, its error
//     naming the kind.
//   - Snooze: a snoozed job runs again later without spending an attempt.
//   - Cancel: a queued job cancelled never runs; a running one has its
//     context cancelled (cause jobs.ErrCancelled) and ends cancelled; a
//     work function's jobs.Cancel ends it cancelled.
//   - Unique: 8 concurrent inserts of one unique job leave one row, and
//     every insert returns it; a unique job that left its unique states
//     lets a new one in; unique by period.
//   - Tx: a job inserted in a rolled-back transaction does not exist; one
//     committed runs.
//   - Pause: a paused queue runs nothing, within a tick, until resumed.
//   - Rescue: a job whose worker died on its last attempt is discarded by
//     the rescuer; one with attempts left runs again, the lost attempt
//     recorded.
//   - Retention: final jobs past their retention are deleted, younger
//     ones and unfinished ones kept.
//   - Periodic: a periodic job is inserted once per occurrence by two
//     clients.
//   - Processes: three processes run every job exactly once; a process
//     killed (SIGKILL) while running jobs has them run again by another,
//     and its last-attempt job discarded.
func RunJobs(t *testing.T, h JobsHarness) {
	t.Helper()
	if h.NewStores == nil {
		t.Fatal("conformance: JobsHarness.NewStores is nil")
	}
	for _, name := range h.Skip {
		if !slices.Contains([]string{CheckJobsTx, CheckJobsPeriodic, CheckJobsProcesses}, name) {
			t.Fatalf("conformance: JobsHarness.Skip names %q, not a check of the jobs group", name)
		}
	}
	t.Run("Jobs", func(t *testing.T) {
		t.Run("Lifecycle", func(t *testing.T) { testJobLifecycle(t, h) })
		t.Run("Retry", func(t *testing.T) { testJobRetry(t, h) })
		t.Run("UnknownKind", func(t *testing.T) { testJobUnknownKind(t, h) })
		t.Run("Snooze", func(t *testing.T) { testJobSnooze(t, h) })
		t.Run("Cancel", func(t *testing.T) { testJobCancel(t, h) })
		t.Run("Unique", func(t *testing.T) { testJobUnique(t, h) })
		t.Run("Tx", func(t *testing.T) { testJobTx(t, h) })
		t.Run("Pause", func(t *testing.T) { testJobPause(t, h) })
		t.Run("Rescue", func(t *testing.T) { testJobRescue(t, h) })
		t.Run("Drain", func(t *testing.T) { testJobDrain(t, h) })
		t.Run("Retention", func(t *testing.T) { testJobRetention(t, h) })
		t.Run("Periodic", func(t *testing.T) { testJobPeriodic(t, h) })
		t.Run("Processes", func(t *testing.T) { testJobProcesses(t, h) })
	})
}

// skipOrFail ends a check that lacks field: skipped when h.Skip names
// check, failed otherwise.
func (h JobsHarness) skipOrFail(t *testing.T, check, field string) {
	t.Helper()
	if slices.Contains(h.Skip, check) {
		t.Skipf("%s is not given and JobsHarness.Skip names %q", field, check)
	}
	t.Fatalf("%s is not given, so %s cannot run: give it, or name %q in JobsHarness.Skip", field, check, check)
}

// Test args types of the jobs group. Their kinds are the type names.

// NoteArgs is the args of a job that records its run; Fail makes the
// first Fail attempts fail, Mode selects other behaviours: "panic",
// "block" (until the context ends), "snooze" (snoozes on its first
// attempt), "cancel" (returns jobs.Cancel).
type NoteArgs struct {
	N    int    `json:"n"`
	Text string `json:"text,omitempty"`
	Fail int    `json:"fail,omitempty"`
	Mode string `json:"mode,omitempty"`
}

// Kind returns "conformance_note".
func (NoteArgs) Kind() string { return "conformance_note" }

// orphanArgs is the args of a kind no worker is registered for.
type orphanArgs struct{}

func (orphanArgs) Kind() string { return "conformance_orphan" }

// noteLog records the runs of note jobs.
type noteLog struct {
	mu     sync.Mutex
	runs   map[int64][]int // job id -> attempts run
	ctxErr map[int64]error // job id -> context cause at return
	start  chan int64      // receives job ids as they start
}

func newNoteLog() *noteLog {
	return &noteLog{runs: map[int64][]int{}, ctxErr: map[int64]error{}, start: make(chan int64, 1000)}
}

func (l *noteLog) attempts(id int64) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs[id])
}

// noteWorker returns the worker of NoteArgs recording into l.
func noteWorker(l *noteLog) jobs.Worker[NoteArgs] {
	return jobs.WorkFunc[NoteArgs](func(ctx context.Context, j *jobs.Job[NoteArgs]) error {
		l.mu.Lock()
		l.runs[j.ID] = append(l.runs[j.ID], j.Attempt)
		first := len(l.runs[j.ID]) == 1
		l.mu.Unlock()
		select {
		case l.start <- j.ID:
		default:
		}
		switch j.Args.Mode {
		case "panic":
			panic(fmt.Sprintf("note %d panics", j.Args.N))
		case "block":
			<-ctx.Done()
			l.mu.Lock()
			l.ctxErr[j.ID] = context.Cause(ctx)
			l.mu.Unlock()
			return ctx.Err()
		case "snooze":
			if first {
				return jobs.Snooze(100 * time.Millisecond)
			}
		case "cancel":
			return jobs.Cancel(errors.New("note asks to be cancelled"))
		}
		if j.Attempt <= j.Args.Fail {
			return fmt.Errorf("note %d attempt %d fails", j.Args.N, j.Attempt)
		}
		return nil
	})
}

// jobsTick is the tick of the group's clients: their queues poll, read
// pauses and cancel requests, and run the scheduler this often.
const jobsTick = 50 * time.Millisecond

// jobClient is a running client of the group.
type jobClient struct {
	*jobs.Client
	log  *noteLog
	stop func()
}

// startJobs starts a client over st running the default queue with the
// note worker (and mod's changes to its config), stopped at t's cleanup.
func startJobs(t *testing.T, st JobStores, mod func(*jobs.Config, *jobs.Workers)) *jobClient {
	t.Helper()
	log := newNoteLog()
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, noteWorker(log), jobs.WithBackoff(func(int) time.Duration { return 100 * time.Millisecond })); err != nil {
		t.Fatal(err)
	}
	cfg := jobs.Config{
		Store: st.Jobs, QueueStore: st.Queues, Workers: ws,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 20}},
		Tick:   jobsTick, Lease: 5 * time.Second, DrainTimeout: 2 * time.Second,
	}
	if mod != nil {
		mod(&cfg, ws)
	}
	c, err := jobs.NewClient(cfg)
	if err != nil {
		t.Fatalf("jobs.NewClient: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	jc := &jobClient{Client: c, log: log}
	jc.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("jobs client Run: %v", err)
			}
		})
	}
	t.Cleanup(jc.stop)
	return jc
}

// newJobClient returns a client over st that runs no queue (insert and
// manage only).
func newJobClient(t *testing.T, st JobStores) *jobs.Client {
	t.Helper()
	c, err := jobs.NewClient(jobs.Config{Store: st.Jobs, QueueStore: st.Queues, Tick: jobsTick})
	if err != nil {
		t.Fatalf("jobs.NewClient: %v", err)
	}
	return c
}

// waitJob waits up to timeout for job id to satisfy ok and returns it;
// it fails t with the job's last state otherwise.
func waitJob(t *testing.T, c *jobs.Client, id int64, timeout time.Duration, what string, ok func(*jobs.Row) bool) *jobs.Row {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: not %s within %v: state %s, attempt %d, errors %s", id, what, timeout, r.State, r.Attempt, r.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inState returns a waitJob condition: the job is in state s.
func inState(s jobs.State) func(*jobs.Row) bool {
	return func(r *jobs.Row) bool { return r.State == s }
}

// insert inserts one job and fails t on error.
func insert(t *testing.T, c *jobs.Client, args jobs.Args, opts *jobs.InsertOpts) *jobs.Row {
	t.Helper()
	res, err := c.Insert(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("insert %T: %v", args, err)
	}
	return res.Job
}

// attemptErrors returns the job's attempt errors and fails t if they do
// not parse.
func attemptErrors(t *testing.T, r *jobs.Row) []jobs.AttemptError {
	t.Helper()
	errs, err := r.AttemptErrors()
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

func testJobLifecycle(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	want := NoteArgs{N: 7, Text: "héllo \"quoted\" <b>"}
	j := insert(t, c.Client, want, &jobs.InsertOpts{Tags: []string{"a", "b-c"}, Metadata: []byte(`{"k": 1}`)})
	if j.ID == 0 || j.State != jobs.StateAvailable || j.Attempt != 0 || j.Kind != want.Kind() || j.Queue != jobs.DefaultQueue {
		t.Fatalf("inserted job: %+v", *j)
	}
	got := waitJob(t, c.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if runs := c.log.attempts(j.ID); !slices.Equal(runs, []int{1}) {
		t.Errorf("job %d ran attempts %v, want [1]", j.ID, runs)
	}
	// A job scheduled in the past is available and keeps its time, which
	// orders it among the available jobs.
	past := time.Now().Add(-time.Hour).UTC()
	early := insert(t, c.Client, NoteArgs{N: 9}, &jobs.InsertOpts{ScheduledAt: past})
	if d := early.ScheduledAt.Sub(past); early.State != jobs.StateAvailable || d < -time.Second || d > time.Second {
		t.Errorf("job scheduled an hour ago: state %s, scheduled at %v, want available at %v", early.State, early.ScheduledAt, past)
	}
	waitJob(t, c.Client, early.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	// A job scheduled a second ahead waits, then the scheduler makes it
	// available and it runs.
	at := time.Now().Add(time.Second)
	later := insert(t, c.Client, NoteArgs{N: 8}, &jobs.InsertOpts{ScheduledAt: at})
	if later.State != jobs.StateScheduled {
		t.Errorf("job scheduled a second ahead is %s, want scheduled", later.State)
	}
	done := waitJob(t, c.Client, later.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if done.AttemptedAt == nil || done.AttemptedAt.Before(at.Add(-100*time.Millisecond)) {
		t.Errorf("scheduled job started at %v, before its time %v", done.AttemptedAt, at)
	}
	if got.Attempt != 1 || got.FinalizedAt == nil || got.AttemptedAt == nil || got.LeaseOwner != "" || got.Errors != "" {
		t.Errorf("completed job: %+v", *got)
	}
	if got.EncodedArgs != `{"n":7,"text":"héllo \"quoted\" \u003cb\u003e"}` {
		t.Errorf("stored args %s", got.EncodedArgs)
	}
	if tags := got.TagList(); !slices.Equal(tags, []string{"a", "b-c"}) || got.Metadata != `{"k":1}` {
		t.Errorf("tags %v metadata %s", tags, got.Metadata)
	}
	// Bad input changes nothing.
	for name, tc := range map[string]struct {
		args jobs.Args
		opts *jobs.InsertOpts
	}{
		"priority":     {NoteArgs{}, &jobs.InsertOpts{Priority: jobs.MaxPriority + 1}},
		"queue":        {NoteArgs{}, &jobs.InsertOpts{Queue: "bad queue"}},
		"max attempts": {NoteArgs{}, &jobs.InsertOpts{MaxAttempts: -1}},
		"metadata":     {NoteArgs{}, &jobs.InsertOpts{Metadata: []byte(`[1]`)}},
		"tag":          {NoteArgs{}, &jobs.InsertOpts{Tags: []string{""}}},
		"unique state": {NoteArgs{}, &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByState: []jobs.State{jobs.StateCompleted}}}},
		"nil args":     {nil, nil},
	} {
		if _, err := c.Insert(context.Background(), tc.args, tc.opts); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("insert with a bad %s: %v, want dao.ErrInvalidArgument", name, err)
		}
	}
	if n, err := st.Jobs.Count(context.Background(), dao.Criteria{}); err != nil || n != 3 {
		t.Errorf("%d jobs after the bad inserts (%v), want the 3 inserted before them", n, err)
	}
}

func testJobRetry(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		timed := jobs.WorkFunc[timeoutArgs](func(ctx context.Context, j *jobs.Job[timeoutArgs]) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if err := jobs.AddWorker(ws, timed, jobs.WithTimeout(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	})
	flaky := insert(t, c.Client, NoteArgs{N: 1, Fail: 2}, nil)
	doomed := insert(t, c.Client, NoteArgs{N: 2, Fail: 100}, &jobs.InsertOpts{MaxAttempts: 3})
	panicky := insert(t, c.Client, NoteArgs{N: 3, Mode: "panic"}, &jobs.InsertOpts{MaxAttempts: 1})
	slow := insert(t, c.Client, timeoutArgs{}, &jobs.InsertOpts{MaxAttempts: 1})

	got := waitJob(t, c.Client, flaky.ID, 60*time.Second, "completed", inState(jobs.StateCompleted))
	errs := attemptErrors(t, got)
	if got.Attempt != 3 || len(errs) != 2 || errs[0].Attempt != 1 || errs[1].Attempt != 2 ||
		!strings.Contains(errs[0].Error, "attempt 1 fails") || !strings.Contains(errs[1].Error, "attempt 2 fails") {
		t.Errorf("flaky job: attempt %d, errors %+v", got.Attempt, errs)
	}
	if runs := c.log.attempts(flaky.ID); !slices.Equal(runs, []int{1, 2, 3}) {
		t.Errorf("flaky job ran attempts %v, want [1 2 3]", runs)
	}
	if !errs[1].At.After(errs[0].At) {
		t.Errorf("attempt errors out of order: %+v", errs)
	}
	got = waitJob(t, c.Client, doomed.ID, 60*time.Second, "discarded", inState(jobs.StateDiscarded))
	if errs := attemptErrors(t, got); got.Attempt != 3 || len(errs) != 3 || got.FinalizedAt == nil {
		t.Errorf("doomed job: attempt %d, errors %+v", got.Attempt, errs)
	}
	got = waitJob(t, c.Client, panicky.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))
	if errs := attemptErrors(t, got); len(errs) != 1 || !strings.Contains(errs[0].Error, "note 3 panics") || !strings.Contains(errs[0].Trace, "goroutine") {
		t.Errorf("panicking job's errors: %+v", errs)
	}
	got = waitJob(t, c.Client, slow.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))
	if errs := attemptErrors(t, got); len(errs) != 1 || !strings.Contains(errs[0].Error, jobs.ErrTimeout.Error()) {
		t.Errorf("timed-out job's errors: %+v", errs)
	}
}

// timeoutArgs is the args of a job that outlives its kind's timeout.
type timeoutArgs struct{}

func (timeoutArgs) Kind() string { return "conformance_timeout" }

func testJobUnknownKind(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	j := insert(t, c.Client, orphanArgs{}, nil)
	got := waitJob(t, c.Client, j.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))
	errs := attemptErrors(t, got)
	if len(errs) != 1 || !strings.Contains(errs[0].Error, "conformance_orphan") || !strings.Contains(errs[0].Error, jobs.ErrUnknownKind.Error()) {
		t.Errorf("orphan job's errors: %+v", errs)
	}
}

func testJobSnooze(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	j := insert(t, c.Client, NoteArgs{N: 1, Mode: "snooze"}, nil)
	got := waitJob(t, c.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if runs := c.log.attempts(j.ID); !slices.Equal(runs, []int{1, 1}) {
		t.Errorf("snoozed job ran attempts %v, want [1 1]: a snooze spends no attempt", runs)
	}
	if got.Attempt != 1 || got.Errors != "" {
		t.Errorf("snoozed job: attempt %d errors %q", got.Attempt, got.Errors)
	}
}

func testJobCancel(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	ctx := context.Background()
	// A queued job: scheduled in an hour, cancelled before it runs.
	queued := insert(t, c.Client, NoteArgs{N: 1}, &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	if queued.State != jobs.StateScheduled {
		t.Fatalf("job scheduled in an hour is %s", queued.State)
	}
	r, err := c.Cancel(ctx, queued.ID)
	if err != nil || r.State != jobs.StateCancelled || r.FinalizedAt == nil {
		t.Fatalf("cancel a scheduled job: %+v, %v", r, err)
	}
	if again, err := c.Cancel(ctx, queued.ID); err != nil || again.State != jobs.StateCancelled || !again.FinalizedAt.Equal(*r.FinalizedAt) {
		t.Fatalf("cancel of a cancelled job: %+v, %v; want it unchanged", again, err)
	}
	// A running job: blocks until its context ends.
	running := insert(t, c.Client, NoteArgs{N: 2, Mode: "block"}, nil)
	waitJob(t, c.Client, running.ID, 30*time.Second, "running", inState(jobs.StateRunning))
	asked := time.Now()
	if r, err := c.Cancel(ctx, running.ID); err != nil || r.State != jobs.StateRunning || r.CancelRequestedAt == nil {
		t.Fatalf("cancel a running job: %+v, %v", r, err)
	}
	got := waitJob(t, c.Client, running.ID, 30*time.Second, "cancelled", inState(jobs.StateCancelled))
	t.Logf("running job cancelled %v after the request (tick %v)", time.Since(asked).Round(time.Millisecond), jobsTick)
	c.log.mu.Lock()
	cause := c.log.ctxErr[running.ID]
	c.log.mu.Unlock()
	if !errors.Is(cause, jobs.ErrCancelled) {
		t.Errorf("cancelled job's context cause: %v, want jobs.ErrCancelled", cause)
	}
	if got.Attempt != 1 {
		t.Errorf("cancelled job's attempt %d", got.Attempt)
	}
	// A job that cancels itself.
	self := insert(t, c.Client, NoteArgs{N: 3, Mode: "cancel"}, nil)
	got = waitJob(t, c.Client, self.ID, 30*time.Second, "cancelled", inState(jobs.StateCancelled))
	if errs := attemptErrors(t, got); len(errs) != 1 || !strings.Contains(errs[0].Error, "asks to be cancelled") {
		t.Errorf("self-cancelled job's errors: %+v", errs)
	}
	time.Sleep(5 * jobsTick)
	if runs := c.log.attempts(queued.ID); len(runs) != 0 {
		t.Errorf("cancelled queued job ran attempts %v", runs)
	}
	if _, err := c.Cancel(ctx, 1<<40); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("cancel of a missing job: %v, want dao.ErrNotFound", err)
	}
}

func testJobUnique(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := newJobClient(t, st)
	ctx := context.Background()
	opts := &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}}
	const inserters = 8
	var wg sync.WaitGroup
	results := make([]*jobs.InsertResult, inserters)
	errs := make([]error, inserters)
	for i := range inserters {
		wg.Go(func() { results[i], errs[i] = c.Insert(ctx, NoteArgs{N: 1}, opts) })
	}
	wg.Wait()
	var dups int
	for i := range inserters {
		if errs[i] != nil {
			t.Fatalf("concurrent unique insert %d: %v", i, errs[i])
		}
		if results[i].Job.ID != results[0].Job.ID {
			t.Errorf("unique insert %d returned job %d, insert 0 job %d", i, results[i].Job.ID, results[0].Job.ID)
		}
		if results[i].UniqueSkippedAsDuplicate {
			dups++
		}
	}
	n, err := st.Jobs.Count(ctx, dao.Eq(jobs.ColKind, NoteArgs{}.Kind()))
	t.Logf("%d concurrent unique inserts: %d rows, %d reported duplicates", inserters, n, dups)
	if err != nil || n != 1 || dups != inserters-1 {
		t.Fatalf("%d concurrent unique inserts left %d rows (%v) with %d duplicates reported, want 1 row and %d", inserters, n, err, dups, inserters-1)
	}
	// Other args are another job.
	if r, err := c.Insert(ctx, NoteArgs{N: 2}, opts); err != nil || r.UniqueSkippedAsDuplicate {
		t.Errorf("unique insert with other args: %+v %v", r, err)
	}
	// Unique in the waiting states only: once cancelled, a new one goes in.
	waiting := &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true, ByState: []jobs.State{jobs.StateAvailable, jobs.StateScheduled, jobs.StateRunning, jobs.StateRetryable}}}
	first, err := c.Insert(ctx, NoteArgs{N: 3}, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Insert(ctx, NoteArgs{N: 3}, waiting); err != nil || !r.UniqueSkippedAsDuplicate || r.Job.ID != first.Job.ID {
		t.Fatalf("second insert while the first waits: %+v %v", r, err)
	}
	if _, err := c.Cancel(ctx, first.Job.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Insert(ctx, NoteArgs{N: 3}, waiting); err != nil || r.UniqueSkippedAsDuplicate {
		t.Errorf("insert after the holder was cancelled: %+v %v", r, err)
	}
	// Unique by period: two in one hour are one job, the next hour another.
	hour := time.Now().Add(2 * time.Hour).Truncate(time.Hour)
	byPeriod := func(at time.Time) *jobs.InsertOpts {
		return &jobs.InsertOpts{ScheduledAt: at, UniqueOpts: jobs.UniqueOpts{ByPeriod: time.Hour}}
	}
	a, err1 := c.Insert(ctx, NoteArgs{N: 10}, byPeriod(hour.Add(time.Minute)))
	b, err2 := c.Insert(ctx, NoteArgs{N: 11}, byPeriod(hour.Add(50*time.Minute)))
	d, err3 := c.Insert(ctx, NoteArgs{N: 12}, byPeriod(hour.Add(70*time.Minute)))
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if a.UniqueSkippedAsDuplicate || !b.UniqueSkippedAsDuplicate || b.Job.ID != a.Job.ID || d.UniqueSkippedAsDuplicate {
		t.Errorf("unique by period: %+v %+v %+v", a, b, d)
	}
}

func testJobTx(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Begin == nil {
		h.skipOrFail(t, CheckJobsTx, "JobStores.Begin")
	}
	c := startJobs(t, st, nil)
	ctx := context.Background()
	tx, _, rollback := st.Begin(t)
	res, err := c.InsertTx(ctx, tx, NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, res.Job.ID); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("job of a rolled-back transaction: %v, want dao.ErrNotFound", err)
	}
	tx, commit, _ := st.Begin(t)
	res, err = c.InsertTx(ctx, tx, NoteArgs{N: 2}, &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c.Client, res.Job.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
}

func testJobPause(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	admin := newJobClient(t, st)
	ctx := context.Background()
	if err := admin.PauseQueue(ctx, jobs.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * jobsTick) // every client reads pauses each tick
	j := insert(t, c.Client, NoteArgs{N: 1}, nil)
	time.Sleep(10 * jobsTick)
	if runs := c.log.attempts(j.ID); len(runs) != 0 {
		t.Fatalf("a job of a paused queue ran (attempts %v)", runs)
	}
	qs, err := admin.Queues(ctx)
	if err != nil || len(qs) != 1 || !qs[0].Paused {
		t.Errorf("queues while paused: %+v %v", qs, err)
	}
	if err := admin.ResumeQueue(ctx, jobs.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if err := admin.PauseQueue(ctx, "bad queue"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("pause of a bad queue name: %v", err)
	}
}

func testJobRescue(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	admin := newJobClient(t, st)
	ctx := context.Background()
	// Two jobs a dead worker left: claimed (attempt counted, lease owner
	// set), their lease ended. One has attempts left, one does not.
	left := insert(t, admin, NoteArgs{N: 1}, &jobs.InsertOpts{MaxAttempts: 3})
	last := insert(t, admin, NoteArgs{N: 2}, &jobs.InsertOpts{MaxAttempts: 1})
	ended := time.Now().Add(-time.Minute).UTC()
	for _, id := range []int64{left.ID, last.ID} {
		n, err := st.Jobs.Update(ctx, dao.Eq(jobs.ColID, id), dao.Set{jobs.ColAttempt: 1, jobs.ColLeaseOwner: "dead-worker#1", jobs.ColLeaseUntil: ended, jobs.ColAttemptedAt: ended})
		if err != nil || n != 1 {
			t.Fatalf("leave job %d as a dead worker would: %d, %v", id, n, err)
		}
	}
	if n, err := admin.Rescue(ctx); err != nil || n != 1 {
		t.Fatalf("rescue: %d jobs, %v; want 1 (the one on its last attempt)", n, err)
	}
	got := waitJob(t, admin, last.ID, time.Second, "discarded", inState(jobs.StateDiscarded))
	if errs := attemptErrors(t, got); len(errs) != 1 || errs[0].Attempt != 1 || !strings.Contains(errs[0].Error, "lost") {
		t.Errorf("rescued job's errors: %+v", errs)
	}
	c := startJobs(t, st, nil)
	got = waitJob(t, c.Client, left.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	errs := attemptErrors(t, got)
	if got.Attempt != 2 || len(errs) != 1 || errs[0].Attempt != 1 || !strings.Contains(errs[0].Error, "lost") {
		t.Errorf("job run again after its worker died: attempt %d, errors %+v", got.Attempt, errs)
	}
	if runs := c.log.attempts(left.ID); !slices.Equal(runs, []int{2}) {
		t.Errorf("job run again ran attempts %v, want [2]", runs)
	}
}

// testJobDrain stops a client while a job runs past the drain timeout:
// the job's context ends with the drain's cause, the job is released
// available without spending its attempt or recording an error, and the
// next client runs it at once as the same attempt.
func testJobDrain(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	drain := func(cfg *jobs.Config, _ *jobs.Workers) { cfg.DrainTimeout = 100 * time.Millisecond }
	c := startJobs(t, st, drain)
	j := insert(t, c.Client, NoteArgs{N: 1, Mode: "block"}, nil)
	waitJob(t, c.Client, j.ID, 30*time.Second, "running", inState(jobs.StateRunning))
	c.stop()
	c.log.mu.Lock()
	cause := c.log.ctxErr[j.ID]
	c.log.mu.Unlock()
	if !errors.Is(cause, dispatch.ErrDrained) {
		t.Errorf("drained job's context cause: %v, want dispatch.ErrDrained", cause)
	}
	admin := newJobClient(t, st)
	got, err := admin.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != jobs.StateAvailable || got.Attempt != 0 || got.Errors != "" || got.LeaseOwner != "" {
		t.Fatalf("drained job: state %s, attempt %d, errors %q, lease owner %q; want available, attempt 0, no error, no owner",
			got.State, got.Attempt, got.Errors, got.LeaseOwner)
	}
	next := startJobs(t, st, drain)
	select {
	case id := <-next.log.start:
		if id != j.ID {
			t.Fatalf("next client started job %d, want %d", id, j.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the drained job did not run again on the next client within 30 s")
	}
	if runs := next.log.attempts(j.ID); !slices.Equal(runs, []int{1}) {
		t.Errorf("drained job ran again as attempts %v, want [1]", runs)
	}
}

func testJobRetention(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	ctx := context.Background()
	c, err := jobs.NewClient(jobs.Config{Store: st.Jobs, QueueStore: st.Queues, CompletedRetention: time.Hour, DiscardedRetention: -1})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour).UTC()
	young := time.Now().Add(-time.Minute).UTC()
	type jobCase struct {
		state     jobs.State
		finalized *time.Time
		kept      bool
	}
	cases := []jobCase{
		{jobs.StateCompleted, &old, false},
		{jobs.StateCompleted, &young, true},
		{jobs.StateCancelled, &old, true}, // default retention: a day
		{jobs.StateDiscarded, &old, true}, // kept forever
		{jobs.StateAvailable, nil, true},
	}
	ids := make([]int64, len(cases))
	for i, jc := range cases {
		j := insert(t, c, NoteArgs{N: i}, nil)
		ids[i] = j.ID
		set := dao.Set{jobs.ColState: string(jc.state)}
		if jc.finalized != nil {
			set[jobs.ColFinalizedAt] = *jc.finalized
		}
		if _, err := st.Jobs.Update(ctx, dao.Eq(jobs.ColID, j.ID), set); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.Sweep(ctx)
	if err != nil || n != 1 {
		t.Errorf("sweep deleted %d (%v), want 1", n, err)
	}
	for i, jc := range cases {
		_, err := c.Get(ctx, ids[i])
		if kept := err == nil; kept != jc.kept {
			t.Errorf("%s job finalized at %v: kept %v (%v), want %v", jc.state, jc.finalized, kept, err, jc.kept)
		}
	}
}

// periodicArgs is the args of the periodic check's job.
type periodicArgs struct{}

func (periodicArgs) Kind() string { return "conformance_periodic" }

func testJobPeriodic(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Schedules == nil {
		h.skipOrFail(t, CheckJobsPeriodic, "JobStores.Schedules")
	}
	var ran atomic.Int64
	mod := func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.ScheduleStore = st.Schedules
		cfg.Periodic = []jobs.PeriodicJob{{
			Key: "every-second", Cron: "* * * * * *",
			Construct: func() (jobs.Args, *jobs.InsertOpts) { return periodicArgs{}, nil },
		}}
		if err := jobs.AddWorker(ws, jobs.WorkFunc[periodicArgs](func(context.Context, *jobs.Job[periodicArgs]) error {
			ran.Add(1)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	a := startJobs(t, st, mod)
	b := startJobs(t, st, mod)
	kind := dao.Eq(jobs.ColKind, periodicArgs{}.Kind())
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := st.Jobs.Count(context.Background(), kind)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d periodic jobs after a minute of a per-second periodic job", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.stop()
	b.stop()
	rows, err := st.Jobs.Find(context.Background(), dao.Query{Where: kind})
	if err != nil {
		t.Fatal(err)
	}
	occurrences := map[time.Time]int64{}
	for _, r := range rows {
		var m jobs.PeriodicMetadata
		if err := json.Unmarshal([]byte(r.Metadata), &m); err != nil || m.Periodic != "every-second" {
			t.Errorf("periodic job %d's metadata %q: %v", r.ID, r.Metadata, err)
			continue
		}
		if !m.Occurrence.Equal(m.Occurrence.Truncate(time.Second)) {
			t.Errorf("periodic job %d is for %v, not an occurrence of a per-second cron", r.ID, m.Occurrence)
		}
		if other, dup := occurrences[m.Occurrence]; dup {
			t.Errorf("jobs %d and %d are for the same occurrence %v", other, r.ID, m.Occurrence)
		}
		occurrences[m.Occurrence] = r.ID
	}
	t.Logf("two clients of a per-second periodic job: %d jobs, %d distinct occurrences, %d runs", len(rows), len(occurrences), ran.Load())
}
