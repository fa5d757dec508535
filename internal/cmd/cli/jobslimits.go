package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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

// limitView is the JSON of one limited queue.
type limitView struct {
	Queue      string               `json:"queue"`
	Limit      *limitSettingsView   `json:"limit"`
	RecordedAt *time.Time           `json:"recordedAt,omitempty"`
	Running    int                  `json:"running"`
	Partitions []limitPartitionView `json:"partitions"`
	More       int                  `json:"more"`
}

// limitSettingsView is the JSON of a recorded jobs.Limit.
type limitSettingsView struct {
	Max    int      `json:"max"`
	Rate   int      `json:"rate"`
	Period string   `json:"period,omitempty"`
	Burst  int      `json:"burst"`
	ByKind bool     `json:"byKind"`
	ByArgs []string `json:"byArgs"`
}

// limitPartitionView is the JSON of one partition of a limited queue.
type limitPartitionView struct {
	Key     string   `json:"key"`
	Running int      `json:"running"`
	Tokens  *float64 `json:"tokens"`
}

// printLimits writes infos as a table, or as JSON with asJSON.
func printLimits(w io.Writer, asJSON bool, infos []jobs.LimitInfo) error {
	views := make([]limitView, len(infos))
	for i, in := range infos {
		v := limitView{Queue: in.Queue, RecordedAt: in.RecordedAt, Running: in.Running, More: in.More, Partitions: []limitPartitionView{}}
		if l := in.Limit; l != nil {
			v.Limit = &limitSettingsView{Max: l.Max, Rate: l.Rate, Burst: l.Burst, ByKind: l.ByKind, ByArgs: l.ByArgs}
			if l.Rate > 0 {
				v.Limit.Period = l.Period.String()
			}
			if v.Limit.ByArgs == nil {
				v.Limit.ByArgs = []string{}
			}
		}
		for _, p := range in.Partitions {
			v.Partitions = append(v.Partitions, limitPartitionView{Key: p.Key, Running: p.Running, Tokens: p.Tokens})
		}
		views[i] = v
	}
	if asJSON {
		return writeJSONTo(w, struct {
			Limits []limitView `json:"limits"`
		}{views})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARTITION\tRUNNING\tMAX\tTOKENS\tRATE")
	for _, v := range views {
		most, rate := "?", "?"
		if l := v.Limit; l != nil {
			most, rate = "-", "-"
			if l.Max > 0 {
				most = strconv.Itoa(l.Max)
			}
			if l.Rate > 0 {
				rate = fmt.Sprintf("%d/%s burst %d", l.Rate, l.Period, l.Burst)
			}
		}
		parts := v.Partitions
		if len(parts) == 0 {
			parts = []limitPartitionView{{Key: "(none in use)", Running: v.Running}}
		}
		for _, p := range parts {
			key, tokens := p.Key, "-"
			if key == "" {
				key = "(queue)"
			}
			if p.Tokens != nil {
				tokens = strconv.FormatFloat(*p.Tokens, 'f', 1, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", v.Queue, key, p.Running, most, tokens, rate)
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
