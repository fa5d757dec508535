package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// MaxTaskNameLen is the longest task name of a workflow, in bytes.
const MaxTaskNameLen = 128

// MaxWorkflowTasks is the most tasks one workflow holds. Each promotion
// of a workflow reads its jobs (one query by the workflow index), so its
// cost grows with the workflow's size.
const MaxWorkflowTasks = 1000

// Workflow is a set of tasks, jobs that depend on one another (a
// directed acyclic graph), that [Client.InsertWorkflow] inserts
// together.
type Workflow struct {
	// Tasks are the workflow's tasks, at least one, at most
	// [MaxWorkflowTasks], each with a name of its own.
	Tasks []WorkflowTask
	// IgnoreCancelled makes every task run when a dependency of it was
	// cancelled (once its other dependencies completed), as
	// WorkflowTask.IgnoreCancelled does for one task; by default the
	// task is cancelled.
	IgnoreCancelled bool
	// IgnoreDiscarded is IgnoreCancelled for a dependency that was
	// discarded (its last attempt failed).
	IgnoreDiscarded bool
}

// WorkflowTask is one task of a [Workflow]: a job and the tasks it
// depends on.
type WorkflowTask struct {
	// Name names the task in its workflow: 1 to [MaxTaskNameLen] bytes
	// of ASCII letters, digits, '_', '.', ':' and '-'.
	Name string
	// Args are the job's args.
	Args Args
	// Opts, optional, are the job's insert options; the job can be
	// neither unique nor in a sequence.
	Opts *InsertOpts
	// Deps are the names of the tasks of the workflow that must complete
	// before this one runs; none: it runs at once.
	Deps []string
	// IgnoreCancelled makes the task run when one of its dependencies
	// was cancelled, once the others completed; by default the task is
	// cancelled, and so are the tasks that depend on it.
	IgnoreCancelled bool
	// IgnoreDiscarded is IgnoreCancelled for a dependency that was
	// discarded.
	IgnoreDiscarded bool
}

// WorkflowResult is what [Client.InsertWorkflow] inserted.
type WorkflowResult struct {
	// ID is the workflow's id (32 hex digits), in each job's WorkflowID.
	ID string
	// Tasks are the workflow's jobs, in the order of Workflow.Tasks: a
	// task without dependencies available (or scheduled), the others
	// pending.
	Tasks []InsertResult
}

// WorkflowInfo is a workflow as [Client.Workflow] reads it.
type WorkflowInfo struct {
	// ID is the workflow's id.
	ID string
	// Tasks are its tasks, in the order they were inserted (job id
	// order). A task whose job was deleted (the retention sweep,
	// [Client.Delete]) is not listed.
	Tasks []WorkflowTaskInfo
}

// WorkflowTaskInfo is one task of a [WorkflowInfo].
type WorkflowTaskInfo struct {
	// Name is the task's name.
	Name string
	// JobID is the id of the task's job.
	JobID int64
	// State is the job's state (running for a job that runs).
	State State
	// Deps are the names of the tasks it depends on.
	Deps []string
	// Job is the task's job.
	Job *Row
}

// Dependencies returns the names of the workflow tasks the job depends
// on (nil for none, or for a job of no workflow).
func (r *Row) Dependencies() []string {
	if r.WorkflowDeps == nil || *r.WorkflowDeps == "" {
		return nil
	}
	var out []string
	if json.Unmarshal([]byte(*r.WorkflowDeps), &out) != nil {
		return nil
	}
	return out
}

