//go:build linux

package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/claimstore/claimstore/jobs"
)

// Workflows of a run.
const (
	workflowFirst    = 2 * time.Second  // the first workflow's offset in the load
	workflowEvery    = 10 * time.Second // one workflow per this much load, at least one
	workflowTail     = 15 * time.Second // no workflow inserted this close to the end of the load (but the first)
	workflowMinTasks = 12
	workflowMaxTasks = 20
	workflowMaxDeps  = 3 // the most dependencies drawn for a task (the last task may have more)
)

// PlannedTask is one task of a planned workflow.
type PlannedTask struct {
	// Name is the task's name in its workflow ("t07").
	Name string
	// Deps are the names of the tasks it depends on, all earlier ones.
	Deps []string
}

// PlannedWorkflow is one workflow the orchestrator inserts during the
// load.
type PlannedWorkflow struct {
	// Label names it in the run ("wf3") and in its tasks' args.
	Label string
	// At is its insert's offset from the start of the load.
	At time.Duration
	// Tasks are its tasks, each after those it depends on.
	Tasks []PlannedTask
}

// PlanWorkflows draws the workflows of a load of length d from seed: one
// every 10 s of load from its 2nd second to 15 s before its end, so that
// the last finishes within the load (at least one), each a random
// directed acyclic graph of 12 to 20 tasks in which each task after the
// first depends on 0 to 3 earlier ones and the last depends on every task
// no other depends on (so it waits for the whole graph, and has several
// dependencies unless the graph is a chain). The same seed and length
// give the same workflows.
func PlanWorkflows(seed uint64, d time.Duration) []PlannedWorkflow {
	rng := rand.New(rand.NewPCG(seed^0x5bd1e9955bd1e995, seed+1))
	n := 1
	if d > workflowFirst+workflowTail {
		n += int((d - workflowFirst - workflowTail) / workflowEvery)
	}
	out := make([]PlannedWorkflow, n)
	for i := range out {
		size := workflowMinTasks + rng.IntN(workflowMaxTasks-workflowMinTasks+1)
		tasks := make([]PlannedTask, size)
		needed := map[string]bool{}
		for t := range tasks {
			tasks[t].Name = fmt.Sprintf("t%02d", t)
			if t == 0 || t == size-1 {
				continue
			}
			k := rng.IntN(min(t, workflowMaxDeps) + 1)
			for _, j := range rng.Perm(t)[:k] {
				tasks[t].Deps = append(tasks[t].Deps, tasks[j].Name)
				needed[tasks[j].Name] = true
			}
			slices.Sort(tasks[t].Deps)
		}
		last := &tasks[size-1]
		for _, t := range tasks[:size-1] {
			if !needed[t.Name] {
				last.Deps = append(last.Deps, t.Name)
			}
		}
		out[i] = PlannedWorkflow{Label: fmt.Sprintf("wf%d", i+1), At: workflowFirst + time.Duration(i)*workflowEvery, Tasks: tasks}
	}
	return out
}

// Workflow returns the jobs.Workflow of w: a TaskJob per task, in the
// default queue.
func (w PlannedWorkflow) Workflow() jobs.Workflow {
	wf := jobs.Workflow{Tasks: make([]jobs.WorkflowTask, len(w.Tasks))}
	for i, t := range w.Tasks {
		wf.Tasks[i] = jobs.WorkflowTask{Name: t.Name, Args: TaskJob{WF: w.Label, Task: t.Name}, Deps: t.Deps}
	}
	return wf
}
