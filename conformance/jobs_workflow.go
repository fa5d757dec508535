package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// flowArgs is the args of a task of the Workflow checks: its output is
// Value plus the outputs of the dependencies Deps names (read with
// Row.DependencyOutput); with Mode "cancel" it ends cancelled, with
// "fail" it fails, with "gate" it waits for the check's gate first.
type flowArgs struct {
	Value int      `json:"value"`
	Deps  []string `json:"deps,omitempty"`
	Mode  string   `json:"mode,omitempty"`
}

func (flowArgs) Kind() string { return "conformance_flow" }

// flowRun is what flowLog keeps of one task's job.
type flowRun struct {
	runs       int
	start, end time.Time      // of the last run (host clock, monotonic)
	inputs     map[string]int // dependency outputs the last run read
	readErr    error          // a DependencyOutput error other than not found
}

// flowLog records the runs of flowArgs jobs by job id.
type flowLog struct {
	mu      sync.Mutex
	runs    map[int64]*flowRun
	started atomic.Int64
	gate    chan struct{}
}

func newFlowLog() *flowLog {
	return &flowLog{runs: map[int64]*flowRun{}, gate: make(chan struct{})}
}

// run returns a copy of what l recorded of job id (zero: it never ran).
func (l *flowLog) run(id int64) flowRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.runs[id]; r != nil {
		return *r
	}
	return flowRun{}
}

// addFlowWorker registers the flowArgs worker of l in ws.
func addFlowWorker(t *testing.T, ws *jobs.Workers, l *flowLog) {
	t.Helper()
	err := jobs.AddWorker(ws, jobs.WorkFunc[flowArgs](func(ctx context.Context, j *jobs.Job[flowArgs]) error {
		start := time.Now()
		l.started.Add(1)
		a := j.Args
		sum, inputs := a.Value, map[string]int{}
		var readErr error
		for _, d := range a.Deps {
			var v int
			if err := j.DependencyOutput(d, &v); err != nil {
				if !errors.Is(err, dao.ErrNotFound) {
					readErr = err
				}
				continue
			}
			inputs[d] = v
			sum += v
		}
		if a.Mode == "gate" {
			select {
			case <-l.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		end := time.Now()
		l.mu.Lock()
		r := l.runs[j.ID]
		if r == nil {
			r = &flowRun{}
			l.runs[j.ID] = r
		}
		r.runs++
		r.start, r.end, r.inputs, r.readErr = start, end, inputs, readErr
		l.mu.Unlock()
		switch a.Mode {
		case "cancel":
			return jobs.Cancel(errors.New("flow task asks to be cancelled"))
		case "fail":
			return errors.New("flow task fails")
		}
		return jobs.RecordOutput(ctx, sum)
	}), jobs.WithBackoff(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
}

// startFlowClients starts n clients over st, each running the default
// queue with workers workers and the flowArgs worker of l.
func startFlowClients(t *testing.T, st JobStores, n, workers int, l *flowLog) []*jobClient {
	t.Helper()
	out := make([]*jobClient, n)
	for i := range out {
		out[i] = startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
			cfg.Queues = map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: workers}}
			cfg.Lease = 30 * time.Second // see startSeqClients
			addFlowWorker(t, ws, l)
		})
	}
	return out
}

// flowTask returns a task of name with value v, depending on deps.
func flowTask(name string, v int, mode string, deps ...string) jobs.WorkflowTask {
	return jobs.WorkflowTask{Name: name, Args: flowArgs{Value: v, Deps: deps, Mode: mode}, Deps: deps}
}

// insertFlow inserts wf through c, again while the error is retryable,
// and fails t on error.
func insertFlow(t *testing.T, c *jobs.Client, wf jobs.Workflow) *jobs.WorkflowResult {
	t.Helper()
	var res *jobs.WorkflowResult
	err := whileRetryable(func() (err error) {
		res, err = c.InsertWorkflow(context.Background(), wf)
		return err
	})
	if err != nil {
		t.Fatalf("insert workflow: %v", err)
	}
	return res
}

