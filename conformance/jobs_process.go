package conformance

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// Environment variables by which the parent of the jobs group's
// multi-process check tells a child (the same test binary, run again)
// what to do.
const (
	envJobsChild  = "CLAIMSTORE_JOBS_CHILD"  // the test name the child runs
	envJobsTarget = "CLAIMSTORE_JOBS_TARGET" // JobsHarness.Setup's target
	envJobsDir    = "CLAIMSTORE_JOBS_DIR"    // where the child writes
	envJobsName   = "CLAIMSTORE_JOBS_NAME"   // the child's name (its files)
	envJobsRole   = "CLAIMSTORE_JOBS_ROLE"   // "worker" or "hanger"
	envJobsLease  = "CLAIMSTORE_JOBS_LEASE"  // the child client's lease
	envJobsNode   = "CLAIMSTORE_JOBS_NODE"   // the child's sequence number: its node is this modulo the nodes
)

// jobsChildSeq numbers the children started, so that consecutive
// children go through the harness's nodes in turn.
var jobsChildSeq atomic.Int64

// procArgs is the args of the multi-process check's jobs; a hanger child
// blocks on them until it is killed, a worker child completes them.
type procArgs struct {
	N int `json:"n"`
}

func (procArgs) Kind() string { return "conformance_proc" }

// procLease is the lease of the child that is killed: its jobs are
// claimable again this long after its last renewal. The other children
// run on the default lease (30 s), so that a loaded machine's slow writes
// never let one of their leases lapse.
const procLease = 2 * time.Second

// processTables is the start of a multi-process check. In a child
// process (the test binary run again for t) it runs the child's role and
// reports false; in the test process it creates the tables the
// processes share (skipping or failing t without Setup and Open) and
// returns their target and stores, reporting true.
func processTables(t *testing.T, h JobsHarness) (target string, st JobStores, parent bool) {
	t.Helper()
	if name := os.Getenv(envJobsChild); name != "" {
		if name != t.Name() {
			t.Skipf("jobs child for %s", name)
		}
		jobsChild(t, h)
		return "", JobStores{}, false
	}
	if h.Setup == nil || h.Open == nil {
		h.skipOrFail(t, CheckJobsProcesses, "JobsHarness.Setup and Open")
	}
	target = h.Setup(t)
	return target, h.Open(t, target), true
}

