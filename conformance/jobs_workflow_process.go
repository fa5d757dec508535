package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// EnvWorkflowSeed, set to an integer, is the seed of the random
// workflows of the multi-process workflow check, to run again a run whose
// seed it logged; unset, the seed is the time.
const EnvWorkflowSeed = "CLAIMSTORE_WORKFLOW_SEED"

const (
	// wfQueue is the queue of the multi-process workflow check.
	wfQueue = "wfproc"
	// wfDepth is the number of layers of each workflow: its longest
	// chain of dependencies.
	wfDepth = 20
	// wfWork is how long each job of the check works.
	wfWork = 10 * time.Millisecond
	// victimWork is how long each job works in the child that is
	// killed, so that it holds running jobs whose outcomes it has not
	// written whenever it is killed.
	victimWork = 200 * time.Millisecond
	// roleWorkflow is the role of the workflow check's children, and
	// roleWorkflowVictim that of the one that is killed.
	roleWorkflow       = "workflow"
	roleWorkflowVictim = "workflow-victim"
)

// What a job of the workflow check is (wfArgs.Role).
const (
	wfRoleTask     = "task"     // a workflow's task
	wfRoleBatch    = "batch"    // a job of the batch
	wfRoleCallback = "callback" // the batch's callback
)

// How a job of the workflow check ends (wfArgs.Mode).
const (
	wfComplete = ""        // completed
	wfDiscard  = "discard" // fails its one attempt: discarded
	wfCancel   = "cancel"  // returns jobs.Cancel: cancelled
)

// wfArgs is the args of the workflow check's jobs: Name is the task's
// name or the batch job's, Mode how its work ends.
type wfArgs struct {
	Role string `json:"role"`
	Name string `json:"name"`
	Mode string `json:"mode,omitempty"`
	// Ms, when not 0, is how long the work works in milliseconds
	// (wfWork otherwise).
	Ms int `json:"ms,omitempty"`
}

func (wfArgs) Kind() string { return "conformance_workflow_proc" }

// wfTask is one task of a generated workflow: its layer, the indexes of
// its dependencies in the workflow, and how its work ends.
type wfTask struct {
	name  string
	layer int
	deps  []int
	mode  string
}

