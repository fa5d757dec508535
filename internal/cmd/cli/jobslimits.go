package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

func newJobsLimitsCmd(f *jobFlags) *cobra.Command {
	var p jobs.LimitParams
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show the limited queues: their limits, running jobs by partition and rate tokens",
		Long: `limits prints the queues limited by jobs.QueueConfig.Limit, one row per
partition in use (the most running first): the queue, the partition ("(queue)"
for an unpartitioned limit, else the JSON array of the kind and args values),
the jobs running now as the limited claim counts them, the most that may run
(Max), the partition's rate tokens now and the rate (starts per period, and the
bucket's size). A partition is in use when it has running jobs or its token
bucket is not full. Each client records its Limit in the database at its first
limited claim of the queue and then once a minute: "?" means no client recorded
one (a client of a release before schema version 7), "-" that the limit has no
such setting. When clients give a queue different limits, each enforces its
own, and the one shown is the last recorded. A queue limited by a rate alone
counts no running jobs (0).`,
		Example: `  claimstore jobs limits --backend postgres
  claimstore jobs limits --backend sqlite --dsn app.db --queue emails --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkQueueList("partitions", p.Partitions, p.Queue); err != nil {
				return err
			}
			return withJobs(cmd, f, false, func(c *jobs.Client) error {
				infos, err := c.Limits(cmd.Context(), p)
				if err != nil {
					return err
				}
				return printLimits(cmd.OutOrStdout(), f.json, infos)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&p.Queue, "queue", "", "show this queue only")
	fl.IntVar(&p.Partitions, "partitions", 20, "most partitions shown per queue")
	return cmd
}

// printLimits writes infos as a table, or as JSON with asJSON
// ({"limits": [jobadmin.Limit…]}, as the console's api/queues gives
// them).
func printLimits(w io.Writer, asJSON bool, infos []jobs.LimitInfo) error {
	views := make([]jobadmin.Limit, len(infos))
	for i, in := range infos {
		views[i] = jobadmin.LimitView(in)
	}
	if asJSON {
		return writeJSONTo(w, struct {
			Limits []jobadmin.Limit `json:"limits"`
		}{views})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARTITION\tRUNNING\tMAX\tTOKENS\tRATE")
	for _, v := range views {
		parts := v.Partitions
		if len(parts) == 0 {
			parts = []jobadmin.LimitShare{{Key: "(none in use)", Running: v.Running}}
		}
		for _, p := range parts {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", v.Queue, p.KeyText(), p.Running, v.MaxText(), p.TokensText(), v.RateText())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		if v.More > 0 {
			fmt.Fprintf(w, "%s: %d more partitions in use, %d running in all (--partitions)\n", v.Queue, v.More, v.Running)
		}
	}
	return nil
}