func testJobProcesses(t *testing.T, h JobsHarness) {
	target, st, parent := processTables(t, h)
	if !parent {
		return
	}
	c := newJobClient(t, st)
	ctx := context.Background()
	dir := t.TempDir()

	// Three processes run every job exactly once.
	const n = 600
	params := make([]jobs.InsertParams, n)
	for i := range params {
		params[i] = jobs.InsertParams{Args: procArgs{N: i}}
	}
	res, err := c.InsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	began := time.Now()
	var workers []*jobsChildProc
	for p := range 3 {
		workers = append(workers, startJobsChild(t, dir, target, fmt.Sprintf("worker-%d", p), "worker", 0))
	}
	waitCount(t, st, dao.Eq(jobs.ColState, string(jobs.StateCompleted)), n, 2*time.Minute, workers...)
	elapsed := time.Since(began)
	for _, w := range workers {
		w.stop(t)
	}
	runs := map[int64]int{}
	per := map[string]int{}
	for _, w := range workers {
		for _, id := range w.ran(t) {
			runs[id]++
			per[w.name]++
		}
	}
	var dup, lost int
	for _, id := range ids {
		switch runs[id] {
		case 0:
			lost++
		case 1:
		default:
			dup++
		}
	}
	t.Logf("3 processes ran %d jobs in %v (per process %v): %d run twice or more, %d never run", n, elapsed.Round(time.Millisecond), per, dup, lost)
	if dup != 0 || lost != 0 || len(runs) != n {
		for _, w := range workers {
			out := w.out.String()
			t.Logf("child %s's output (its last 4 kB):\n%s", w.name, out[max(0, len(out)-4096):])
		}
		t.Fatalf("%d jobs run twice or more, %d never run, %d distinct ids run; want every job exactly once", dup, lost, len(runs))
	}

	// A process killed while it runs jobs: another runs them again, and
	// the rescuer discards the one that was on its last attempt.
	const blocked = 20
	params = make([]jobs.InsertParams, blocked+1)
	for i := range blocked {
		params[i] = jobs.InsertParams{Args: procArgs{N: n + i}, Opts: &jobs.InsertOpts{MaxAttempts: 3}}
	}
	params[blocked] = jobs.InsertParams{Args: procArgs{N: n + blocked}, Opts: &jobs.InsertOpts{MaxAttempts: 1}}
	if res, err = c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	hanger := startJobsChild(t, dir, target, "hanger", "hanger", procLease)
	running := dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Gt(jobs.ColLeaseUntil, time.Now().UTC()), dao.Eq(jobs.ColAttempt, 1))
	waitCount(t, st, running, blocked+1, time.Minute, hanger)
	if err := hanger.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-hanger.done
	killed := time.Now()
	finisher := startJobsChild(t, dir, target, "finisher", "worker", 0)
	waitCount(t, st, dao.And(dao.Gt(jobs.ColID, ids[n-1]), dao.NotNull(jobs.ColFinalizedAt)), blocked+1, 2*time.Minute, finisher)
	t.Logf("the jobs of a process killed while running them were final %v after the kill (lease %v)", time.Since(killed).Round(time.Millisecond), procLease)
	finisher.stop(t)
	for i, r := range res {
		got, err := c.Get(ctx, r.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		errs := attemptErrors(t, got)
		switch {
		case i < blocked && (got.State != jobs.StateCompleted || got.Attempt != 2 || len(errs) != 1 || !strings.Contains(errs[0].Error, "lost")):
			t.Errorf("job %d of the killed process: state %s, attempt %d, errors %+v; want completed on attempt 2 with attempt 1 lost", got.ID, got.State, got.Attempt, errs)
		case i == blocked && (got.State != jobs.StateDiscarded || len(errs) != 1 || !strings.Contains(errs[0].Error, "lost")):
			t.Errorf("last-attempt job %d of the killed process: state %s, errors %+v; want discarded with the lost attempt", got.ID, got.State, errs)
		}
	}
}

// waitCount waits up to timeout for where to count want jobs; it fails t
// early when a child exits.
func waitCount(t *testing.T, st JobStores, where dao.Criteria, want int, timeout time.Duration, children ...*jobsChildProc) {
	t.Helper()
	waitJobs(t, st, where, want, false, timeout, children)
}

// waitAtLeast waits up to timeout for where to count at least n jobs;
// it fails t early when a child exits.
func waitAtLeast(t *testing.T, st JobStores, where dao.Criteria, n int, timeout time.Duration, children ...*jobsChildProc) {
	t.Helper()
	waitJobs(t, st, where, n, true, timeout, children)
}