// DependencyOutput decodes into v (as json.Unmarshal) the output that
// task, a dependency of the job in its workflow, recorded with
// [RecordOutput]. The outputs of a job's completed dependencies are
// written into the job (its WorkflowInputs) by the promotion that makes
// it available, so its work reads them without a query, whatever
// happened to the dependencies since (retention included). Errors: one
// wrapping dao.ErrNotFound when task is not a completed dependency of
// the job or recorded no output (a dependency cancelled or discarded
// that the task ignores has none); a decoding error of encoding/json.
func (r *Row) DependencyOutput(task string, v any) error {
	var in map[string]json.RawMessage
	if r.WorkflowInputs != nil && *r.WorkflowInputs != "" {
		if err := json.Unmarshal([]byte(*r.WorkflowInputs), &in); err != nil {
			return fmt.Errorf("jobs: job %d: workflow inputs: %w", r.ID, err)
		}
	}
	raw, ok := in[task]
	if !ok {
		return fmt.Errorf("jobs: job %d: no output of dependency %q: %w", r.ID, task, dao.ErrNotFound)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("jobs: job %d: output of dependency %q: %w", r.ID, task, err)
	}
	return nil
}

// InsertWorkflow inserts the tasks of wf as one workflow, in one
// statement where the backend allows (as [Client.InsertMany] inserts
// jobs that are not unique: together or not at all). A task without
// dependencies is available at once (or scheduled, by its options); a
// task with dependencies is inserted pending ([StatePending]) and made
// available exactly once, when every dependency completed, with their
// outputs ([Row.DependencyOutput]). A dependency cancelled or discarded
// cancels the task, and so the tasks that depend on it, unless the task
// or the workflow says to ignore that state (IgnoreCancelled,
// IgnoreDiscarded): the task then runs once its other dependencies
// completed. A dependency deleted before its dependents were promoted
// counts as completed, without output. The promotion and the
// cancellation are writes guarded by the task's pending state, so that
// clients that finish dependencies at the same moment promote it once;
// they follow the outcome writes, and the maintenance's [Client.Promote]
// catches up after a client that stopped in between.
//
// Errors: dao.ErrInvalidArgument (nothing inserted) for no tasks or more
// than [MaxWorkflowTasks], a bad or repeated task name, a dependency on
// an unknown task, on the task itself or listed twice, a cycle, a unique
// task or one in a sequence, and whatever [Client.InsertMany] refuses;
// the store's errors, mapped.
func (c *Client) InsertWorkflow(ctx context.Context, wf Workflow) (*WorkflowResult, error) {
	return c.insertWorkflow(ctx, c.store, wf, false)
}

// InsertWorkflowTx is [Client.InsertWorkflow] inside tx, the caller's
// open transaction (see [Client.InsertTx]).
func (c *Client) InsertWorkflowTx(ctx context.Context, tx any, wf Workflow) (*WorkflowResult, error) {
	store, err := c.txStore(tx)
	if err != nil {
		return nil, err
	}
	return c.insertWorkflow(ctx, store, wf, true)
}

// insertWorkflow checks wf, builds its rows and inserts them through
// store.
func (c *Client) insertWorkflow(ctx context.Context, store dao.Store[Row], wf Workflow, inTx bool) (*WorkflowResult, error) {
	if err := checkWorkflow(wf); err != nil {
		return nil, fmt.Errorf("jobs: insert workflow: %w", err)
	}
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: insert workflow: %w", err)
	}
	id, err := newBatchID()
	if err != nil {
		return nil, fmt.Errorf("jobs: insert workflow: %w", err)
	}
	rows := make([]*Row, len(wf.Tasks))
	for i, t := range wf.Tasks {
		r, err := c.newRow(t.Args, t.Opts, now)
		if err != nil {
			return nil, fmt.Errorf("jobs: insert workflow: task %s: %w", t.Name, err)
		}
		if r.UniqueKey != nil || r.SequenceKey != nil {
			return nil, fmt.Errorf("jobs: insert workflow: task %s: %w", t.Name, argerr.Errorf("a workflow's task can be neither unique nor in a sequence"))
		}
		name := t.Name
		r.WorkflowID, r.WorkflowTask = &id, &name
		if len(t.Deps) > 0 {
			b, _ := json.Marshal(t.Deps)
			deps := string(b)
			r.WorkflowDeps = &deps
			r.State = StatePending
			if t.IgnoreCancelled || wf.IgnoreCancelled {
				r.WorkflowIgnore |= StateCancelled.bit()
			}
			if t.IgnoreDiscarded || wf.IgnoreDiscarded {
				r.WorkflowIgnore |= StateDiscarded.bit()
			}
		}
		rows[i] = r
	}
	out, err := c.insertBuilt(ctx, store, rows, inTx, now)
	if err != nil {
		return nil, fmt.Errorf("jobs: insert workflow: %w", err)
	}
	return &WorkflowResult{ID: id, Tasks: out}, nil
}