// genWorkflow returns a random workflow of n tasks in exactly depth
// layers: each task after the first layer depends on 1 to 3 tasks of
// earlier layers, one of them in the layer just before it; stoppers tasks
// of the second half of the layers end discarded or cancelled by their
// work, alternately (the first discarded).
func genWorkflow(rng *rand.Rand, n, depth, stoppers int) []wfTask {
	tasks := make([]wfTask, 0, n)
	start := make([]int, depth+1) // start[l]: index of layer l's first task
	for l := range depth {
		start[l] = len(tasks)
		size := n / depth
		if l < n%depth {
			size++
		}
		for i := range size {
			tk := wfTask{name: fmt.Sprintf("L%02d-%04d", l, i), layer: l}
			if l > 0 {
				tk.deps = append(tk.deps, start[l-1]+rng.IntN(start[l]-start[l-1]))
				for range rng.IntN(3) {
					d := rng.IntN(start[l])
					if !containsInt(tk.deps, d) {
						tk.deps = append(tk.deps, d)
					}
				}
			}
			tasks = append(tasks, tk)
		}
	}
	start[depth] = len(tasks)
	from := start[depth/2]
	for k := 0; k < stoppers && k < len(tasks)-from; {
		i := from + rng.IntN(len(tasks)-from)
		if tasks[i].mode != wfComplete {
			continue
		}
		tasks[i].mode = wfDiscard
		if k%2 == 1 {
			tasks[i].mode = wfCancel
		}
		k++
	}
	return tasks
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// longestChain returns the number of tasks on the longest chain of
// dependencies of tasks (each task's dependencies come before it).
func longestChain(tasks []wfTask) int {
	depth := make([]int, len(tasks))
	most := 0
	for i, tk := range tasks {
		depth[i] = 1
		for _, d := range tk.deps {
			depth[i] = max(depth[i], depth[d]+1)
		}
		most = max(most, depth[i])
	}
	return most
}

// descendants returns the tasks that depend, directly or not, on a task
// whose mode is not wfComplete (not those tasks themselves, unless they
// depend on another).
func descendants(tasks []wfTask) map[int]bool {
	out := map[int]bool{}
	for i, tk := range tasks { // dependencies come before their dependents
		for _, d := range tk.deps {
			if tasks[d].mode != wfComplete || out[d] {
				out[i] = true
			}
		}
	}
	return out
}

// wfJob is what the check expects of one job it inserted.
type wfJob struct {
	role string
	flow int // the workflow of a task
	task int // the task's index in its workflow
	want jobs.State
	deps []int64 // the job ids of a task's dependencies
}

// testJobWorkflowProcesses runs random workflows of exactly wfDepth
// layers, with a few tasks whose work discards or cancels them, and a
// batch whose jobs end completed, discarded and cancelled, on 3
// processes; one of them is killed (SIGKILL) while it runs jobs. It
// checks that every task that may run completed once, or ended as its
// work said, and started after each of its dependencies' completing run
// ended; that the cancelled tasks are exactly the descendants of the
// discarded and cancelled ones; that the batch's callback ran once, after
// the batch, with the counts of its jobs' final states; that only the
// jobs the killed process held ran twice, after their lease ended; and
// that nothing is left unfinished.
func testJobWorkflowProcesses(t *testing.T, h JobsHarness) {
	target, st, parent := processTables(t, h)
	if !parent {
		return
	}
	// wait bounds the run: SQLite's one writer serves the three
	// processes' claims, outcomes and promotions one at a time.
	flows, perFlow, stoppers, nBatch, wait := 1, 600, 6, 600, 10*time.Minute
	if os.Getenv(EnvLimitScale) == "full" {
		flows, perFlow, stoppers, nBatch, wait = 10, jobs.MaxWorkflowTasks, 6, 10000, time.Hour
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(EnvWorkflowSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvWorkflowSeed, s, err)
		}
		seed = v
	}
	t.Logf("workflow seed %d (%s=%d runs these workflows again)", seed, EnvWorkflowSeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))

	c := newJobClient(t, st)
	ctx := context.Background()
	want := map[int64]*wfJob{}
	var nTasks, nDesc, nStop int
	for f := range flows {
		tasks := genWorkflow(rng, perFlow, wfDepth, stoppers)
		if got := longestChain(tasks); got != wfDepth {
			t.Fatalf("workflow %d: longest chain %d, want %d", f, got, wfDepth)
		}
		desc := descendants(tasks)
		wf := jobs.Workflow{Tasks: make([]jobs.WorkflowTask, len(tasks))}
		for i, tk := range tasks {
			wt := jobs.WorkflowTask{Name: tk.name, Args: wfArgs{Role: wfRoleTask, Name: tk.name, Mode: tk.mode}, Opts: wfOpts(tk.mode)}
			for _, d := range tk.deps {
				wt.Deps = append(wt.Deps, tasks[d].name)
			}
			wf.Tasks[i] = wt
		}
		var res *jobs.WorkflowResult
		if err := whileRetryable(func() (err error) { res, err = c.InsertWorkflow(ctx, wf); return err }); err != nil {
			t.Fatalf("insert workflow %d: %v", f, err)
		}
		for i, tk := range tasks {
			j := &wfJob{role: wfRoleTask, flow: f, task: i, want: modeState(tk.mode)}
			if desc[i] {
				j.want = jobs.StateCancelled
			} else if tk.mode != wfComplete {
				nStop++
			}
			for _, d := range tk.deps {
				j.deps = append(j.deps, res.Tasks[d].Job.ID)
			}
			want[res.Tasks[i].Job.ID] = j
		}
		nTasks += len(tasks)
		nDesc += len(desc)
	}
	params := make([]jobs.InsertParams, nBatch)
	wantCounts := jobs.BatchCounts{Total: nBatch, Done: true}
	for i := range params {
		mode := wfComplete
		switch i % 10 {
		case 3:
			mode, wantCounts.Discarded = wfDiscard, wantCounts.Discarded+1
		case 7:
			mode, wantCounts.Cancelled = wfCancel, wantCounts.Cancelled+1
		default:
			wantCounts.Completed++
		}
		// The batch's jobs end at different times, its last one well
		// after the others, so that a callback promoted while one job
		// of the batch is open would be seen.
		ms := 10 * (1 + i%7)
		if i == nBatch-1 {
			ms = 1000
		}
		params[i] = jobs.InsertParams{Args: wfArgs{Role: wfRoleBatch, Name: fmt.Sprintf("b%05d", i), Mode: mode, Ms: ms}, Opts: wfOpts(mode)}
	}
	var batch *jobs.BatchResult
	err := whileRetryable(func() (err error) {
		batch, err = c.InsertBatch(ctx, params, jobs.BatchOpts{Callback: wfArgs{Role: wfRoleCallback, Name: "callback"}, CallbackOpts: wfOpts(wfComplete)})
		return err
	})
	if err != nil {
		t.Fatalf("insert batch: %v", err)
	}
	wantCounts.ID = batch.ID
	for i, r := range batch.Jobs {
		want[r.Job.ID] = &wfJob{role: wfRoleBatch, want: modeState(params[i].Args.(wfArgs).Mode)}
	}
	want[batch.Callback.ID] = &wfJob{role: wfRoleCallback, want: jobs.StateCompleted}
	total := len(want)
	t.Logf("%d workflows of %d tasks in %d layers: %d tasks end discarded or cancelled by their work (not counting those that are descendants of another), %d are their descendants; a batch of %d jobs (%d completed, %d discarded, %d cancelled) and its callback",
		flows, perFlow, wfDepth, nStop, nDesc, nBatch, wantCounts.Completed, wantCounts.Discarded, wantCounts.Cancelled)

	// Three processes; the first, on a short lease, is killed once a
	// third of the jobs are final, while it runs some.
	dir := t.TempDir()
	began := time.Now()
	var children []*jobsChildProc
	for p := range 3 {
		role, lease := roleWorkflow, time.Duration(0)
		if p == 0 {
			role, lease = roleWorkflowVictim, procLease
		}
		children = append(children, startJobsChild(t, dir, target, fmt.Sprintf("wf-%d", p), role, lease))
	}
	victim, survivors := children[0], children[1:]
	final := dao.NotNull(jobs.ColFinalizedAt)
	waitAtLeast(t, st, final, total/3, wait, children...)
	// A lease's owner is the client's worker id, "/", the queue and a
	// claim's number after "#".
	owner := victim.name + "/" + wfQueue + "#"
	heldBy := func() map[int64]time.Time { // job id → its lease's end
		rows, err := st.Jobs.Find(ctx, dao.Query{Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.NotNull(jobs.ColLeaseUntil))})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]time.Time{}
		for _, r := range rows {
			if strings.HasPrefix(r.LeaseOwner, owner) {
				out[r.ID] = *r.LeaseUntil
			}
		}
		return out
	}
	// At least 3 jobs held, so that some are likely to run again (a
	// discarded one the rescuer discards without running it again).
	for deadline := time.Now().Add(time.Minute); len(heldBy()) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %s did not run 3 jobs at once within a minute", victim.name)
		}
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	killed := time.Now()
	held := heldBy()
	if len(held) == 0 {
		t.Fatalf("process %s held no job when it was killed", victim.name)
	}
	finalAtKill, err := st.Jobs.Count(ctx, final)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("process %s killed %v after the start, %d of %d jobs final, holding %d jobs (lease %v)",
		victim.name, killed.Sub(began).Round(time.Millisecond), finalAtKill, total, len(held), procLease)

	waitCount(t, st, final, total, wait, survivors...)
	elapsed := time.Since(began)
	time.Sleep(10 * jobsTick) // room for a run that should not come
	for _, ch := range survivors {
		ch.stop(t)
	}
	rows, err := st.Jobs.Find(ctx, dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	runs := readLimRuns(t, dir, children)
	t.Logf("3 processes × 10 workers ran %d jobs (%d runs) in %v", total, len(runs), elapsed.Round(time.Millisecond))
	checkWorkflowRuns(t, want, rows, runs, held, victim.name, began)
	checkBatchCallback(t, want, rows, runs, batch.Callback.ID, wantCounts)
}