// waitJobs counts where every 50 ms until it counts want jobs (at least
// want with atLeast), and fails t when a child exits first or timeout
// passes (logging the children's warnings).
func waitJobs(t *testing.T, st JobStores, where dao.Criteria, want int, atLeast bool, timeout time.Duration, children []*jobsChildProc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := st.Jobs.Count(context.Background(), where)
		if err != nil {
			t.Fatal(err)
		}
		if int(got) == want || atLeast && int(got) > want {
			return
		}
		for _, c := range children {
			select {
			case <-c.done:
				t.Fatalf("child %s exited early (%v) with %d of %d jobs: %s", c.name, c.err, got, want, c.out.String())
			default:
			}
		}
		if time.Now().After(deadline) {
			for _, c := range children {
				logWarnings(t, c)
			}
			t.Fatalf("%d of %d jobs within %v", got, want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jobsChildProc is a running child process of the check.
type jobsChildProc struct {
	name, dir string
	cmd       *exec.Cmd
	out       *syncBuffer
	done      chan struct{}
	err       error
}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startJobsChild starts the test binary again as a child of role
// ("worker": runs the jobs; "hanger": blocks in them until killed;
// "sleeper": runs them on a client that ticks once an hour) whose client
// has lease (0: the default).
func startJobsChild(t *testing.T, dir, target, name, role string, lease time.Duration) *jobsChildProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	// The child may run as long as the parent: 10 minutes, or up to the
	// parent's deadline when that is later.
	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = max(timeout, time.Until(d))
	}
	cmd := exec.Command(exe, "-test.run", runPattern(t.Name()), "-test.count=1", "-test.v", "-test.timeout="+timeout.Round(time.Second).String())
	cmd.Env = append(os.Environ(), envJobsChild+"="+t.Name(), envJobsTarget+"="+target, envJobsDir+"="+dir,
		envJobsName+"="+name, envJobsRole+"="+role, envJobsLease+"="+lease.String(), fmt.Sprintf("%s=%d", envJobsNode, jobsChildSeq.Add(1)-1))
	c := &jobsChildProc{name: name, dir: dir, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child %s: %v", name, err)
	}
	go func() { defer close(c.done); c.err = cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// stop asks the child to drain and exit (a stop file it polls, which
// works on every OS), and fails t when it does not exit cleanly.
func (c *jobsChildProc) stop(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, "stop-"+c.name), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("child %s did not stop within a minute:\n%s", c.name, c.out.String())
	}
	if c.err != nil {
		t.Fatalf("child %s: %v\n%s", c.name, c.err, c.out.String())
	}
}

// ran returns the job ids the child recorded as run.
func (c *jobsChildProc) ran(t *testing.T) []int64 {
	t.Helper()
	f, err := os.Open(filepath.Join(c.dir, "ran-"+c.name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("child %s's record: %q", c.name, sc.Text())
		}
		ids = append(ids, id)
	}
	return ids
}

// jobsChild is the child role: it runs a client over the parent's
// tables, records each job it runs (one line per run, written before the
// work returns), and drains and exits when its stop file appears. A
// sleeper's client ticks once an hour and writes its ready file once its
// first claims are done.
func jobsChild(t *testing.T, h JobsHarness) {
	dir, name, role := os.Getenv(envJobsDir), os.Getenv(envJobsName), os.Getenv(envJobsRole)
	lease, err := time.ParseDuration(os.Getenv(envJobsLease))
	if err != nil {
		t.Fatalf("child lease: %v", err)
	}
	st := h.Open(t, os.Getenv(envJobsTarget))
	if seq, err := strconv.Atoi(os.Getenv(envJobsNode)); err == nil && len(h.Nodes) > 0 {
		if k := seq % (len(h.Nodes) + 1); k > 0 {
			st = h.Nodes[k-1](t, st)
		}
		t.Logf("child %s runs through node %d of %d", name, seq%(len(h.Nodes)+1), len(h.Nodes)+1)
	}
	switch role {
	case roleLimits, roleLimitsHanger:
		limitsChild(t, st, dir, name, role, lease)
		return
	case roleWorkflow, roleWorkflowVictim:
		workflowChild(t, st, dir, name, role, lease)
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "ran-"+name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	ws := jobs.NewWorkers()
	work := jobs.WorkFunc[procArgs](func(ctx context.Context, j *jobs.Job[procArgs]) error {
		mu.Lock()
		_, err := fmt.Fprintf(f, "%d\n", j.ID)
		mu.Unlock()
		if err != nil {
			return err
		}
		if role == "hanger" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if err := jobs.AddWorker(ws, work, jobs.WithTimeout(jobs.NoTimeout)); err != nil {
		t.Fatal(err)
	}
	tick := jobsTick
	if role == roleSleeper {
		tick, lease = wakeTick, wakeLease
	}
	c, err := jobs.NewClient(jobs.Config{
		Store: st.Jobs, QueueStore: st.Queues, Workers: ws, WorkerID: name,
		Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 50, BatchSize: 25}},
		PollInterval: tick, Lease: lease, RescueInterval: 200 * time.Millisecond, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if role == roleSleeper {
		// Ready once its first claims are done: the parent's job then
		// comes to an idle queue.
		go func() {
			time.Sleep(wakeIdle)
			if err := os.WriteFile(filepath.Join(dir, "ready-"+name), nil, 0o600); err != nil {
				t.Error(err)
			}
		}()
	}
	runUntilStopped(ctx, t, cancel, c, dir, name)
}

// runUntilStopped runs c with ctx until the stop file of child name
// appears in dir (see jobsChildProc.stop), cancelling ctx then, and logs
// the client's totals once it drained.
func runUntilStopped(ctx context.Context, t *testing.T, cancel context.CancelFunc, c *jobs.Client, dir, name string) {
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(dir, "stop-"+name)); err == nil {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("child %s stopped: %+v", name, c.Stats())
}