// flowIDs returns the job id of each task of res by name.
func flowIDs(wf jobs.Workflow, res *jobs.WorkflowResult) map[string]int64 {
	out := map[string]int64{}
	for i, task := range wf.Tasks {
		out[task.Name] = res.Tasks[i].Job.ID
	}
	return out
}

// checkFlowOrder fails t for each task of wf, run per l, that started
// before one of its completed dependencies ended, and returns the
// number of such tasks.
func checkFlowOrder(t *testing.T, wf jobs.Workflow, ids map[string]int64, l *flowLog) int {
	t.Helper()
	bad := 0
	for _, task := range wf.Tasks {
		r := l.run(ids[task.Name])
		if r.runs == 0 {
			continue
		}
		for _, d := range task.Deps {
			dr := l.run(ids[d])
			if dr.runs > 0 && !r.start.After(dr.end) {
				bad++
				t.Errorf("task %s started %v before its dependency %s ended", task.Name, dr.end.Sub(r.start), d)
			}
		}
	}
	return bad
}

// checkWorkflowInfo checks that c.Workflow lists the tasks of wf as
// inserted (res), in order, with their dependencies and the states want
// gives by name, and fails t otherwise.
func checkWorkflowInfo(t *testing.T, c *jobs.Client, wf jobs.Workflow, res *jobs.WorkflowResult, want map[string]jobs.State) {
	t.Helper()
	info, err := c.Workflow(context.Background(), res.ID)
	if err != nil {
		t.Fatalf("workflow %s: %v", res.ID, err)
	}
	if info.ID != res.ID || len(info.Tasks) != len(wf.Tasks) {
		t.Fatalf("workflow %s: listed %s with %d tasks, want %d", res.ID, info.ID, len(info.Tasks), len(wf.Tasks))
	}
	for i, task := range wf.Tasks {
		got := info.Tasks[i]
		if got.Name != task.Name || got.JobID != res.Tasks[i].Job.ID || !slices.Equal(got.Deps, task.Deps) || got.Job == nil || got.Job.ID != got.JobID {
			t.Errorf("workflow task %d: listed %s (job %d, deps %v), want %s (job %d, deps %v)",
				i, got.Name, got.JobID, got.Deps, task.Name, res.Tasks[i].Job.ID, task.Deps)
		}
		if s, ok := want[task.Name]; ok && got.State != s {
			t.Errorf("workflow task %s: listed %s, want %s", task.Name, got.State, s)
		}
	}
}

// testJobWorkflow checks workflows: a diamond runs in dependency order
// with its outputs passed along; cancelled and discarded dependencies
// cancel their dependents transitively unless ignored; invalid DAGs are
// refused with nothing written; clients finishing dependencies together
// promote each task once; a workflow inserted in a transaction exists
// once it commits.
func testJobWorkflow(t *testing.T, h JobsHarness) {
	t.Run("Diamond", func(t *testing.T) { testJobWorkflowDiamond(t, h) })
	t.Run("Cancel", func(t *testing.T) { testJobWorkflowCancel(t, h) })
	t.Run("Invalid", func(t *testing.T) { testJobWorkflowInvalid(t, h) })
	t.Run("Clients", func(t *testing.T) { testJobWorkflowClients(t, h) })
	t.Run("Tx", func(t *testing.T) { testJobWorkflowTx(t, h) })
}

