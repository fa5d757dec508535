package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

func newJobsWorkflowCmd(f *jobFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "workflow ID",
		Short: "Show a workflow's tasks as a tree: each task under the tasks it depends on, with its state and job id",
		Long: `workflow shows the tasks of workflow ID (jobs.Client.InsertWorkflow) as a tree:
each task is indented under the tasks it depends on, with its job's state and
id; a task with several dependencies is shown in full under the first, and
named again, marked "(above)", under the others. --json prints the tasks in
insertion order with their dependencies.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withJobs(cmd, f, false, func(c *jobs.Client) error {
				info, err := c.Workflow(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if f.json {
					return writeJSONTo(cmd.OutOrStdout(), workflowView(info))
				}
				return printWorkflow(cmd.OutOrStdout(), info)
			})
		},
	}
}

// workflowTaskJSON is one task of a workflow as --json prints it.
type workflowTaskJSON struct {
	Name  string     `json:"name"`
	JobID int64      `json:"job_id"`
	State jobs.State `json:"state"`
	Deps  []string   `json:"deps"`
}

// workflowView returns info's tasks for --json.
func workflowView(info *jobs.WorkflowInfo) []workflowTaskJSON {
	out := make([]workflowTaskJSON, len(info.Tasks))
	for i, t := range info.Tasks {
		deps := t.Deps
		if deps == nil {
			deps = []string{}
		}
		out[i] = workflowTaskJSON{Name: t.Name, JobID: t.JobID, State: t.State, Deps: deps}
	}
	return out
}

// printWorkflow writes info's tasks as an indented tree
// (jobadmin.WorkflowTree): the tasks without a listed dependency at the
// top (a dependency deleted counts as none), each task's dependents
// under it, by insertion order; a task drawn again is marked "(above)".
func printWorkflow(w io.Writer, info *jobs.WorkflowInfo) error {
	if _, err := fmt.Fprintf(w, "workflow %s: %d tasks\n", info.ID, len(info.Tasks)); err != nil {
		return err
	}
	for _, l := range jobadmin.WorkflowTree(info) {
		t := info.Tasks[l.Task]
		indent := strings.Repeat("  ", l.Depth+1)
		var err error
		if l.Repeat {
			_, err = fmt.Fprintf(w, "%s%s (above)\n", indent, t.Name)
		} else {
			_, err = fmt.Fprintf(w, "%s%s  %s  job %d\n", indent, t.Name, t.State, t.JobID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
