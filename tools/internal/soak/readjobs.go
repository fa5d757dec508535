//go:build linux

package soak

import (
	"context"
	"encoding/json"
	"fmt"
)

// queueRow is a row of the job queue's table as the checker reads it.
type queueRow struct {
	QueueJobState
	Kind         string
	WorkflowID   *string
	WorkflowDeps *string
}

// readQueueJobs reads the job queue's table into st: the orders' queue
// jobs, the limited queue's jobs and the workflow tasks, by kind.
func (r *run) readQueueJobs(ctx context.Context, st *State) error {
	var rows []queueRow
	err := r.db.WithContext(ctx).Table(r.tables.QJobs).Select("kind, args, state, attempt, errors, workflow_id, workflow_deps").
		Order("id").Scan(&rows).Error
	if err != nil {
		return fmt.Errorf("soak: read the queue jobs: %w", err)
	}
	for _, row := range rows {
		j := row.QueueJobState
		switch row.Kind {
		case OrderJob{}.Kind():
			var a OrderJob
			if err := json.Unmarshal([]byte(j.Args), &a); err != nil {
				return fmt.Errorf("soak: queue job args %q: %w", j.Args, err)
			}
			j.Order = a.Order
			st.QJobs = append(st.QJobs, j)
		case LimitedJob{}.Kind():
			var a LimitedJob
			if err := json.Unmarshal([]byte(j.Args), &a); err != nil {
				return fmt.Errorf("soak: limited job args %q: %w", j.Args, err)
			}
			j.Order = a.Order
			st.Limited = append(st.Limited, j)
		case TaskJob{}.Kind():
			var a TaskJob
			if err := json.Unmarshal([]byte(j.Args), &a); err != nil {
				return fmt.Errorf("soak: workflow task args %q: %w", j.Args, err)
			}
			t := TaskState{QueueJobState: j, WF: a.WF, Task: a.Task}
			if row.WorkflowID != nil {
				t.WorkflowID = *row.WorkflowID
			}
			if row.WorkflowDeps != nil && *row.WorkflowDeps != "" {
				if err := json.Unmarshal([]byte(*row.WorkflowDeps), &t.Deps); err != nil {
					return fmt.Errorf("soak: workflow task %s dependencies %q: %w", t.Key(), *row.WorkflowDeps, err)
				}
			}
			st.Tasks = append(st.Tasks, t)
		default:
			return fmt.Errorf("soak: a queue job of kind %q, which the run does not insert", row.Kind)
		}
	}
	return nil
}
