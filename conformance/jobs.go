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
	// CheckJobsWake is the wake-up check: a job inserted through another
	// client or by another process starts without waiting for the tick of
	// the client that runs it. A backend without notifications, a change
	// signal or a shared process (package jobs' memory store) names it.
	CheckJobsWake = "Jobs/Wake"
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
	// NotTx, optional with Begin, is a handle of the kind Begin returns
	// that is not inside a transaction (for the SQL backends the
	// *gorm.DB the stores were built on): InsertTx must refuse it.
	NotTx any
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
	// Nodes, optional, are other ways into the same database: for a
	// cluster whose every node takes writes (MariaDB Galera Cluster), one
	// per node other than the one NewStores and Open use. Each returns
	// stores over the tables of st (stores NewStores or Open returned)
	// through its node, creating and dropping nothing. The checks with
	// several clients or processes (Periodic, PeriodicOwn, Wake, Processes)
	// spread them over st's node and these, round robin.
	Nodes []func(t *testing.T, st JobStores) JobStores
	// Skip opts out of checks by name: [CheckJobsTx], [CheckJobsPeriodic],
	// [CheckJobsProcesses], [CheckJobsWake]. A check that lacks what it
	// needs fails unless Skip names it.
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
//   - Timeout: a kind's timeout, shorter or longer than two of the
//     client's ticks, ends the work's context at the timeout with
//     context.DeadlineExceeded, cause jobs.ErrTimeout, and the deadline
//     set.
//   - UnknownKind: an insert of a kind the client has no worker for is
//     refused (jobs.ErrUnknownKind) unless SkipUnknownJobCheck; a job of a
//     kind no running client knows waits, never claimed nor discarded,
//     and Client.UnknownKinds reports it until a client that knows it
//     runs it.
//   - Args: args above the size limit (1 MiB by default, Config.MaxArgsSize)
//     and args or metadata holding text that is not UTF-8 are refused with
//     dao.ErrInvalidArgument, nothing of the call inserted; a NUL in a
//     string comes back intact.
//   - Snooze: a snoozed job runs again later without spending an attempt.
//   - WaitState: a job waiting for its retry reads retryable, a snoozed one
//     scheduled, whatever the wait (within jobs.ScheduleAhead or past
//     it), in Get, List, Count and for unique keys; a short wait still
//     runs when it ends.
//   - Cancel: a queued job cancelled never runs; a running one has its
//     context cancelled (cause jobs.ErrCancelled) and ends cancelled; a
//     work function's jobs.Cancel ends it cancelled.
//   - CancelRequested: a running job whose cancel request its work never
//     saw (a client whose tick is an hour) ends cancelled when its work
//     fails or snoozes, without waiting for a tick or the rescuer and
//     without an "attempt lost" record, and completed when it succeeds.
//   - Unique: 8 concurrent inserts of one unique job leave one row, and
//     every insert returns it; a unique job that left its unique states
//     lets a new one in; unique by period.
//   - Tx: a job inserted in a rolled-back transaction does not exist; one
//     committed runs.
//   - Pause: a paused queue runs nothing, within a tick, until resumed.
//   - PauseUnknown: pausing or resuming a queue with neither a queue row
//     nor a job is dao.ErrNotFound and creates nothing; a queue known by
//     its jobs alone can be paused; "*" pauses and resumes every queue.
//   - Rescue: a job whose worker died on its last attempt is discarded by
//     the rescuer; one with attempts left runs again, the lost attempt
//     recorded; an available job whose attempts are spent and whose lease
//     is free (which no claim takes) is discarded too.
//   - ReleasedClaim: jobs whose claim answered after the lease less two
//     ticks, or after the client began to stop, are released with their
//     attempt given back: a job with one attempt runs and completes, none
//     records an attempt that never started.
//   - Stop: StopAndCancel cancels running work at once and releases its
//     jobs unspent, whatever the drain timeout; Stop waits for running
//     work and its outcomes.
//   - PeriodicRuntime: a periodic job added to a running client fires;
//     RunOnStart inserts one job before the next occurrence however many
//     clients start; a periodic job removed from a running client stops.
//   - Retention: final jobs past their retention are deleted, younger
//     ones and unfinished ones kept.
//   - Periodic: a periodic job is inserted once per occurrence by two
//     clients.
//   - PeriodicOwn: two clients each listing a periodic job the other does
//     not each fire their own and leave the other's schedule alone (it
//     never fails); RemovePeriodic removes a schedule, listed by the
//     client or not.
//   - Events: a subscription receives each job's outcome events once
//     their writes committed, in order, with the job's durations; queue
//     pauses and resumes by another client arrive as queue events.
//   - ErrorHandler: the error handler is told of each failed attempt
//     (error, panic, timeout) and its SetCancelled cancels the job.
//   - Middleware: insert middleware changes what is stored (an invalid
//     change inserts nothing); work middleware nests in order, sees a
//     panic as *jobs.PanicError, and its error decides the outcome.
//   - UniqueFields: a unique key by args holds only the fields tagged
//     `jobs:"unique"` when the args type tags some.
//   - List: random listings (queues, kinds, priorities, id ranges,
//     tags, metadata, each order), paged with keyset cursors, list every
//     job they select once and in order; UpdateMetadata merges keys;
//     DeleteMany deletes exactly what it selects.
//   - Output: RecordOutput's output is written with the outcome into
//     the job's metadata (Row.Output), the last call's, refused over the
//     metadata limit and outside a job's work.
//   - CompleteTx: a job completed in its work's own transaction is
//     completed at commit and not written again; after a rollback it runs
//     again; with its lease lost it is refused (dispatch.ErrLeaseLost).
//   - Processes: three processes run every job exactly once; a process
//     killed (SIGKILL) while running jobs has them run again by another,
//     and its last-attempt job discarded.
//   - Wake: a client whose tick is an hour starts, within 30 s, a job
//     inserted through another client over the same stores, and (with
//     Setup and Open; [CheckJobsProcesses] skips this part) a job this
//     process inserts while another process runs the queue: PostgreSQL's
//     notifications, the change signal of the other SQL backends, or an
//     insert of the same process wake it.
//   - Sequence: 3 clients run 10 sequence keys × 12 jobs, some failing
//     once: per key the jobs start in insertion order (a failed job's
//     retry before the next job), never two at once, each completed
//     once; a discarded or cancelled job holds its sequence unless its
//     options say to continue, and the held sequence goes on once the
//     job is retried or deleted.
//   - Batch: 3 clients finish a batch's last jobs at the same moment; its
//     callback, pending until then, runs once with the counts by final
//     state.
//   - BatchSequenceArgs: bad sequence keys and batches are refused with
//     dao.ErrInvalidArgument and insert nothing.
//   - Workflow: a diamond of tasks runs in dependency order (each task
//     starts after its dependencies ended) with their outputs passed
//     along; a cancelled or discarded dependency cancels its dependents,
//     transitively, unless the task or the workflow ignores that state;
//     Client.Cancel of a pending task cancels the tasks after it; invalid
//     workflows (a cycle, an unknown dependency, a repeated name...) are
//     refused with dao.ErrInvalidArgument and write nothing; 3 clients
//     finishing the dependencies of the same tasks at the same moment
//     run every task exactly once; a workflow inserted in a transaction
//     exists once it commits (with JobStores.Begin).
//   - GlobalLimit: 3 clients of 20 workers over a queue limited to 3
//     running at once never run more than 3 at once, and run every job
//     once.
//   - PartitionLimit: the same with a limit of 2 per partition (kind and
//     an args field), several partitions running together.
//   - LimitCrash: the slots of a client that died holding them come back
//     when its leases end, not before.
//   - RateLimit: 3 clients over a queue limited to 20 starts per second
//     start jobs at that rate (within the token bucket's bound and above
//     a quarter of it), every job once.
//   - LimitInvalid: a Limit that limits nothing or has a negative
//     setting is refused with dao.ErrInvalidArgument.
//   - LimitUse: with jobs of a queue limited per partition held running
//     by their work, Client.Limits gives the recorded Limit, the
//     running jobs of each partition and their rate tokens, spent by the
//     starts; once the jobs completed, none running.
//   - LimitProcesses (with Setup and Open; [CheckJobsProcesses] skips
//     it): 3 processes of 50 workers each over a queue limited to 5
//     running, one limited to 2 per partition, one limited to 200 starts
//     per second and one of sequences: never more than the limit at once
//     (sampled from the work functions), the rate within the token
//     bucket's bound, each sequence in order and one at a time, every
//     job once; then the slots of a process killed (SIGKILL) holding
//     them come back when its leases end, not before. [EnvLimitScale]
//     "full" runs it at 5,000 jobs a queue and also asks the mean rate
//     to be within 5% of the limit.
//   - WorkflowProcesses (with Setup and Open; [CheckJobsProcesses] skips
//     it): 3 processes of 10 workers run a random workflow of 600 tasks
//     in exactly 20 layers (each task depends on 1 to 3 tasks of earlier
//     layers, one in the layer before), 6 of whose tasks their work
//     discards or cancels, and a batch of 600 jobs ending completed,
//     discarded and cancelled; one process is killed (SIGKILL) while it
//     runs jobs. Every task that may run ends as its work says, once,
//     and starts after each of its dependencies' completing run ended;
//     the tasks cancelled are exactly the descendants of those that did
//     not complete; the batch's callback runs once, after the batch,
//     with the counts of its jobs' final states; only the jobs the killed
//     process held run twice, after their lease ended; nothing is left
//     unfinished. The seed of the workflow is logged ([EnvWorkflowSeed]
//     runs it again); [EnvLimitScale] "full" runs 10 workflows of 1,000
//     tasks ([jobs.MaxWorkflowTasks]) and a batch of 10,000.
func RunJobs(t *testing.T, h JobsHarness) {
	t.Helper()
	if h.NewStores == nil {
		t.Fatal("conformance: JobsHarness.NewStores is nil")
	}
	for _, name := range h.Skip {
		if !slices.Contains([]string{CheckJobsTx, CheckJobsPeriodic, CheckJobsProcesses, CheckJobsWake}, name) {
			t.Fatalf("conformance: JobsHarness.Skip names %q, not a check of the jobs group", name)
		}
	}
	t.Run("Jobs", func(t *testing.T) {
		t.Run("Lifecycle", func(t *testing.T) { testJobLifecycle(t, h) })
		t.Run("Retry", func(t *testing.T) { testJobRetry(t, h) })
		t.Run("Timeout", func(t *testing.T) { testJobTimeout(t, h) })
		t.Run("UnknownKind", func(t *testing.T) { testJobUnknownKind(t, h) })
		t.Run("Args", func(t *testing.T) { testJobArgs(t, h) })
		t.Run("Snooze", func(t *testing.T) { testJobSnooze(t, h) })
		t.Run("WaitState", func(t *testing.T) { testJobWaitState(t, h) })
		t.Run("Cancel", func(t *testing.T) { testJobCancel(t, h) })
		t.Run("CancelRequested", func(t *testing.T) { testJobCancelRequested(t, h) })
		t.Run("Unique", func(t *testing.T) { testJobUnique(t, h) })
		t.Run("Tx", func(t *testing.T) { testJobTx(t, h) })
		t.Run("TxWake", func(t *testing.T) { testJobTxWake(t, h) })
		t.Run("Pause", func(t *testing.T) { testJobPause(t, h) })
		t.Run("PauseUnknown", func(t *testing.T) { testJobPauseUnknown(t, h) })
		t.Run("Rescue", func(t *testing.T) { testJobRescue(t, h) })
		t.Run("ReleasedClaim", func(t *testing.T) { testJobReleasedClaim(t, h) })
		t.Run("Drain", func(t *testing.T) { testJobDrain(t, h) })
		t.Run("Stop", func(t *testing.T) { testJobStop(t, h) })
		t.Run("PeriodicRuntime", func(t *testing.T) { testJobPeriodicRuntime(t, h) })
		t.Run("QueuesRuntime", func(t *testing.T) { testJobQueuesRuntime(t, h) })
		t.Run("Retention", func(t *testing.T) { testJobRetention(t, h) })
		t.Run("Periodic", func(t *testing.T) { testJobPeriodic(t, h) })
		t.Run("PeriodicOwn", func(t *testing.T) { testJobPeriodicOwn(t, h) })
		t.Run("Events", func(t *testing.T) { testJobEvents(t, h) })
		t.Run("ErrorHandler", func(t *testing.T) { testJobErrorHandler(t, h) })
		t.Run("Middleware", func(t *testing.T) { testJobMiddleware(t, h) })
		t.Run("UniqueFields", func(t *testing.T) { testJobUniqueFields(t, h) })
		t.Run("List", func(t *testing.T) { testJobList(t, h) })
		t.Run("Output", func(t *testing.T) { testJobOutput(t, h) })
		t.Run("CompleteTx", func(t *testing.T) { testJobCompleteTx(t, h) })
		t.Run("Processes", func(t *testing.T) { testJobProcesses(t, h) })
		t.Run("Wake", func(t *testing.T) { testJobWake(t, h) })
		t.Run("Sequence", func(t *testing.T) { testJobSequence(t, h) })
		t.Run("Batch", func(t *testing.T) { testJobBatch(t, h) })
		t.Run("BatchSequenceArgs", func(t *testing.T) { testJobWaitsInvalid(t, h) })
		t.Run("Workflow", func(t *testing.T) { testJobWorkflow(t, h) })
		t.Run("GlobalLimit", func(t *testing.T) { testJobGlobalLimit(t, h) })
		t.Run("PartitionLimit", func(t *testing.T) { testJobPartitionLimit(t, h) })
		t.Run("LimitCrash", func(t *testing.T) { testJobLimitCrash(t, h) })
		t.Run("RateLimit", func(t *testing.T) { testJobRateLimit(t, h) })
		t.Run("LimitInvalid", func(t *testing.T) { testJobLimitInvalid(t, h) })
		t.Run("LimitUse", func(t *testing.T) { testJobLimitUse(t, h) })
		t.Run("LimitProcesses", func(t *testing.T) { testJobLimitProcesses(t, h) })
		t.Run("WorkflowProcesses", func(t *testing.T) { testJobWorkflowProcesses(t, h) })
	})
}

