//go:build linux

package soak

import (
	"maps"
	"slices"
	"time"
)

// checkWorkflows: every planned workflow was inserted with its tasks and
// their dependencies as planned; every task completed once, under the
// rules of checkAttempts (a run again after its process was killed or
// frozen is allowed and counted); no run of a task started before the
// end of the completing run of each of its dependencies; and every
// workflow finished (by the end of the drain, when the state is read).
func (c *checker) checkWorkflows(st *State, inserted []Event, starts map[string][]Event, ends map[runID]Event) {
	byLabel := map[string]Event{}
	for _, e := range inserted {
		byLabel[e.Target] = e
	}
	tasks := map[string]TaskState{}
	for _, t := range st.Tasks {
		if _, ok := tasks[t.Key()]; ok {
			c.fail("workflow task duplicated", "task %s has more than one job", t.Key())
			continue
		}
		tasks[t.Key()] = t
	}
	planned := map[string]bool{}
	for _, w := range st.Workflows {
		for _, t := range w.Tasks {
			planned[w.Label+"/"+t.Name] = true
		}
		ins, ok := byLabel[w.Label]
		switch {
		case !ok:
			c.fail("workflow not inserted", "%s (%d tasks), planned at %v of the load, was not inserted", w.Label, len(w.Tasks), w.At)
			continue
		case ins.Err != "":
			c.fail("workflow not inserted", "%s (%d tasks): %s", w.Label, len(w.Tasks), ins.Err)
			continue
		}
		c.rep.Workflows++
		c.checkWorkflow(w, ins, tasks, starts, ends)
	}
	for _, k := range slices.Sorted(maps.Keys(tasks)) {
		if !planned[k] {
			c.fail("workflow task from nowhere", "the table has a job for task %s, which no workflow planned", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(starts)) {
		if !planned[k] {
			c.fail("workflow task from nowhere", "task %s ran, but no workflow planned it", k)
		}
	}
}

// checkWorkflow checks the tasks of workflow w, inserted as ins.
func (c *checker) checkWorkflow(w PlannedWorkflow, ins Event, tasks map[string]TaskState, starts map[string][]Event, ends map[runID]Event) {
	doneAt := map[string]time.Time{} // task key → end of its completing run
	for _, t := range w.Tasks {
		key := w.Label + "/" + t.Name
		c.rep.WorkflowTasks++
		c.rep.WorkflowDeps += len(t.Deps)
		ts, ok := tasks[key]
		if !ok {
			c.fail("workflow task lost", "task %s of workflow %s has no job in the table", key, ins.Key)
			continue
		}
		if ts.WorkflowID != ins.Key || !slices.Equal(sortedCopy(ts.Deps), sortedCopy(t.Deps)) {
			c.fail("workflow task stored wrong", "task %s: workflow %s with dependencies %q, want workflow %s with %q", key, ts.WorkflowID, ts.Deps, ins.Key, t.Deps)
		}
		byAttempt := c.checkAttempts("workflow task", "task "+key, key, ts.QueueJobState, withEnds(starts[key], ends), &c.rep.Tasks)
		if byAttempt == nil {
			continue
		}
		run, ok := byAttempt[int64(ts.Attempt)]
		if !ok {
			continue // checkAttempts reported it
		}
		end, ok := ends[runOf(run)]
		if !ok || end.Err != "" {
			c.fail("workflow task completed without its end", "task %s completed in attempt %d, whose run by %s recorded no successful end", key, ts.Attempt, run.Proc)
			continue
		}
		doneAt[key] = end.T
	}
	for _, t := range w.Tasks {
		key := w.Label + "/" + t.Name
		for _, d := range t.Deps {
			dk := w.Label + "/" + d
			done, ok := doneAt[dk]
			for _, r := range starts[key] {
				switch {
				case !ok:
					c.fail("workflow task ran before its dependency completed", "task %s attempt %d started at %s by %s; its dependency %s never completed",
						key, r.N, r.T.Format(time.RFC3339Nano), r.Proc, dk)
				case r.T.Before(done):
					c.fail("workflow task ran before its dependency completed", "task %s attempt %d started at %s by %s; its dependency %s completed at %s",
						key, r.N, r.T.Format(time.RFC3339Nano), r.Proc, dk, done.Format(time.RFC3339Nano))
				}
			}
		}
	}
	if len(doneAt) < len(w.Tasks) {
		c.fail("workflow not finished", "%s (%s): %d of %d tasks completed after the drain", w.Label, ins.Key, len(doneAt), len(w.Tasks))
		return
	}
	c.rep.WorkflowsDone++
	var last time.Time
	for _, t := range doneAt {
		if t.After(last) {
			last = t
		}
	}
	c.rep.WorkflowLongest = max(c.rep.WorkflowLongest, last.Sub(ins.T))
}

// sortedCopy returns a sorted copy of s (nil for none).
func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(s))
}
