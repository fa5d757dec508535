//go:build linux

package soak

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// wfID is the id of the workflow of workflowRun.
const wfID = "0123456789abcdef0123456789abcdef"

// workflowRun is cleanRun with workflow wf1, inserted at 100 ms: t00,
// then t01 and t02 after it, then t03 after both; each task's one
// attempt run by w1.1 or w2.1 for 100 ms, each after its dependencies.
func workflowRun() *scenario {
	s := cleanRun()
	w := PlannedWorkflow{Label: "wf1", At: 100 * time.Millisecond, Tasks: []PlannedTask{
		{Name: "t00"}, {Name: "t01", Deps: []string{"t00"}}, {Name: "t02", Deps: []string{"t00"}}, {Name: "t03", Deps: []string{"t01", "t02"}},
	}}
	s.st.Workflows = []PlannedWorkflow{w}
	s.events = append(s.events, Event{T: at(100), Proc: "orch", Kind: EvWorkflow, Target: "wf1", Key: wfID, N: 4})
	for i, start := range []int{200, 350, 360, 500} {
		s.taskRun("wf1/"+w.Tasks[i].Name, []string{"w1.1", "w2.1"}[i%2], 1, start, start+100)
		s.st.Tasks = append(s.st.Tasks, TaskState{QueueJobState: QueueJobState{State: "completed", Attempt: 1},
			WorkflowID: wfID, WF: "wf1", Task: w.Tasks[i].Name, Deps: w.Tasks[i].Deps})
	}
	return s
}

// taskRun adds a run of attempt of task key by proc from ms to end (none
// when end < 0).
func (s *scenario) taskRun(key, proc string, attempt int64, ms, end int) {
	s.events = append(s.events, Event{T: at(ms), Proc: proc, Kind: EvTaskStart, Key: key, N: attempt, Owner: proc + "-q#2", LeaseUntil: at(ms + 2000)})
	if end >= 0 {
		s.events = append(s.events, Event{T: at(end), Proc: proc, Kind: EvTaskEnd, Key: key, N: attempt})
	}
}

// task returns the state of task name of wf1.
func (s *scenario) task(name string) *TaskState {
	for i := range s.st.Tasks {
		if s.st.Tasks[i].Task == name {
			return &s.st.Tasks[i]
		}
	}
	panic("no task " + name)
}

// moveRun moves the start of the run of task key at attempt to ms.
func (s *scenario) moveRun(key string, attempt int64, ms int) {
	for i, e := range s.events {
		if e.Kind == EvTaskStart && e.Key == key && e.N == attempt {
			s.events[i].T = at(ms)
		}
	}
}