// wfOpts are the insert options of a job of the workflow check that ends
// as mode says: one attempt for one that is discarded.
func wfOpts(mode string) *jobs.InsertOpts {
	o := &jobs.InsertOpts{Queue: wfQueue}
	if mode == wfDiscard {
		o.MaxAttempts = 1
	}
	return o
}

// modeState is the final state of a job whose work ends as mode says.
func modeState(mode string) jobs.State {
	switch mode {
	case wfDiscard:
		return jobs.StateDiscarded
	case wfCancel:
		return jobs.StateCancelled
	}
	return jobs.StateCompleted
}

// checkWorkflowRuns checks the final state and the runs of every job of
// want against rows (every job of the table) and runs (every run the
// children recorded): each job in its wanted state; a job that may run
// ran once, or twice when child victim held it when it was killed (held:
// job id → its lease's end) and the second run started after that lease
// ended; a cancelled descendant never ran; a task started after each of
// its dependencies' completing run ended.
func checkWorkflowRuns(t *testing.T, want map[int64]*wfJob, rows []jobs.Row, runs []limRun, held map[int64]time.Time, victim string, began time.Time) {
	t.Helper()
	byID := map[int64][]limRun{}
	count := map[int64]int{}
	for _, r := range runs {
		byID[r.id] = append(byID[r.id], r)
		count[r.id]++
		if want[r.id] == nil {
			t.Errorf("job %d ran, not a job of the check", r.id)
		}
	}
	states := map[jobs.State]int{}
	got := map[int64]*jobs.Row{}
	for i := range rows {
		got[rows[i].ID] = &rows[i]
		states[rows[i].State]++
	}
	if len(rows) != len(want) {
		t.Errorf("%d jobs in the table, want %d", len(rows), len(want))
	}
	// completing is each job's run whose outcome was written: the one
	// outside the killed process when it ran twice.
	completing := map[int64]limRun{}
	var twice, wrongState, unfinished, ranCancelled, lost, early, badDup, heldRerun, heldDiscarded int
	for id, w := range want {
		r := got[id]
		if r == nil {
			t.Errorf("job %d (%s) is not in the table", id, w.role)
			continue
		}
		if r.FinalizedAt == nil {
			unfinished++
		}
		if r.State != w.want {
			if wrongState++; wrongState <= 10 {
				t.Errorf("%s job %d (%s): state %s, attempt %d, errors %s; want %s", w.role, id, wfName(r), r.State, r.Attempt, r.Errors, w.want)
			}
		}
		rs := byID[id]
		switch {
		case w.role == wfRoleTask && w.want == jobs.StateCancelled && w.deps != nil && wfDescendant(w, want):
			if len(rs) > 0 {
				ranCancelled++
				t.Errorf("task %d (%s), a descendant of a task that did not complete, ran %d times; want cancelled before it runs", id, wfName(r), len(rs))
			}
			continue
		case len(rs) == 0:
			// A discarded job the killed process held is discarded by
			// the rescuer (its one attempt lost) without running again;
			// its run in the killed process may be unrecorded if the
			// process died before the work began.
			if _, ok := held[id]; !ok || w.want != jobs.StateDiscarded {
				lost++
				t.Errorf("%s job %d (%s) never ran; want it %s", w.role, id, wfName(r), w.want)
			}
			continue
		case len(rs) == 1:
			completing[id] = rs[0]
		case len(rs) == 2 && rs[0].child == victim && rs[1].child != victim:
			if _, ok := held[id]; !ok {
				badDup++
				t.Errorf("%s job %d (%s) ran twice, first in the killed process %s, which did not hold it when killed", w.role, id, wfName(r), victim)
				continue
			}
			twice++
			if r.Attempt < 2 {
				t.Errorf("%s job %d (%s) ran again on attempt %d, want 2 or more", w.role, id, wfName(r), r.Attempt)
			}
			completing[id] = rs[1]
		default:
			badDup++
			if badDup <= 10 {
				t.Errorf("%s job %d (%s) ran %d times; want once, or twice when the killed process held it", w.role, id, wfName(r), len(rs))
			}
		}
		if lease, ok := held[id]; ok {
			if len(rs) == 1 && rs[0].child == victim {
				heldDiscarded++ // its one attempt lost: the rescuer discarded it
			}
			for _, r := range rs {
				if r.child == victim {
					continue
				}
				if len(rs) == 1 {
					heldRerun++
				}
				// The lease's end is by the database's clock, the start
				// by the host's: on one machine they agree within the
				// tick.
				if start := time.Unix(0, r.start); start.Before(lease.Add(-jobsTick)) {
					t.Errorf("%s job %d (%s) of the killed process ran again %v before its lease ended", w.role, id, wfName(got[id]), lease.Sub(start))
				}
			}
		}
	}
	// Dependencies: every run of a task started after the completing run
	// of each of its dependencies ended.
	for id, w := range want {
		for _, r := range byID[id] {
			for _, d := range w.deps {
				dr, ok := completing[d]
				switch {
				case !ok || got[d] == nil || got[d].State != jobs.StateCompleted:
					early++
					t.Errorf("task %d (%s) ran, but its dependency %d did not complete", id, wfName(got[id]), d)
				case dr.end == 0 || r.start < dr.end:
					if early++; early <= 10 {
						t.Errorf("task %d (%s) started at %v, before its dependency %d (%s) ended at %v",
							id, wfName(got[id]), time.Duration(r.start-began.UnixNano()), d, wfName(got[d]), time.Duration(dr.end-began.UnixNano()))
					}
				}
			}
		}
	}
	// The cancelled tasks are exactly the descendants.
	var wantDesc, gotCancelled, extraCancelled, missingCancel int
	for id, w := range want {
		if w.role != wfRoleTask {
			continue
		}
		isDesc := wfDescendant(w, want)
		r := got[id]
		cancelledUnrun := r != nil && r.State == jobs.StateCancelled && len(byID[id]) == 0 && r.Attempt == 0
		if isDesc {
			wantDesc++
		}
		if cancelledUnrun {
			gotCancelled++
		}
		switch {
		case isDesc && !cancelledUnrun:
			missingCancel++
		case !isDesc && cancelledUnrun:
			if extraCancelled++; extraCancelled <= 10 {
				t.Errorf("task %d (%s) was cancelled without running, not a descendant of a task that did not complete", id, wfName(r))
			}
		}
	}
	if missingCancel > 0 {
		t.Errorf("%d descendants of tasks that did not complete were not cancelled before they ran", missingCancel)
	}
	t.Logf("final states %v; %d run twice because their process was killed (it held %d: %d of them run again, %d claimed but not begun run once elsewhere, %d on their one attempt discarded by the rescuer), %d run twice otherwise, %d never run, %d unfinished, %d in a wrong state",
		states, twice, len(held), twice, heldRerun, heldDiscarded, badDup, lost, unfinished, wrongState)
	t.Logf("dependencies: %d runs started before a dependency completed (its completing run ended); cancelled without running %d, descendants %d (%d not cancelled, %d cancelled that are not descendants, %d descendants run)",
		early, gotCancelled, wantDesc, missingCancel, extraCancelled, ranCancelled)
	if unfinished > 0 {
		t.Errorf("%d jobs left unfinished", unfinished)
	}
}

