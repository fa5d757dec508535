package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// sequenceText describes j's sequence for people: "-" when none.
func sequenceText(j jobadmin.Job) string {
	switch {
	case j.SequenceKey == "":
		return "-"
	case j.SequenceHead:
		return j.SequenceKey + " (holds it)"
	}
	return j.SequenceKey
}

// batchText describes j's batch for people: "-" when none.
func batchText(j jobadmin.Job) string {
	switch {
	case j.BatchCallback != "":
		return j.BatchCallback + " (its callback)"
	case j.BatchID != "":
		return j.BatchID
	}
	return "-"
}

// workflowText describes j's workflow for people: its id and j's task
// ("ID, task NAME"), "-" when none.
func workflowText(j jobadmin.Job) string {
	if j.WorkflowID == "" {
		return "-"
	}
	return j.WorkflowID + ", task " + j.WorkflowTask
}

func newJobsSequencesCmd(f *jobFlags) *cobra.Command {
	var p jobs.SequenceParams
	cmd := &cobra.Command{
		Use:   "sequences",
		Short: "List the sequences a job holds, with the jobs waiting behind it",
		Long: `sequences prints the sequences that a job holds (jobs.SequenceOpts), oldest head
first: the key, the head job's id and state, and the number of jobs waiting
behind it. A head that is discarded or cancelled without the sequence's
ContinueOnDiscarded or ContinueOnCancelled blocks it until the head is retried
or deleted. --key shows one sequence, --queue the sequences whose head is in
one queue.`,
		Example: `  claimstore jobs sequences --backend postgres
  claimstore jobs sequences --backend sqlite --dsn app.db --key customer-42 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkQueueList("limit", p.Limit, p.Queue); err != nil {
				return err
			}
			return withJobs(cmd, f, false, func(c *jobs.Client) error {
				seqs, err := c.Sequences(cmd.Context(), p)
				if err != nil {
					return err
				}
				return printSequences(cmd.OutOrStdout(), f.json, seqs)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&p.Key, "key", "", "show the sequence of this key only")
	fl.StringVar(&p.Queue, "queue", "", "list only sequences whose head is in this queue")
	fl.IntVar(&p.Limit, "limit", 100, "most sequences listed")
	return cmd
}

// sequenceView is the JSON of one sequence.
type sequenceView struct {
	Key     string        `json:"key"`
	Head    *jobadmin.Job `json:"head,omitempty"`
	Waiting int64         `json:"waiting"`
}

// printSequences writes seqs as a table, or as JSON with asJSON.
func printSequences(w io.Writer, asJSON bool, seqs []jobs.SequenceInfo) error {
	views := make([]sequenceView, len(seqs))
	for i, s := range seqs {
		views[i] = sequenceView{Key: s.Key, Waiting: s.Waiting}
		if s.Head != nil {
			j := jobadmin.View(s.Head)
			views[i].Head = &j
		}
	}
	if asJSON {
		return writeJSONTo(w, struct {
			Sequences []sequenceView `json:"sequences"`
		}{views})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tHEAD\tHEAD STATE\tQUEUE\tWAITING")
	for _, v := range views {
		head, state, queue := "-", "-", "-"
		if v.Head != nil {
			head, state, queue = strconv.FormatInt(v.Head.ID, 10), string(v.Head.State), v.Head.Queue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", v.Key, head, state, queue, v.Waiting)
	}
	return tw.Flush()
}

func newJobsBatchCmd(f *jobFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "batch ID",
		Short: "Show one batch: its jobs counted by state and its callback job",
		Long: `batch prints a batch (jobs.Client.InsertBatch): how many jobs it was inserted
with, its jobs now counted by state, and its callback job, pending until
every job of the batch is final. jobs list --batch ID lists its jobs.`,
		Example: `  claimstore jobs batch 9f2c61e0a4b84f0d8d1e3c5a7b9d0e21 --backend postgres`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withJobs(cmd, f, false, func(c *jobs.Client) error {
				info, err := c.Batch(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printBatch(cmd.OutOrStdout(), f.json, info)
			})
		},
	}
}

// printBatch writes info for people, or as JSON with asJSON.
func printBatch(w io.Writer, asJSON bool, info *jobs.BatchInfo) error {
	v := struct {
		ID       string               `json:"id"`
		Total    int                  `json:"total"`
		Counts   map[jobs.State]int64 `json:"counts"`
		Callback *jobadmin.Job        `json:"callback,omitempty"`
	}{ID: info.ID, Total: info.Total, Counts: info.Counts}
	if info.Callback != nil {
		j := jobadmin.View(info.Callback)
		v.Callback = &j
	}
	if asJSON {
		return writeJSONTo(w, v)
	}
	fmt.Fprintf(w, "batch %s: %d jobs inserted\n", v.ID, v.Total)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range jobs.States() {
		if n := v.Counts[s]; n > 0 {
			fmt.Fprintf(tw, "  %s:\t%d\n", s, n)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Callback == nil {
		fmt.Fprintln(w, "callback: deleted")
		return nil
	}
	fmt.Fprintf(w, "callback: job %d (%s), %s\n", v.Callback.ID, v.Callback.Kind, v.Callback.State)
	return nil
}

// checkQueueList checks the flags of a command that lists per queue: the
// count flag name within 1 and jobs.MaxListLimit, and --queue, when
// given, a queue name jobs accepts. Errors: the flag's, as FlagChecks
// words them.
func checkQueueList(name string, n int, queue string) error {
	var c FlagChecks
	Between(&c, name, n, 1, jobs.MaxListLimit)
	if c.err != nil {
		return c.err
	}
	if queue != "" {
		if err := jobs.CheckQueue(queue); err != nil {
			return fmt.Errorf("--queue: %w", err)
		}
	}
	return nil
}