func TestCheckWorkflows(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		rep := workflowRun().check(t)
		if len(rep.Violations) != 0 || rep.Workflows != 1 || rep.WorkflowsDone != 1 || rep.WorkflowTasks != 4 || rep.WorkflowDeps != 4 ||
			rep.Tasks.Completed != 4 || rep.Tasks.Runs != 4 || rep.WorkflowLongest != 500*time.Millisecond {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("started before a dependency completed", func(t *testing.T) {
		s := workflowRun()
		s.moveRun("wf1/t03", 1, 450) // t02 ends at 460
		rep := s.check(t)
		wantViolation(t, rep, "workflow task ran before its dependency completed")
		if !strings.Contains(rep.Violations[0], "wf1/t02") {
			t.Fatalf("the violation does not name t02: %s", rep.Violations[0])
		}
	})
	t.Run("started when its dependency completed", func(t *testing.T) {
		s := workflowRun()
		s.moveRun("wf1/t03", 1, 460)
		if rep := s.check(t); len(rep.Violations) != 0 {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	// rerun: t01's first attempt by w2.1 ends at 450 but its process is
	// killed at 455, before its outcome; the second attempt by w1.1 runs
	// from 2500 to 2600 and completes, and t03 runs from start.
	rerun := func(start int) *scenario {
		s := workflowRun()
		s.fault(455, 1, FaultKill, "w2.1")
		s.taskRun("wf1/t01", "w1.1", 2, 2500, 2600)
		t01 := s.task("t01")
		t01.Attempt = 2
		t01.Errors = `[{"attempt":1,"error":"attempt lost: its lease ended before an outcome was written"}]`
		s.moveRun("wf1/t03", 1, start)
		for i, e := range s.events {
			if e.Kind == EvTaskEnd && e.Key == "wf1/t03" {
				s.events[i].T = at(start + 100)
			}
		}
		return s
	}
	t.Run("run again after a kill", func(t *testing.T) {
		rep := rerun(2700).check(t)
		if len(rep.Violations) != 0 || rep.Tasks.Runs != 5 || rep.Tasks.Completed != 4 || rep.Tasks.Lost["SIGKILL"] != 1 || rep.WorkflowsDone != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("started after a lost attempt of its dependency", func(t *testing.T) {
		// t01's first run ended at 450, but its attempt was lost: t03
		// may not start before the completing run ends at 2600.
		wantViolation(t, rerun(1000).check(t), "workflow task ran before its dependency completed")
	})
	t.Run("not finished", func(t *testing.T) {
		s := workflowRun()
		s.task("t03").State = "pending"
		s.events = slices.DeleteFunc(s.events, func(e Event) bool { return e.Key == "wf1/t03" })
		rep := s.check(t)
		if len(rep.Violations) != 2 || !strings.HasPrefix(rep.Violations[0], "workflow task not completed:") ||
			!strings.HasPrefix(rep.Violations[1], "workflow not finished:") || rep.WorkflowsDone != 0 {
			t.Fatalf("violations %q, finished %d", rep.Violations, rep.WorkflowsDone)
		}
	})
	t.Run("completed twice", func(t *testing.T) {
		s := workflowRun()
		s.taskRun("wf1/t02", "w2.1", 1, 370, 455)
		wantViolation(t, s.check(t), "workflow task attempt run twice")
	})
	t.Run("completed without its end", func(t *testing.T) {
		s := workflowRun()
		s.events = slices.DeleteFunc(s.events, func(e Event) bool { return e.Kind == EvTaskEnd && e.Key == "wf1/t00" })
		rep := s.check(t)
		// t01 and t02 ran, but t00 has no recorded completion.
		if len(rep.Violations) != 4 || !strings.HasPrefix(rep.Violations[0], "workflow task completed without its end:") ||
			!strings.HasPrefix(rep.Violations[1], "workflow task ran before its dependency completed:") ||
			!strings.HasPrefix(rep.Violations[3], "workflow not finished:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	t.Run("not inserted", func(t *testing.T) {
		s := workflowRun()
		for i, e := range s.events {
			if e.Kind == EvWorkflow {
				s.events[i].Key, s.events[i].Err = "", "connection refused"
			}
		}
		s.st.Tasks = nil
		s.events = slices.DeleteFunc(s.events, func(e Event) bool { return e.Kind == EvTaskStart || e.Kind == EvTaskEnd })
		wantViolation(t, s.check(t), "workflow not inserted")
	})
	t.Run("stored with other dependencies", func(t *testing.T) {
		s := workflowRun()
		s.task("t03").Deps = []string{"t01"}
		wantViolation(t, s.check(t), "workflow task stored wrong")
	})
	t.Run("task lost", func(t *testing.T) {
		s := workflowRun()
		s.st.Tasks = s.st.Tasks[:3]
		s.events = slices.DeleteFunc(s.events, func(e Event) bool { return e.Key == "wf1/t03" })
		rep := s.check(t)
		if len(rep.Violations) != 2 || !strings.HasPrefix(rep.Violations[0], "workflow task lost:") || !strings.HasPrefix(rep.Violations[1], "workflow not finished:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	t.Run("task from nowhere", func(t *testing.T) {
		s := workflowRun()
		s.taskRun("wf9/t00", "w1.1", 1, 700, 800)
		wantViolation(t, s.check(t), "workflow task from nowhere")
	})
}

func TestPlanWorkflows(t *testing.T) {
	d := 2 * time.Minute
	a := PlanWorkflows(42, d)
	if len(a) != 11 { // at 2 s, 12 s, ..., 102 s
		t.Fatalf("%d workflows in %v", len(a), d)
	}
	for i := range a {
		if !slices.EqualFunc(a[i].Tasks, PlanWorkflows(42, d)[i].Tasks, func(x, y PlannedTask) bool { return x.Name == y.Name && slices.Equal(x.Deps, y.Deps) }) {
			t.Fatal("the same seed gave two plans")
		}
	}
	if n := len(PlanWorkflows(42, 40*time.Second)); n != 3 {
		t.Fatalf("%d workflows in 40 s, want 3 (at 2, 12 and 22 s)", n)
	}
	if n := len(PlanWorkflows(42, 5*time.Second)); n != 1 {
		t.Fatalf("%d workflows in 5 s, want at least one", n)
	}
	several := 0
	for _, w := range a {
		if len(w.Tasks) < workflowMinTasks || len(w.Tasks) > workflowMaxTasks || w.At > d-workflowTail {
			t.Fatalf("workflow %s: %d tasks at %v", w.Label, len(w.Tasks), w.At)
		}
		index := map[string]int{}
		for i, task := range w.Tasks {
			index[task.Name] = i
			if len(task.Deps) > 1 {
				several++
			}
			for _, dep := range task.Deps {
				if j, ok := index[dep]; !ok || j >= i {
					t.Fatalf("workflow %s: task %s depends on %s, not an earlier task", w.Label, task.Name, dep)
				}
			}
		}
		// The last task waits for every task no other waits for.
		needed := map[string]bool{}
		for _, task := range w.Tasks {
			for _, dep := range task.Deps {
				needed[dep] = true
			}
		}
		for _, task := range w.Tasks[:len(w.Tasks)-1] {
			if !needed[task.Name] {
				t.Fatalf("workflow %s: nothing waits for %s", w.Label, task.Name)
			}
		}
		insertWorkflow(t, w)
	}
	if several < len(a) {
		t.Fatalf("%d tasks with several dependencies in %d workflows", several, len(a))
	}
}

// insertWorkflow inserts w into a memory job table and fails t unless the
// job queue takes it and stores its tasks with their dependencies.
func insertWorkflow(t *testing.T, w PlannedWorkflow) {
	t.Helper()
	ctx := context.Background()
	store, err := memstore.New[jobs.Row]()
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.InsertWorkflow(ctx, w.Workflow())
	if err != nil {
		t.Fatalf("workflow %s: %v", w.Label, err)
	}
	info, err := c.Workflow(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Tasks) != len(w.Tasks) {
		t.Fatalf("workflow %s: %d tasks stored, want %d", w.Label, len(info.Tasks), len(w.Tasks))
	}
	for i, task := range info.Tasks {
		if task.Name != w.Tasks[i].Name || !slices.Equal(sortedCopy(task.Deps), sortedCopy(w.Tasks[i].Deps)) {
			t.Fatalf("workflow %s: task %s after %q stored, want %s after %q", w.Label, task.Name, task.Deps, w.Tasks[i].Name, w.Tasks[i].Deps)
		}
	}
}