// wfDescendant reports whether w, a task, is wanted cancelled because a
// task it depends on did not complete (not by its own work).
func wfDescendant(w *wfJob, want map[int64]*wfJob) bool {
	if w.want != jobs.StateCancelled {
		return false
	}
	for _, d := range w.deps {
		if dw := want[d]; dw != nil && dw.want != jobs.StateCompleted {
			return true
		}
	}
	return false
}

// checkBatchCallback checks the batch's callback cb: one completing run
// (its run count checked by checkWorkflowRuns), started after every job
// of the batch ended, whose work received the wanted counts, as its row
// holds them.
func checkBatchCallback(t *testing.T, want map[int64]*wfJob, rows []jobs.Row, runs []limRun, cb int64, wantCounts jobs.BatchCounts) {
	t.Helper()
	var row *jobs.Row
	for i := range rows {
		if rows[i].ID == cb {
			row = &rows[i]
		}
	}
	if row == nil {
		t.Fatalf("the batch's callback %d is not in the table", cb)
	}
	var cbRuns []limRun
	var lastEnd int64
	for _, r := range runs {
		switch {
		case r.id == cb:
			cbRuns = append(cbRuns, r)
		case want[r.id] != nil && want[r.id].role == wfRoleBatch:
			lastEnd = max(lastEnd, r.end)
		}
	}
	var seen *jobs.BatchCounts
	if out := row.Output(); out != nil {
		seen = &jobs.BatchCounts{}
		if err := json.Unmarshal(out, seen); err != nil {
			t.Errorf("the callback's output %s: %v", out, err)
		}
	}
	stored := row.BatchCounts()
	t.Logf("batch callback: %d runs, state %s; its work received %+v; want %+v", len(cbRuns), row.State, seen, wantCounts)
	switch {
	case len(cbRuns) == 0:
		t.Errorf("the batch's callback never ran")
	case cbRuns[0].start < lastEnd:
		t.Errorf("the batch's callback started %v before the batch's last job ended", time.Duration(lastEnd-cbRuns[0].start))
	}
	if seen == nil || *seen != wantCounts {
		t.Errorf("the batch's callback received counts %+v, want %+v", seen, wantCounts)
	}
	if stored == nil || *stored != wantCounts {
		t.Errorf("the batch's callback holds counts %+v, want %+v", stored, wantCounts)
	}
}