// testJobWorkflowDiamond: a → b, c → d on two clients: b and c start
// after a ended, d after both; each task reads its dependencies'
// outputs and records the sum.
func testJobWorkflowDiamond(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	l := newFlowLog()
	cs := startFlowClients(t, st, 2, 4, l)
	wf := jobs.Workflow{Tasks: []jobs.WorkflowTask{
		flowTask("d", 1000, "", "b", "c"), // listed first: insertion order is not dependency order
		flowTask("b", 10, "", "a"),
		flowTask("c", 100, "", "a"),
		flowTask("a", 1, ""),
	}}
	res := insertFlow(t, cs[0].Client, wf)
	ids := flowIDs(wf, res)
	for i, task := range wf.Tasks {
		want := jobs.StatePending
		if len(task.Deps) == 0 {
			want = jobs.StateAvailable
		}
		if j := res.Tasks[i].Job; j.State != want || j.WorkflowID == nil || *j.WorkflowID != res.ID {
			t.Fatalf("task %s inserted %s in workflow %v, want %s in %s", task.Name, j.State, j.WorkflowID, want, res.ID)
		}
	}
	d := waitJob(t, cs[1].Client, ids["d"], 90*time.Second, "completed", inState(jobs.StateCompleted))
	want := map[string]int{"a": 1, "b": 11, "c": 101, "d": 1112}
	for name, v := range want {
		r := waitJob(t, cs[0].Client, ids[name], time.Second, "completed", inState(jobs.StateCompleted))
		if got := string(r.Output()); got != fmt.Sprint(v) {
			t.Errorf("task %s output %s, want %d", name, got, v)
		}
		// More than one run is a redelivery after a refused outcome
		// write (the Clients check counts completions exactly).
		if run := l.run(ids[name]); run.runs == 0 || run.readErr != nil {
			t.Errorf("task %s ran %d times (read error %v), want once", name, run.runs, run.readErr)
		}
	}
	if in := l.run(ids["d"]).inputs; !maps.Equal(in, map[string]int{"b": 11, "c": 101}) {
		t.Errorf("task d read inputs %v, want b 11 and c 101", in)
	}
	var v int
	if err := d.DependencyOutput("b", &v); err != nil || v != 11 {
		t.Errorf("d.DependencyOutput(b): %d, %v; want 11", v, err)
	}
	if err := d.DependencyOutput("a", &v); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("d.DependencyOutput(a), not a dependency: %v, want dao.ErrNotFound", err)
	}
	bad := checkFlowOrder(t, wf, ids, l)
	a, b, c, dr := l.run(ids["a"]), l.run(ids["b"]), l.run(ids["c"]), l.run(ids["d"])
	t.Logf("diamond: a ended, then b started +%v, c +%v; d started %v after b and c ended; out of order %d",
		b.start.Sub(a.end), c.start.Sub(a.end), dr.start.Sub(later(b.end, c.end)), bad)
	checkWorkflowInfo(t, cs[0].Client, wf, res, map[string]jobs.State{"a": jobs.StateCompleted, "b": jobs.StateCompleted, "c": jobs.StateCompleted, "d": jobs.StateCompleted})
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// testJobWorkflowCancel: a cancelled or discarded dependency cancels its
// dependents, transitively, and they never run, unless the task or the
// workflow ignores that state; Client.Cancel of a pending task cancels
// the tasks after it.
func testJobWorkflowCancel(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	l := newFlowLog()
	cs := startFlowClients(t, st, 2, 6, l)
	c := cs[0]
	ctx := context.Background()
	ignoreC := func(task jobs.WorkflowTask) jobs.WorkflowTask { task.IgnoreCancelled = true; return task }
	ignoreD := func(task jobs.WorkflowTask) jobs.WorkflowTask { task.IgnoreDiscarded = true; return task }
	fail := flowTask("f", 7, "fail")
	fail.Opts = &jobs.InsertOpts{MaxAttempts: 1}
	wf := jobs.Workflow{Tasks: []jobs.WorkflowTask{
		flowTask("a", 1, "cancel"),
		flowTask("b", 2, "", "a"),
		flowTask("c", 3, "", "b"),
		ignoreC(flowTask("d", 4, "", "a", "x")),
		flowTask("x", 5, ""),
		flowTask("e", 6, "", "b", "x"),
		fail,
		flowTask("g", 8, "", "f"),
		ignoreD(flowTask("h", 9, "", "f", "x")),
		ignoreC(flowTask("i", 10, "", "f")),
		flowTask("j", 11, "", "d", "h"),
	}}
	res := insertFlow(t, c.Client, wf)
	ids := flowIDs(wf, res)
	want := map[string]jobs.State{
		"a": jobs.StateCancelled, "b": jobs.StateCancelled, "c": jobs.StateCancelled, "d": jobs.StateCompleted,
		"x": jobs.StateCompleted, "e": jobs.StateCancelled, "f": jobs.StateDiscarded, "g": jobs.StateCancelled,
		"h": jobs.StateCompleted, "i": jobs.StateCancelled, "j": jobs.StateCompleted,
	}
	for name, s := range want {
		waitJob(t, c.Client, ids[name], 60*time.Second, string(s), inState(s))
	}
	for _, name := range []string{"b", "c", "e", "g", "i"} {
		if n := l.run(ids[name]).runs; n != 0 {
			t.Errorf("task %s, cancelled by a dependency, ran %d times", name, n)
		}
	}
	if in := l.run(ids["d"]).inputs; !maps.Equal(in, map[string]int{"x": 5}) {
		t.Errorf("task d (a cancelled, ignored) read inputs %v, want x 5 only", in)
	}
	if in := l.run(ids["j"]).inputs; !maps.Equal(in, map[string]int{"d": 9, "h": 14}) {
		t.Errorf("task j read inputs %v, want d 9 and h 14", in)
	}
	checkFlowOrder(t, wf, ids, l)
	checkWorkflowInfo(t, c.Client, wf, res, want)

	// The workflow's option applies to every task.
	wf2 := jobs.Workflow{IgnoreCancelled: true, Tasks: []jobs.WorkflowTask{
		flowTask("a", 1, "cancel"), flowTask("b", 2, "", "a"), flowTask("c", 3, "", "b"),
	}}
	res2 := insertFlow(t, c.Client, wf2)
	ids2 := flowIDs(wf2, res2)
	r := waitJob(t, c.Client, ids2["c"], 60*time.Second, "completed", inState(jobs.StateCompleted))
	if got := string(r.Output()); got != "5" {
		t.Errorf("workflow ignoring cancelled: c output %s, want 5", got)
	}

	// Client.Cancel of a pending task cancels the tasks after it, not the
	// one it waits for.
	wf3 := jobs.Workflow{Tasks: []jobs.WorkflowTask{
		flowTask("q", 1, "gate"), flowTask("r", 2, "", "q"), flowTask("s", 3, "", "r"),
	}}
	res3 := insertFlow(t, c.Client, wf3)
	ids3 := flowIDs(wf3, res3)
	if _, err := c.Cancel(ctx, ids3["r"]); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitJob(t, c.Client, ids3["s"], 30*time.Second, "cancelled", inState(jobs.StateCancelled))
	close(l.gate)
	waitJob(t, c.Client, ids3["q"], 30*time.Second, "completed", inState(jobs.StateCompleted))
	time.Sleep(10 * jobsTick)
	checkWorkflowInfo(t, c.Client, wf3, res3, map[string]jobs.State{"q": jobs.StateCompleted, "r": jobs.StateCancelled, "s": jobs.StateCancelled})
	if n := l.run(ids3["r"]).runs + l.run(ids3["s"]).runs; n != 0 {
		t.Errorf("cancelled tasks r and s ran %d times", n)
	}
}