// checkWorkflow returns nil when wf's tasks are a valid workflow: 1 to
// MaxWorkflowTasks tasks of valid, distinct names, whose dependencies
// name other tasks of wf, each once, without a cycle. Errors wrap
// dao.ErrInvalidArgument.
func checkWorkflow(wf Workflow) error {
	if len(wf.Tasks) == 0 || len(wf.Tasks) > MaxWorkflowTasks {
		return argerr.Errorf("a workflow of %d tasks: use 1 to %d", len(wf.Tasks), MaxWorkflowTasks)
	}
	index := make(map[string]int, len(wf.Tasks))
	for i, t := range wf.Tasks {
		if len(t.Name) > MaxTaskNameLen || !nameRE.MatchString(t.Name) {
			return argerr.Errorf("task name %q: use 1-%d letters, digits, '_', '.', ':' or '-'", t.Name, MaxTaskNameLen)
		}
		if _, dup := index[t.Name]; dup {
			return argerr.Errorf("task name %q used twice", t.Name)
		}
		index[t.Name] = i
	}
	for _, t := range wf.Tasks {
		seen := make(map[string]bool, len(t.Deps))
		for _, d := range t.Deps {
			switch _, known := index[d]; {
			case !known:
				return argerr.Errorf("task %s depends on %q, not a task of the workflow", t.Name, d)
			case d == t.Name:
				return argerr.Errorf("task %s depends on itself", t.Name)
			case seen[d]:
				return argerr.Errorf("task %s lists dependency %s twice", t.Name, d)
			}
			seen[d] = true
		}
	}
	// Kahn's algorithm: the tasks left once no task without pending
	// dependencies remains are on a cycle.
	waiting := make([]int, len(wf.Tasks))
	dependents := make([][]int, len(wf.Tasks))
	var ready []int
	for i, t := range wf.Tasks {
		waiting[i] = len(t.Deps)
		for _, d := range t.Deps {
			dependents[index[d]] = append(dependents[index[d]], i)
		}
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	done := 0
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		for _, j := range dependents[i] {
			if waiting[j]--; waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	if done < len(wf.Tasks) {
		var cycle []string
		for i, n := range waiting {
			if n > 0 {
				cycle = append(cycle, wf.Tasks[i].Name)
			}
		}
		return argerr.Errorf("the dependencies of tasks %s form a cycle", strings.Join(cycle, ", "))
	}
	return nil
}

// Workflow returns workflow id's tasks, with their jobs' states and
// dependencies, in the order they were inserted. Errors: dao.ErrNotFound
// when no job of the workflow exists; the store's errors, mapped.
func (c *Client) Workflow(ctx context.Context, id string) (*WorkflowInfo, error) {
	now, err := c.now(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: workflow %s: %w", id, err)
	}
	rows, err := c.store.Find(ctx, dao.Query{Where: dao.Eq(ColWorkflowID, id), OrderBy: []dao.Order{dao.Asc(ColID)}})
	if err != nil {
		return nil, fmt.Errorf("jobs: workflow %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("jobs: workflow %s: %w", id, dao.ErrNotFound)
	}
	out := &WorkflowInfo{ID: id, Tasks: make([]WorkflowTaskInfo, len(rows))}
	for i := range rows {
		r := &rows[i]
		r.present(now)
		ti := WorkflowTaskInfo{JobID: r.ID, State: r.State, Deps: r.Dependencies(), Job: r}
		if r.WorkflowTask != nil {
			ti.Name = *r.WorkflowTask
		}
		out.Tasks[i] = ti
	}
	return out, nil
}

// maxWorkflowRounds bounds the rounds of promoteWorkflow: each round
// after the first follows a round that cancelled a task, so a chain of
// cancellations as long as the workflow ends within it.
const maxWorkflowRounds = MaxWorkflowTasks + 1

// promoteWorkflow moves on the pending tasks of workflow id whose wait is
// over: a task whose dependencies all completed (or ended in a state it
// ignores, or were deleted) is made available, or scheduled when its time
// is still ahead, with its dependencies' outputs; a task with a
// dependency cancelled or discarded that it does not ignore is
// cancelled, and the tasks depending on it are looked at again. Each
// write is guarded by the task's pending state: of promotions that race,
// one writes. It returns how many tasks it moved on. Errors: the
// store's, mapped.
func (c *Client) promoteWorkflow(ctx context.Context, id string) (int64, error) {
	var moved int64
	for range maxWorkflowRounds {
		rows, err := c.store.Find(ctx, dao.Query{Where: dao.Eq(ColWorkflowID, id)})
		if err != nil {
			return moved, err
		}
		byTask := make(map[string]*Row, len(rows))
		for i := range rows {
			if rows[i].WorkflowTask != nil {
				byTask[*rows[i].WorkflowTask] = &rows[i]
			}
		}
		cancelled := false
		for i := range rows {
			r := &rows[i]
			if r.State != StatePending {
				continue
			}
			ready, blocker := true, ""
			inputs := map[string]json.RawMessage{}
			for _, d := range r.Dependencies() {
				dr, ok := byTask[d]
				switch {
				case !ok: // deleted: no longer waited for
				case dr.State == StateCompleted:
					if out := dr.Output(); out != nil {
						inputs[d] = out
					}
				case dr.State == StateCancelled || dr.State == StateDiscarded:
					if r.WorkflowIgnore&dr.State.bit() == 0 && blocker == "" {
						blocker = d
					}
				default:
					ready = false
				}
			}
			switch {
			case blocker != "":
				ok, err := c.cancelPending(ctx, r, blocker)
				if err != nil {
					return moved, err
				}
				if ok {
					moved++
					cancelled = true
				}
			case ready:
				set := dao.Set{ColState: string(StateAvailable)}
				if len(inputs) > 0 {
					b, _ := json.Marshal(inputs)
					set[ColWorkflowInputs] = string(b)
				}
				if err := c.promote(ctx, r, set); err != nil {
					if errors.Is(err, dao.ErrConflict) {
						continue // another promotion won
					}
					return moved, err
				}
				moved++
			}
		}
		if !cancelled {
			return moved, nil
		}
	}
	return moved, nil
}

// cancelPending cancels r, a pending task of a workflow whose dependency
// blocker was cancelled or discarded, with a write guarded by its pending
// state, and reports whether it did. Errors: the store's, mapped.
func (c *Client) cancelPending(ctx context.Context, r *Row, blocker string) (bool, error) {
	now, err := c.now(ctx)
	if err != nil {
		return false, err
	}
	set := dao.Set{ColState: string(StateCancelled), ColFinalizedAt: now}
	n, err := c.retryConflict(ctx, func() (int64, error) {
		return c.store.Update(ctx, dao.And(dao.Eq(ColID, r.ID), dao.Eq(ColState, string(StatePending))), set)
	})
	if err != nil || n == 0 {
		return false, err
	}
	r.State, r.FinalizedAt = StateCancelled, &now
	c.log.Debug("workflow task cancelled: a dependency ended without completing", "id", r.ID, "workflow", *r.WorkflowID, "dependency", blocker)
	c.emitJob(EventJobCancelled, r, now)
	return true, nil
}