// wfName returns r's task name, or its args, for messages.
func wfName(r *jobs.Row) string {
	if r == nil {
		return "?"
	}
	if r.WorkflowTask != nil {
		return *r.WorkflowTask
	}
	return r.EncodedArgs
}

// workflowChild is the workflow check's child: a client of 10 workers
// over wfQueue whose work (victimWork long in role roleWorkflowVictim)
// records its runs as limitsChild's does
// (readLimRuns reads them: the queue field is the job's role, the key its
// name) and ends as the job's mode says; the batch's callback records the
// counts it received as its output. It runs until its stop file appears.
func workflowChild(t *testing.T, st JobStores, dir, name, role string, lease time.Duration) {
	record := openRunLog(t, dir, name)
	ws := jobs.NewWorkers()
	work := jobs.WorkFunc[wfArgs](func(ctx context.Context, j *jobs.Job[wfArgs]) error {
		if err := record("s %d %s 0 %s 0 %d\n", j.ID, j.Args.Role, j.Args.Name, time.Now().UnixNano()); err != nil {
			return err
		}
		switch {
		case role == roleWorkflowVictim:
			time.Sleep(victimWork)
		case j.Args.Ms != 0:
			time.Sleep(time.Duration(j.Args.Ms) * time.Millisecond)
		default:
			time.Sleep(wfWork)
		}
		var end error
		switch {
		case j.Args.Role == wfRoleCallback:
			if err := jobs.RecordOutput(ctx, j.BatchCounts()); err != nil {
				return err
			}
		case j.Args.Mode == wfDiscard:
			end = errors.New("conformance: the work fails its one attempt")
		case j.Args.Mode == wfCancel:
			end = jobs.Cancel(errors.New("conformance: the work cancels its job"))
		}
		if err := record("e %d %d\n", j.ID, time.Now().UnixNano()); err != nil {
			return err
		}
		return end
	})
	if err := jobs.AddWorker(ws, work, jobs.WithTimeout(jobs.NoTimeout)); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{
		Store: st.Jobs, QueueStore: st.Queues, Workers: ws, WorkerID: name,
		Queues:       map[string]jobs.QueueConfig{wfQueue: {MaxWorkers: 10}},
		PollInterval: jobsTick, Lease: lease, RescueInterval: 200 * time.Millisecond, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runUntilStopped(ctx, t, cancel, c, dir, name)
}