// testJobWorkflowInvalid: bad workflows are refused with
// dao.ErrInvalidArgument and write nothing.
func testJobWorkflowInvalid(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	ws := jobs.NewWorkers()
	addFlowWorker(t, ws, newFlowLog())
	c := newJobClientWith(t, st, func(cfg *jobs.Config) { cfg.Workers = ws })
	ctx := context.Background()
	ok := flowTask("ok", 1, "")
	many := make([]jobs.WorkflowTask, jobs.MaxWorkflowTasks+1)
	for i := range many {
		many[i] = flowTask(fmt.Sprintf("t%d", i), 1, "")
	}
	unique := flowTask("u", 1, "")
	unique.Opts = &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}}
	seq := flowTask("s", 1, "")
	seq.Opts = &jobs.InsertOpts{Sequence: jobs.SequenceOpts{Key: "k"}}
	badPrio := flowTask("p", 1, "", "ok")
	badPrio.Opts = &jobs.InsertOpts{Priority: 99}
	for _, tc := range []struct {
		name  string
		tasks []jobs.WorkflowTask
	}{
		{"no tasks", nil},
		{"too many tasks", many},
		{"cycle", []jobs.WorkflowTask{ok, flowTask("a", 1, "", "c"), flowTask("b", 1, "", "a"), flowTask("c", 1, "", "b", "ok")}},
		{"self dependency", []jobs.WorkflowTask{ok, flowTask("a", 1, "", "a")}},
		{"unknown dependency", []jobs.WorkflowTask{ok, flowTask("a", 1, "", "ok", "nope")}},
		{"duplicate name", []jobs.WorkflowTask{ok, flowTask("a", 1, "", "ok"), flowTask("a", 2, "")}},
		{"dependency listed twice", []jobs.WorkflowTask{ok, flowTask("a", 1, "", "ok", "ok")}},
		{"empty name", []jobs.WorkflowTask{ok, flowTask("", 1, "")}},
		{"bad name", []jobs.WorkflowTask{ok, flowTask("a b", 1, "")}},
		{"long name", []jobs.WorkflowTask{ok, flowTask(strings.Repeat("n", jobs.MaxTaskNameLen+1), 1, "")}},
		{"nil args", []jobs.WorkflowTask{ok, {Name: "a"}}},
		{"unique task", []jobs.WorkflowTask{ok, unique}},
		{"task in a sequence", []jobs.WorkflowTask{ok, seq}},
		{"bad options", []jobs.WorkflowTask{ok, badPrio}},
	} {
		if _, err := c.InsertWorkflow(ctx, jobs.Workflow{Tasks: tc.tasks}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: %v, want dao.ErrInvalidArgument", tc.name, err)
		}
	}
	n, err := st.Jobs.Count(ctx, dao.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d jobs inserted by refused workflows, want 0", n)
	}
	if _, err := c.Workflow(ctx, "no-such-workflow"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("Workflow of an unknown id: %v, want dao.ErrNotFound", err)
	}
}