// spread returns st and the stores over its tables through each of
// h.Nodes: the i-th client of a check with several uses element i modulo
// the length.
func (h JobsHarness) spread(t *testing.T, st JobStores) []JobStores {
	t.Helper()
	out := []JobStores{st}
	for _, n := range h.Nodes {
		out = append(out, n(t, st))
	}
	return out
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
	log *noteLog
	// cancel ends Run's context and returns at once; stop does that and
	// waits for Run to return.
	cancel context.CancelFunc
	stop   func()
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
		Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 20}},
		PollInterval: jobsTick, Lease: 5 * time.Second, DrainTimeout: 2 * time.Second,
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
	jc := &jobClient{Client: c, log: log, cancel: cancel}
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
	return newJobClientWith(t, st, nil)
}

// newJobClientWith is newJobClient with mod's changes to the config.
func newJobClientWith(t *testing.T, st JobStores, mod func(*jobs.Config)) *jobs.Client {
	t.Helper()
	cfg := jobs.Config{Store: st.Jobs, QueueStore: st.Queues, PollInterval: jobsTick}
	if mod != nil {
		mod(&cfg)
	}
	c, err := jobs.NewClient(cfg)
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

// waitQueues waits up to 30 s for c's queue list to satisfy ok and
// returns it; it fails t with the last list otherwise.
func waitQueues(t *testing.T, c *jobs.Client, what string, ok func([]jobs.QueueInfo) bool) []jobs.QueueInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		qs, err := c.Queues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok(qs) {
			return qs
		}
		if time.Now().After(deadline) {
			t.Fatalf("queues not %s within 30 s: %+v", what, qs)
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

// shortTimeoutArgs and longTimeoutArgs are the args of jobs that wait
// for their context to end: their kinds' timeouts are below and above
// two ticks of the timeout check's client.
type shortTimeoutArgs struct{}

func (shortTimeoutArgs) Kind() string { return "conformance_timeout_short" }

type longTimeoutArgs struct{}

func (longTimeoutArgs) Kind() string { return "conformance_timeout_long" }

// timeoutSeen is what a timed-out job's work saw.
type timeoutSeen struct {
	start, end, deadline time.Time
	hasDeadline          bool
	err, cause           error
}

// testJobTimeout: a kind's timeout ends the work's context at the
// timeout, whatever its length against the client's tick, with
// context.DeadlineExceeded and cause jobs.ErrTimeout, the deadline set
// on the context.
func testJobTimeout(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	const tick, short, long = 500 * time.Millisecond, 300 * time.Millisecond, 1300 * time.Millisecond
	seen := make(chan timeoutSeen, 2)
	record := func(ctx context.Context) error {
		s := timeoutSeen{start: time.Now()}
		s.deadline, s.hasDeadline = ctx.Deadline()
		<-ctx.Done()
		s.end, s.err, s.cause = time.Now(), ctx.Err(), context.Cause(ctx)
		seen <- s
		return ctx.Err()
	}
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.PollInterval = tick
		if err := jobs.AddWorker(ws, jobs.WorkFunc[shortTimeoutArgs](func(ctx context.Context, _ *jobs.Job[shortTimeoutArgs]) error {
			return record(ctx)
		}), jobs.WithTimeout(short)); err != nil {
			t.Fatal(err)
		}
		if err := jobs.AddWorker(ws, jobs.WorkFunc[longTimeoutArgs](func(ctx context.Context, _ *jobs.Job[longTimeoutArgs]) error {
			return record(ctx)
		}), jobs.WithTimeout(long)); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct {
		args    jobs.Args
		timeout time.Duration
	}{{shortTimeoutArgs{}, short}, {longTimeoutArgs{}, long}} {
		j := insert(t, c.Client, tc.args, &jobs.InsertOpts{MaxAttempts: 1})
		var s timeoutSeen
		select {
		case s = <-seen:
		case <-time.After(30 * time.Second):
			t.Fatalf("job of timeout %v did not end within 30 s", tc.timeout)
		}
		took := s.end.Sub(s.start)
		t.Logf("timeout %v (tick %v): context ended after %v with %v, cause %v", tc.timeout, tick, took.Round(time.Millisecond), s.err, s.cause)
		if !errors.Is(s.err, context.DeadlineExceeded) || !errors.Is(s.cause, jobs.ErrTimeout) {
			t.Errorf("timeout %v: context ended with %v, cause %v; want context.DeadlineExceeded, cause jobs.ErrTimeout", tc.timeout, s.err, s.cause)
		}
		if d := s.deadline.Sub(s.start); !s.hasDeadline || d < tc.timeout-50*time.Millisecond || d > tc.timeout {
			t.Errorf("timeout %v: context deadline %v after the work started (set %v), want the timeout", tc.timeout, d, s.hasDeadline)
		}
		// Never early; late by far less than a tick (a loaded machine
		// may delay the timer and the goroutine).
		if took < tc.timeout-50*time.Millisecond || took > tc.timeout+tick/2 {
			t.Errorf("timeout %v: context ended after %v", tc.timeout, took)
		}
		got := waitJob(t, c.Client, j.ID, 30*time.Second, "discarded", inState(jobs.StateDiscarded))
		if errs := attemptErrors(t, got); len(errs) != 1 || !strings.Contains(errs[0].Error, jobs.ErrTimeout.Error()) {
			t.Errorf("timed-out job's errors: %+v", errs)
		}
	}
}

// orphanWorker is the worker of orphanArgs, for the client that knows
// the kind.
func orphanWorker(ran *atomic.Int64) jobs.Worker[orphanArgs] {
	return jobs.WorkFunc[orphanArgs](func(context.Context, *jobs.Job[orphanArgs]) error {
		ran.Add(1)
		return nil
	})
}

// testJobUnknownKind: a client refuses to insert a kind it has no worker
// for (unless SkipUnknownJobCheck; a client without workers inserts any
// kind); a job whose kind a running client lacks is left to a client that
// knows it, never claimed nor discarded, and UnknownKinds reports it until
// such a client runs it.
func testJobUnknownKind(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	ctx := context.Background()
	_, err := c.Insert(ctx, orphanArgs{}, nil)
	if !errors.Is(err, jobs.ErrUnknownKind) || !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("insert of a kind the client has no worker for: %v, want jobs.ErrUnknownKind and dao.ErrInvalidArgument", err)
	}
	if n, err := st.Jobs.Count(ctx, dao.Criteria{}); err != nil || n != 0 {
		t.Fatalf("%d jobs after a refused insert (%v)", n, err)
	}
	skip := newJobClientWith(t, st, func(cfg *jobs.Config) {
		cfg.Workers = jobs.NewWorkers()
		cfg.SkipUnknownJobCheck = true
	})
	j := insert(t, skip, orphanArgs{}, nil)
	other := insert(t, newJobClient(t, st), orphanArgs{}, &jobs.InsertOpts{Queue: "elsewhere"})
	// The running client (tick jobsTick) leaves them: twenty ticks later
	// they wait as inserted.
	time.Sleep(20 * jobsTick)
	for _, id := range []int64{j.ID, other.ID} {
		got, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != jobs.StateAvailable || got.Attempt != 0 || got.Errors != "" {
			t.Errorf("job %d of a kind no running client knows: state %s, attempt %d, errors %s; want available, attempt 0, no error",
				id, got.State, got.Attempt, got.Errors)
		}
	}
	waitKinds := func(what string, want []jobs.WaitingKind) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := c.UnknownKinds(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("unknown kinds %s: %+v, want %+v", what, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	kind := orphanArgs{}.Kind()
	waitKinds("while no client knows them", []jobs.WaitingKind{{Queue: jobs.DefaultQueue, Kind: kind, Jobs: 1}, {Queue: "elsewhere", Kind: kind, Jobs: 1}})
	if qs, err := c.Queues(ctx); err != nil || len(qs) != 1 || !slices.Equal(qs[0].Kinds, []string{NoteArgs{}.Kind()}) {
		t.Errorf("queues with the kinds their clients know: %+v, %v", qs, err)
	}
	// A client that knows the kind runs the job of its queue.
	var ran atomic.Int64
	knows := startJobs(t, st, func(_ *jobs.Config, ws *jobs.Workers) {
		if err := jobs.AddWorker(ws, orphanWorker(&ran)); err != nil {
			t.Fatal(err)
		}
	})
	got := waitJob(t, knows.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if got.Attempt != 1 || got.Errors != "" || ran.Load() != 1 {
		t.Errorf("job run by the client that knows its kind: attempt %d, errors %s, %d runs", got.Attempt, got.Errors, ran.Load())
	}
	waitKinds("once a client knows the kind in queue default", []jobs.WaitingKind{{Queue: "elsewhere", Kind: kind, Jobs: 1}})
}

// mapArgs is the args of a job whose text is in a map's keys.
type mapArgs struct {
	M map[string]int `json:"m"`
}

func (mapArgs) Kind() string { return "conformance_map" }

func testJobArgs(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	ctx := context.Background()
	big := strings.Repeat("x", jobs.DefaultMaxArgsSize)
	for name, p := range map[string]jobs.InsertParams{
		"args over the default size limit": {Args: NoteArgs{Text: big}},
		"args not UTF-8":                   {Args: NoteArgs{Text: "a\xffb"}},
		"a map key not UTF-8":              {Args: mapArgs{M: map[string]int{"k\xc3": 1}}},
		"metadata not UTF-8":               {Args: NoteArgs{}, Opts: &jobs.InsertOpts{Metadata: []byte("{\"k\": \"v\xff\"}")}},
	} {
		// With a good job before it: the call inserts nothing.
		if _, err := c.InsertMany(ctx, []jobs.InsertParams{{Args: NoteArgs{N: 1}}, p}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("insert of %s: %v, want dao.ErrInvalidArgument", name, err)
		}
	}
	if n, err := st.Jobs.Count(ctx, dao.Criteria{}); err != nil || n != 0 {
		t.Fatalf("%d jobs after refused inserts (%v), want none", n, err)
	}
	// Args just under the limit go in.
	under := NoteArgs{Text: big[:jobs.DefaultMaxArgsSize-len(`{"n":0,"text":""}`)]}
	if _, err := c.Insert(ctx, under, &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}); err != nil {
		t.Errorf("insert of args of exactly the size limit: %v", err)
	}
	// A NUL in a string is JSON's \u0000 and comes back intact.
	j := insert(t, c.Client, NoteArgs{N: 2, Text: "a\x00b"}, nil)
	got := waitJob(t, c.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	var back NoteArgs
	if err := json.Unmarshal([]byte(got.EncodedArgs), &back); err != nil || back.Text != "a\x00b" {
		t.Errorf("args with a NUL stored as %q, read back %q (%v)", got.EncodedArgs, back.Text, err)
	}
	// A limit of the client's own.
	small := newJobClientWith(t, st, func(cfg *jobs.Config) { cfg.MaxArgsSize = 100 })
	if _, err := small.Insert(ctx, NoteArgs{Text: strings.Repeat("y", 100)}, nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("insert of 100+ bytes of args with MaxArgsSize 100: %v, want dao.ErrInvalidArgument", err)
	}
}

// Waits of the wait-state check: a short one, within
// jobs.ScheduleAhead, and a long one past it.
const (
	shortWait = 3 * time.Second
	longWait  = jobs.ScheduleAhead + 10*time.Second
)

// shortWaitArgs and longWaitArgs are the args of jobs whose first attempt
// fails, or snoozes, for shortWait and longWait (their kinds' backoff and
// snooze).
type shortWaitArgs struct {
	Snooze bool `json:"snooze,omitempty"`
}

func (shortWaitArgs) Kind() string { return "conformance_wait_short" }

type longWaitArgs struct {
	Snooze bool `json:"snooze,omitempty"`
}

func (longWaitArgs) Kind() string { return "conformance_wait_long" }

// addWaitWorker registers the worker of A: a job's first run fails, or
// snoozes for wait when snooze says so; its next run succeeds. The kind's
// backoff is wait.
func addWaitWorker[A jobs.Args](t *testing.T, ws *jobs.Workers, wait time.Duration, snooze func(A) bool) {
	t.Helper()
	var seen sync.Map
	w := jobs.WorkFunc[A](func(_ context.Context, j *jobs.Job[A]) error {
		if _, again := seen.LoadOrStore(j.ID, true); again {
			return nil
		}
		if snooze(j.Args) {
			return jobs.Snooze(wait)
		}
		return errors.New("first run fails")
	})
	if err := jobs.AddWorker(ws, w, jobs.WithBackoff(func(int) time.Duration { return wait })); err != nil {
		t.Fatal(err)
	}
}

// testJobWaitState: a job waiting for its retry reads retryable, and a
// snoozed one scheduled, whether the wait is short (within
// jobs.ScheduleAhead) or long: in Get, List and Count, and for unique
// jobs, whose key a state outside their unique states releases. A short
// wait still runs when it ends.
func testJobWaitState(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		addWaitWorker(t, ws, shortWait, func(a shortWaitArgs) bool { return a.Snooze })
		addWaitWorker(t, ws, longWait, func(a longWaitArgs) bool { return a.Snooze })
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		args  jobs.Args
		state jobs.State
		long  bool
	}{
		{"retry within ScheduleAhead", shortWaitArgs{}, jobs.StateRetryable, false},
		{"retry past ScheduleAhead", longWaitArgs{}, jobs.StateRetryable, true},
		{"snooze within ScheduleAhead", shortWaitArgs{Snooze: true}, jobs.StateScheduled, false},
		{"snooze past ScheduleAhead", longWaitArgs{Snooze: true}, jobs.StateScheduled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Unique while available, scheduled or running: a retryable
			// job releases its key, a snoozed (scheduled) one keeps it.
			unique := &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true, ByState: []jobs.State{jobs.StateAvailable, jobs.StateScheduled, jobs.StateRunning}}}
			j := insert(t, c.Client, tc.args, unique)
			got := waitJob(t, c.Client, j.ID, 30*time.Second, "waiting after its first run", func(r *jobs.Row) bool {
				return r.AttemptedAt != nil && r.State != jobs.StateRunning && r.ScheduledAt.After(*r.AttemptedAt)
			})
			if got.State != tc.state {
				t.Errorf("job waiting %v after its first run reads %s, want %s", got.ScheduledAt.Sub(*got.AttemptedAt).Round(time.Second), got.State, tc.state)
			}
			listed, err := c.List(ctx, jobs.ListParams{States: []jobs.State{tc.state}, Kind: tc.args.Kind()})
			if err != nil || len(listed) != 1 || listed[0].ID != j.ID {
				t.Errorf("List of %s jobs: %d jobs (%v), want job %d", tc.state, len(listed), err, j.ID)
			}
			counts, err := c.Count(ctx, jobs.DefaultQueue)
			if err != nil || counts[tc.state] != 1 {
				t.Errorf("Count: %v (%v), want 1 %s", counts, err, tc.state)
			}
			dup, err := c.Insert(ctx, tc.args, unique)
			if err != nil {
				t.Fatal(err)
			}
			if wantDup := tc.state == jobs.StateScheduled; dup.UniqueSkippedAsDuplicate != wantDup {
				t.Errorf("unique insert while the job is %s: duplicate %v, want %v", tc.state, dup.UniqueSkippedAsDuplicate, wantDup)
			}
			if !dup.UniqueSkippedAsDuplicate {
				if _, err := c.Cancel(ctx, dup.Job.ID); err != nil {
					t.Fatal(err)
				}
			}
			if tc.long {
				if _, err := c.Cancel(ctx, j.ID); err != nil {
					t.Fatal(err)
				}
				return
			}
			done := waitJob(t, c.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
			if done.AttemptedAt.Before(got.ScheduledAt.Add(-100 * time.Millisecond)) {
				t.Errorf("the next run started at %v, before the wait ended at %v", done.AttemptedAt, got.ScheduledAt)
			}
		})
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
	// The client may have seen the request and ended the job by the time
	// Cancel reads it back.
	if r, err := c.Cancel(ctx, running.ID); err != nil || (r.State != jobs.StateRunning && r.State != jobs.StateCancelled) || r.CancelRequestedAt == nil {
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

// requestedArgs is the args of a job whose work, once started, waits
// until the test releases it and then ends as Mode says: "fail",
// "snooze" (an hour) or "" (success).
type requestedArgs struct {
	Mode string `json:"mode"`
}

func (requestedArgs) Kind() string { return "conformance_cancel_requested" }

// testJobCancelRequested: the cancel request of a running job decides its
// outcome even when the work returns on its own: failed or snoozed, it
// ends cancelled at once; completed, it stays completed. The client's
// tick is an hour, so that neither its read of cancel requests nor its
// rescuer acts within the check.
func testJobCancelRequested(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	started := make(chan int64, 3)
	var releases sync.Map // job id -> chan struct{}
	release := func(id int64) chan struct{} {
		ch, _ := releases.LoadOrStore(id, make(chan struct{}))
		return ch.(chan struct{})
	}
	c := startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		cfg.PollInterval, cfg.Lease = time.Hour, 3*time.Hour
		w := jobs.WorkFunc[requestedArgs](func(_ context.Context, j *jobs.Job[requestedArgs]) error {
			started <- j.ID
			<-release(j.ID)
			switch j.Args.Mode {
			case "fail":
				return errors.New("work failed after the cancel request")
			case "snooze":
				return jobs.Snooze(time.Hour)
			}
			return nil
		})
		if err := jobs.AddWorker(ws, w, jobs.WithBackoff(func(int) time.Duration { return time.Hour })); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	for _, tc := range []struct {
		mode string
		want jobs.State
	}{{"fail", jobs.StateCancelled}, {"snooze", jobs.StateCancelled}, {"", jobs.StateCompleted}} {
		j := insert(t, c.Client, requestedArgs{Mode: tc.mode}, nil)
		select {
		case id := <-started:
			if id != j.ID {
				t.Fatalf("job %d started, want %d", id, j.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("job %d (mode %q) did not start within 30s", j.ID, tc.mode)
		}
		r, err := c.Cancel(ctx, j.ID)
		if err != nil || r.State != jobs.StateRunning || r.CancelRequestedAt == nil {
			t.Fatalf("cancel of running job %d: %+v, %v; want it running with a cancel request", j.ID, r, err)
		}
		close(release(j.ID))
		got := waitJob(t, c.Client, j.ID, 10*time.Second, "final", func(r *jobs.Row) bool { return r.State.Final() })
		if got.State != tc.want {
			t.Errorf("job (mode %q) whose cancel was requested while it ran ended %s, want %s", tc.mode, got.State, tc.want)
		}
		for _, e := range attemptErrors(t, got) {
			if strings.Contains(e.Error, "attempt lost") {
				t.Errorf("job (mode %q): errors record a lost attempt: %+v", tc.mode, e)
			}
		}
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
	if st.NotTx != nil {
		all := dao.Ge(jobs.ColID, 0)
		before, err := st.Jobs.Count(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.InsertTx(ctx, st.NotTx, NoteArgs{N: 3}, nil)
		after, cerr := st.Jobs.Count(ctx, all)
		if !errors.Is(err, dao.ErrInvalidArgument) || cerr != nil || after != before {
			t.Errorf("InsertTx with %T outside a transaction: %v, jobs %d then %d (%v); want dao.ErrInvalidArgument and nothing inserted",
				st.NotTx, err, before, after, cerr)
		}
	}
}

// testJobTxWake: a job inserted by InsertTx starts once its transaction
// commits, without waiting for the client's tick: a client whose tick
// is twenty minutes runs it.
func testJobTxWake(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Begin == nil {
		h.skipOrFail(t, CheckJobsTx, "JobStores.Begin")
	}
	c := startJobs(t, st, func(cfg *jobs.Config, _ *jobs.Workers) { cfg.PollInterval, cfg.Lease = 20*time.Minute, time.Hour })
	waitQueues(t, c.Client, "recorded by the running client", func(qs []jobs.QueueInfo) bool { return len(qs) == 1 })
	tx, commit, _ := st.Begin(t)
	res, err := c.InsertTx(context.Background(), tx, NoteArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c.Client, res.Job.ID, 30*time.Second, "completed by a client whose tick is twenty minutes", inState(jobs.StateCompleted))
}

func testJobPause(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	admin := newJobClient(t, st)
	ctx := context.Background()
	waitQueues(t, admin, "recorded by the running client", func(qs []jobs.QueueInfo) bool { return len(qs) == 1 })
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

// testJobPauseUnknown: pausing or resuming a queue that has neither a
// row in the queue table nor a job is dao.ErrNotFound and creates
// nothing; a queue known by its jobs alone can be paused; "*" pauses and
// resumes every queue.
func testJobPauseUnknown(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	c := startJobs(t, st, nil)
	admin := newJobClient(t, st)
	ctx := context.Background()
	waitQueues(t, admin, "recorded by the running client", func(qs []jobs.QueueInfo) bool { return len(qs) == 1 })
	for op, f := range map[string]func(context.Context, string) error{"pause": admin.PauseQueue, "resume": admin.ResumeQueue} {
		if err := f(ctx, "never-used"); !errors.Is(err, dao.ErrNotFound) {
			t.Errorf("%s of a queue without row or job: %v, want dao.ErrNotFound", op, err)
		}
	}
	if n, err := st.Queues.Count(ctx, dao.Criteria{}); err != nil || n != 1 {
		t.Errorf("%d queue rows after pausing and resuming a queue that does not exist (%v), want the 1 the client runs", n, err)
	}
	// A queue no client ran yet, known by its job.
	waiting := insert(t, admin, NoteArgs{N: 1}, &jobs.InsertOpts{Queue: "later"})
	if err := admin.PauseQueue(ctx, "later"); err != nil {
		t.Fatalf("pause of a queue that has a job: %v", err)
	}
	if err := admin.ResumeQueue(ctx, "later"); err != nil {
		t.Fatalf("resume of a queue that has a job: %v", err)
	}
	// "*": every queue of the table.
	if err := admin.PauseQueue(ctx, "*"); err != nil {
		t.Fatalf("pause *: %v", err)
	}
	qs := waitQueues(t, admin, "all paused", func(qs []jobs.QueueInfo) bool {
		for _, q := range qs {
			if !q.Paused {
				return false
			}
		}
		return true
	})
	if len(qs) != 2 {
		t.Errorf("queues after pause *: %+v, want default and later", qs)
	}
	time.Sleep(4 * jobsTick) // every client reads pauses each tick
	j := insert(t, c.Client, NoteArgs{N: 2}, nil)
	time.Sleep(10 * jobsTick)
	if runs := c.log.attempts(j.ID); len(runs) != 0 {
		t.Fatalf("a job ran while every queue was paused (attempts %v)", runs)
	}
	if err := admin.ResumeQueue(ctx, "*"); err != nil {
		t.Fatalf("resume *: %v", err)
	}
	waitJob(t, c.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	waitQueues(t, admin, "all resumed", func(qs []jobs.QueueInfo) bool {
		for _, q := range qs {
			if q.Paused {
				return false
			}
		}
		return len(qs) == 2
	})
	if got, err := admin.Get(ctx, waiting.ID); err != nil || got.State != jobs.StateAvailable {
		t.Errorf("job of queue later: %+v, %v; want it available, no client runs that queue", got, err)
	}
}

// heldClaim holds the answer of a job store's first claim until hold is
// closed: the claim is committed (its jobs are leased, their attempt
// counted) but the client learns of it only then, as when the answer
// waited behind a lock or a slow network. held is closed once the claim
// committed.
type heldClaim struct {
	dao.Store[jobs.Row]
	hold, held chan struct{}
	calls      atomic.Int64
}

func (s *heldClaim) Claim(ctx context.Context, req dao.ClaimRequest) ([]jobs.Row, error) {
	rows, err := s.Store.Claim(ctx, req)
	if s.calls.Add(1) == 1 {
		close(s.held)
		<-s.hold
	}
	return rows, err
}

// fullJobStore is a job store with every optional interface of package
// dao that a jobs client uses.
type fullJobStore interface {
	dao.Store[jobs.Row]
	dao.TxBinder[jobs.Row]
	dao.KeyUpdater
	dao.EachUpdater
	dao.IdempotentCreator[jobs.Row]
	dao.TableNamer
	dao.Aser
	dao.Listener
	dao.Clock
}

// tableHeldClaim is heldClaim over a store with those interfaces, whose
// other methods (its transactions, batched writes, notifications) the
// client keeps using.
type tableHeldClaim struct {
	fullJobStore
	h *heldClaim
}

func (s tableHeldClaim) Claim(ctx context.Context, req dao.ClaimRequest) ([]jobs.Row, error) {
	return s.h.Claim(ctx, req)
}

// holdFirstClaim returns st with its job store's first claim held (see
// heldClaim).
func holdFirstClaim(st JobStores) (JobStores, *heldClaim) {
	h := &heldClaim{Store: st.Jobs, hold: make(chan struct{}), held: make(chan struct{})}
	if full, ok := st.Jobs.(fullJobStore); ok {
		st.Jobs = tableHeldClaim{fullJobStore: full, h: h}
	} else {
		st.Jobs = h
	}
	return st, h
}

// testJobReleasedClaim: jobs claimed but released before they started —
// their claim answered after the lease less two ticks, or after the
// client began to stop — keep their attempt: a job on its only attempt
// runs and completes as attempt 1, and one with attempts left runs as
// attempt 1 without an error for an attempt that never started.
func testJobReleasedClaim(t *testing.T, h JobsHarness) {
	for _, tc := range []struct {
		name string
		// release makes the client release the held claim's jobs: stop
		// it, or let the answer come after the lease less two ticks.
		release func(c *jobClient, lease time.Duration)
	}{
		{"late", func(c *jobClient, lease time.Duration) { time.Sleep(lease + lease/2) }},
		{"stopping", func(c *jobClient, _ time.Duration) { c.cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := h.NewStores(t)
			admin := newJobClient(t, st)
			only := insert(t, admin, NoteArgs{N: 1}, &jobs.InsertOpts{MaxAttempts: 1})
			more := insert(t, admin, NoteArgs{N: 2}, &jobs.InsertOpts{MaxAttempts: 3})
			held, hc := holdFirstClaim(st)
			const lease = time.Second
			first := startJobs(t, held, func(cfg *jobs.Config, _ *jobs.Workers) { cfg.Lease = lease })
			select {
			case <-hc.held:
			case <-time.After(30 * time.Second):
				t.Fatal("the first client did not claim within 30 s")
			}
			for _, id := range []int64{only.ID, more.ID} {
				if r, err := st.Jobs.Get(context.Background(), id); err != nil || r.Attempt != 1 || r.LeaseOwner == "" {
					t.Fatalf("job %d under the held claim: %+v, %v; want claimed, attempt 1", id, r, err)
				}
			}
			tc.release(first, lease)
			close(hc.hold)
			first.stop()
			if runs := first.log.attempts(only.ID); len(runs) != 0 {
				t.Fatalf("the released job ran on the client that released it: attempts %v", runs)
			}
			next := startJobs(t, st, nil)
			for _, j := range []*jobs.Row{more, only} {
				got := waitJob(t, next.Client, j.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
				if got.Attempt != 1 || got.Errors != "" {
					t.Errorf("job %d (max attempts %d) released unstarted, then completed: attempt %d, errors %s; want attempt 1, no error",
						j.ID, j.MaxAttempts, got.Attempt, got.Errors)
				}
				if runs := next.log.attempts(j.ID); !slices.Equal(runs, []int{1}) {
					t.Errorf("job %d ran attempts %v, want [1]", j.ID, runs)
				}
			}
		})
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
	// A job whose last attempt ended with its lease released and no
	// outcome (a work function that ignored the drain past the write
	// timeout): available, attempts spent, no lease. No claim takes it.
	spent := insert(t, admin, NoteArgs{N: 3}, &jobs.InsertOpts{MaxAttempts: 1})
	if n, err := st.Jobs.Update(ctx, dao.Eq(jobs.ColID, spent.ID), dao.Set{jobs.ColAttempt: 1, jobs.ColLeaseOwner: "", jobs.ColLeaseUntil: ended, jobs.ColAttemptedAt: ended}); err != nil || n != 1 {
		t.Fatalf("leave job %d released with its attempts spent: %d, %v", spent.ID, n, err)
	}
	if n, err := admin.Rescue(ctx); err != nil || n != 2 {
		t.Fatalf("rescue: %d jobs, %v; want 2 (the two whose attempts are spent)", n, err)
	}
	for _, id := range []int64{last.ID, spent.ID} {
		got := waitJob(t, admin, id, time.Second, "discarded", inState(jobs.StateDiscarded))
		if errs := attemptErrors(t, got); len(errs) != 1 || errs[0].Attempt != 1 || !strings.Contains(errs[0].Error, "lost") || got.FinalizedAt == nil {
			t.Errorf("rescued job %d's errors: %+v", id, errs)
		}
	}
	c := startJobs(t, st, nil)
	got := waitJob(t, c.Client, left.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
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

// periodicOtherArgs is the args of the second periodic job of the
// periodic-ownership check.
type periodicOtherArgs struct{}

func (periodicOtherArgs) Kind() string { return "conformance_periodic_other" }

// testJobPeriodicOwn: two clients over one schedule table, each listing a
// periodic job the other does not (two programs, or two versions during
// a rolling deploy): each fires its own and leaves the other's alone (its
// schedule never fails); RemovePeriodic removes a schedule no client of
// this program lists any more, and one the client lists.
func testJobPeriodicOwn(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Schedules == nil {
		h.skipOrFail(t, CheckJobsPeriodic, "JobStores.Schedules")
	}
	periodic := func(key string, args jobs.Args, add func(*jobs.Workers) error) func(*jobs.Config, *jobs.Workers) {
		return func(cfg *jobs.Config, ws *jobs.Workers) {
			cfg.ScheduleStore = st.Schedules
			cfg.Periodic = []jobs.PeriodicJob{{Key: key, Cron: "* * * * * *", Construct: func() (jobs.Args, *jobs.InsertOpts) { return args, nil }}}
			if err := add(ws); err != nil {
				t.Fatal(err)
			}
		}
	}
	nop := func(ctx context.Context) error { return nil }
	a := startJobs(t, st, periodic("own-a", periodicArgs{}, func(ws *jobs.Workers) error {
		return jobs.AddWorker(ws, jobs.WorkFunc[periodicArgs](func(ctx context.Context, _ *jobs.Job[periodicArgs]) error { return nop(ctx) }))
	}))
	b := startJobs(t, h.spread(t, st)[1%(len(h.Nodes)+1)], periodic("own-b", periodicOtherArgs{}, func(ws *jobs.Workers) error {
		return jobs.AddWorker(ws, jobs.WorkFunc[periodicOtherArgs](func(ctx context.Context, _ *jobs.Job[periodicOtherArgs]) error { return nop(ctx) }))
	}))
	ctx := context.Background()
	count := func(kind string) int64 {
		n, err := st.Jobs.Count(ctx, dao.Eq(jobs.ColKind, kind))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(time.Minute)
	for count(periodicArgs{}.Kind()) < 3 || count(periodicOtherArgs{}.Kind()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute of per-second periodic jobs: %d and %d jobs", count(periodicArgs{}.Kind()), count(periodicOtherArgs{}.Kind()))
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.stop()
	a.stop()
	sc, err := dispatch.NewSchedules(st.Schedules, dispatch.SchedulesConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"jobs:own-a", "jobs:own-b"} {
		s, err := sc.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if s.FailureCount != 0 || s.Status != dispatch.StatusActive || s.LastError != "" {
			t.Errorf("schedule %s after two clients each listing one: status %s, %d failures, last error %q; want no failure",
				key, s.Status, s.FailureCount, s.LastError)
		}
	}
	// Removing a periodic job no client lists any more.
	admin := newJobClientWith(t, st, func(cfg *jobs.Config) { cfg.ScheduleStore = st.Schedules })
	if err := admin.RemovePeriodic(ctx, "own-b"); err != nil {
		t.Fatalf("remove periodic own-b: %v", err)
	}
	if _, err := sc.Get(ctx, "jobs:own-b"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("schedule of a removed periodic job: %v, want dao.ErrNotFound", err)
	}
	if err := admin.RemovePeriodic(ctx, "own-b"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("remove of a periodic job without schedule: %v, want dao.ErrNotFound", err)
	}
	// Removing one the client lists: its schedule goes too.
	if err := a.RemovePeriodic(ctx, "own-a"); err != nil {
		t.Errorf("remove of a periodic job the client lists: %v", err)
	}
	if _, err := sc.Get(ctx, "jobs:own-a"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("schedule of a removed periodic job the client listed: %v, want dao.ErrNotFound", err)
	}
}

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
	b := startJobs(t, h.spread(t, st)[1%(len(h.Nodes)+1)], mod)
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
