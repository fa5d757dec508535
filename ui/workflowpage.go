package ui

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// The workflow page: a workflow's tasks drawn as a tree, each under the
// tasks it depends on, with its job's state.

// maxWorkflowID is the longest workflow or batch id the workflow and
// batch pages read, in bytes: an id is 32 hex digits; anything much
// longer is a wrong link, answered 400.
const maxWorkflowID = 64

// workflowData is one workflow: the JSON of api/workflow and the data of
// the workflow page.
type workflowData struct {
	Table string `json:"table"`
	ID    string `json:"id"`
	// Tasks are the workflow's tasks in insertion order.
	Tasks []workflowTask `json:"tasks"`
	// Tree is the order the page draws the tasks in: each line names a
	// task, its depth under the tasks at the top and whether it repeats
	// a task drawn in full on an earlier line.
	Tree []workflowLine `json:"tree"`
	// Counts are the tasks of each state, in lifecycle order.
	Counts []Count `json:"counts"`

	// The page's own fields.
	Roots []*workflowNode `json:"-"`
	List  string          `json:"-"` // the list of the job table
}

// workflowTask is one task of a workflow and the state of its job.
type workflowTask struct {
	Name        string     `json:"name"`
	JobID       int64      `json:"jobId"`
	State       jobs.State `json:"state"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"maxAttempts"`
	Deps        []string   `json:"deps"`
}

// workflowLine is one line of a workflow's tree.
type workflowLine struct {
	Name   string `json:"name"`
	Depth  int    `json:"depth"`
	Repeat bool   `json:"repeat,omitempty"`
}

// workflowNode is a task as the page draws it, with the tasks drawn
// under it.
//
// A task with several dependencies is drawn in full once, under the
// first of them the tree reaches, with "also after" naming the others;
// under each of the others it is one line that names it, with its state,
// and links to the full one. Drawing its whole subtree under every
// dependency would repeat each task once per path through the workflow
// (stacked diamonds double it at each level) and show the same job's
// state many times; naming it once per dependency keeps every edge in
// view and the page as long as the workflow has dependencies. The
// command line draws the same tree (jobadmin.WorkflowTree).
type workflowNode struct {
	workflowTask
	Repeat bool
	// Also are the task's other dependencies, on a full line; Deleted
	// those whose job no longer exists (it no longer waits for them).
	Also     []string
	Deleted  []string
	Job      string // the link to the task's job page
	Children []*workflowNode
}

// readWorkflow reads the workflow of q's t and id. Errors wrap
// dao.ErrInvalidArgument for a missing or overlong id, dao.ErrNotFound
// for an unknown table or a workflow without jobs.
func (h *Handler) readWorkflow(ctx context.Context, q url.Values) (workflowData, error) {
	s, err := h.jobTable(q.Get("t"))
	if err != nil {
		return workflowData{}, err
	}
	id := q.Get("id")
	if id == "" || len(id) > maxWorkflowID {
		return workflowData{}, fmt.Errorf("%w: workflow id %q: give the id of a workflow (32 hex digits)", dao.ErrInvalidArgument, id)
	}
	info, err := s.c.Workflow(ctx, id)
	if err != nil {
		return workflowData{}, err
	}
	d := workflowData{Table: s.name, ID: info.ID, Tasks: make([]workflowTask, len(info.Tasks)), Tree: []workflowLine{},
		List: "jobs?" + url.Values{"t": {s.name}}.Encode()}
	counts := map[jobs.State]int64{}
	present := make(map[string]bool, len(info.Tasks))
	for i, t := range info.Tasks {
		deps := t.Deps
		if deps == nil {
			deps = []string{}
		}
		d.Tasks[i] = workflowTask{Name: t.Name, JobID: t.JobID, State: t.State, Deps: deps}
		if t.Job != nil {
			d.Tasks[i].Attempt, d.Tasks[i].MaxAttempts = t.Job.Attempt, t.Job.MaxAttempts
		}
		counts[t.State]++
		present[t.Name] = true
	}
	for _, st := range jobs.States() {
		d.Counts = append(d.Counts, Count{Status: string(st), N: counts[st]})
	}
	// The lines come depth first: a line's parent is the last line
	// drawn one level up.
	var path []*workflowNode
	for _, l := range jobadmin.WorkflowTree(info) {
		t := d.Tasks[l.Task]
		d.Tree = append(d.Tree, workflowLine{Name: t.Name, Depth: l.Depth, Repeat: l.Repeat})
		n := &workflowNode{workflowTask: t, Repeat: l.Repeat,
			Job: "job?" + url.Values{"t": {s.name}, "id": {strconv.FormatInt(t.JobID, 10)}}.Encode()}
		if !l.Repeat {
			for _, dep := range t.Deps {
				switch {
				case !present[dep]:
					n.Deleted = append(n.Deleted, dep)
				case l.Parent < 0 || dep != d.Tasks[l.Parent].Name:
					n.Also = append(n.Also, dep)
				}
			}
		}
		path = path[:l.Depth]
		if l.Depth == 0 {
			d.Roots = append(d.Roots, n)
		} else {
			p := path[l.Depth-1]
			p.Children = append(p.Children, n)
		}
		path = append(path, n)
	}
	return d, nil
}