// testJobWorkflowClients: 3 clients of 10 workers run 4 workflows whose
// 24 roots are held until all have started, then let go together, so
// that the clients finish the dependencies of the same tasks at the
// same moment: every task completes exactly once (one committed
// completion, counted by the clients' events), after its dependencies,
// with their outputs.
func testJobWorkflowClients(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	l := newFlowLog()
	cs := startFlowClients(t, st, 3, 10, l)
	var evMu sync.Mutex
	completions := map[int64]int{}
	var evWG sync.WaitGroup
	var unsubscribes []func()
	defer func() {
		for _, u := range unsubscribes {
			u()
		}
		evWG.Wait()
	}()
	for _, c := range cs {
		ch, unsubscribe, err := c.Subscribe(jobs.EventJobCompleted)
		if err != nil {
			t.Fatal(err)
		}
		unsubscribes = append(unsubscribes, unsubscribe)
		evWG.Add(1)
		go func() {
			defer evWG.Done()
			for ev := range ch {
				evMu.Lock()
				completions[ev.Job.ID]++
				evMu.Unlock()
			}
		}()
	}
	const flows, roots = 4, 6
	type flow struct {
		wf  jobs.Workflow
		res *jobs.WorkflowResult
		ids map[string]int64
	}
	var all []flow
	var rootNames []string
	for i := range roots {
		rootNames = append(rootNames, fmt.Sprintf("r%d", i))
	}
	for f := range flows {
		var tasks []jobs.WorkflowTask
		for i, r := range rootNames {
			tasks = append(tasks, flowTask(r, 1<<i, "gate"))
		}
		tasks = append(tasks,
			flowTask("m0", 0, "", "r0", "r1"), flowTask("m1", 0, "", "r2", "r3"), flowTask("m2", 0, "", "r4", "r5"),
			flowTask("fan", 0, "", rootNames...),
			flowTask("sink", 0, "", "m0", "m1", "m2", "fan"),
			flowTask("last", 0, "", "sink"),
		)
		wf := jobs.Workflow{Tasks: tasks}
		res := insertFlow(t, cs[f%len(cs)].Client, wf)
		all = append(all, flow{wf, res, flowIDs(wf, res)})
	}
	deadline := time.Now().Add(60 * time.Second)
	for l.started.Load() < flows*roots {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d roots started", l.started.Load(), flows*roots)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(l.gate)
	total := 0
	for _, f := range all {
		total += len(f.wf.Tasks)
	}
	// Room for redeliveries: an outcome write SQLite refuses under load
	// runs the job again when its 30 s lease ends, at any level.
	waitCount(t, st, dao.Eq(jobs.ColState, string(jobs.StateCompleted)), total, 180*time.Second)
	time.Sleep(10 * jobsTick) // room for a second run, should one come
	var dup, lost, redelivered, bad int
	evMu.Lock()
	done := maps.Clone(completions)
	evMu.Unlock()
	for _, f := range all {
		for _, task := range f.wf.Tasks {
			id := f.ids[task.Name]
			switch n := done[id]; {
			case n == 0:
				lost++
			case n > 1:
				dup += n - 1
				t.Errorf("workflow %s: task %s (job %d) completed %d times", f.res.ID, task.Name, id, n)
			}
			// A run whose outcome write the database refused (SQLite
			// busy past its timeout, logged "outcomes not written") runs
			// again once its lease ends: at least once, not completed
			// twice.
			redelivered += max(l.run(id).runs-1, 0)
		}
		bad += checkFlowOrder(t, f.wf, f.ids, l)
		r := waitJob(t, cs[0].Client, f.ids["last"], time.Second, "completed", inState(jobs.StateCompleted))
		// sink = m0 + m1 + m2 + fan = 2 × (1 + 2 + ... + 32).
		if got := string(r.Output()); got != fmt.Sprint(2*(1<<roots-1)) {
			t.Errorf("workflow %s: last output %s, want %d", f.res.ID, got, 2*(1<<roots-1))
		}
	}
	t.Logf("workflows: %d × %d tasks over %d clients: completions duplicated %d, lost %d; runs redelivered after a refused outcome write %d; started before a dependency ended %d",
		flows, total/flows, len(cs), dup, lost, redelivered, bad)
	if dup != 0 || lost != 0 {
		t.Fatalf("duplicated completions %d, lost %d: want every task completed exactly once", dup, lost)
	}
}

// testJobWorkflowTx: a workflow inserted in a rolled-back transaction
// does not exist; one committed runs to its end.
func testJobWorkflowTx(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	if st.Begin == nil {
		h.skipOrFail(t, CheckJobsTx, "JobStores.Begin")
	}
	l := newFlowLog()
	c := startFlowClients(t, st, 1, 4, l)[0]
	ctx := context.Background()
	wf := jobs.Workflow{Tasks: []jobs.WorkflowTask{flowTask("a", 1, ""), flowTask("b", 2, "", "a")}}
	tx, _, rollback := st.Begin(t)
	res, err := c.InsertWorkflowTx(ctx, tx, wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Workflow(ctx, res.ID); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("workflow of a rolled-back transaction: %v, want dao.ErrNotFound", err)
	}
	tx, commit, _ := st.Begin(t)
	if res, err = c.InsertWorkflowTx(ctx, tx, wf); err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	b := waitJob(t, c.Client, res.Tasks[1].Job.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
	if got := string(b.Output()); got != "3" {
		t.Errorf("task b output %s, want 3", got)
	}
}
