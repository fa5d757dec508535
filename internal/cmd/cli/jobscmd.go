package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/dsn"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/jobs"
)

// jobFlags are the flags `claimstore jobs` and `claimstore queues` share,
// with the tree's shared flags (--backend, --dsn).
type jobFlags struct {
	globals    *Globals
	table      string // the job table
	queueTable string // the queue table (queues only)
	json       bool
}

// jobsDB is an open job table of --backend and --dsn and a client that
// manages its jobs (and queues, when the queue table was opened).
type jobsDB struct {
	c     *jobs.Client
	close func()
}

// checkJobsTarget checks the table names, --backend and --dsn (g) before
// anything is opened: the memory backend lives in one process only, and
// SQLite needs the file's path.
func checkJobsTarget(g Globals, tables ...string) error {
	for _, t := range tables {
		if err := jobs.CheckTable(t); err != nil {
			return fmt.Errorf("--table: %w", err)
		}
	}
	backend := strings.ToLower(g.Backend)
	if !slices.Contains([]string{"postgres", "mysql", "mariadb", "sqlite"}, backend) {
		return fmt.Errorf("%w: --backend %q: the job table is on postgres, mysql, mariadb or sqlite (memory lives inside one process only)", dao.ErrInvalidArgument, g.Backend)
	}
	_, err := dsn.Resolve(backend, g.DSN)
	return err
}

// openJobs opens the job table of f on --backend and --dsn, and with
// queues its queue table too; each must exist. Call checkJobsTarget
// first.
func openJobs(ctx context.Context, f *jobFlags, queues bool) (*jobsDB, error) {
	db, backend, closeDB, err := openDB(ctx, *f.globals, false, 2)
	if err != nil {
		return nil, err
	}
	j := &jobsDB{close: closeDB}
	fail := func(err error) (*jobsDB, error) {
		j.close()
		return nil, err
	}
	m := db.WithContext(ctx).Migrator()
	if !m.HasTable(f.table) {
		return fail(&missingTableError{table: f.table, backend: backend, kind: "job", fix: "create it with jobs.Migrate in your program"})
	}
	var cfg jobs.Config
	if cfg.Store, err = sqlstore.New[jobs.Row](db.WithContext(ctx), sqlstore.WithTable(f.table)); err != nil {
		return fail(err)
	}
	if queues {
		if !m.HasTable(f.queueTable) {
			return fail(&missingTableError{table: f.queueTable, backend: backend, kind: "queue",
				fix: "create it with jobs.Migrate(ctx, jobStore, queueStore) in your program"})
		}
		if cfg.QueueStore, err = sqlstore.New[jobs.Queue](db.WithContext(ctx), sqlstore.WithTable(f.queueTable)); err != nil {
			return fail(err)
		}
	}
	if j.c, err = jobs.NewClient(cfg); err != nil {
		return fail(err)
	}
	return j, nil
}

// withJobs checks the target of f, opens its tables (the queue table
// too with queues), runs do with the client and closes them.
func withJobs(cmd *cobra.Command, f *jobFlags, queues bool, do func(*jobs.Client) error) error {
	tables := []string{f.table}
	if queues {
		tables = append(tables, f.queueTable)
	}
	if err := checkJobsTarget(*f.globals, tables...); err != nil {
		return err
	}
	j, err := openJobs(cmd.Context(), f, queues)
	if err != nil {
		return err
	}
	defer j.close()
	return do(j.c)
}

// writeJSONTo writes v as indented JSON to w.
func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// utcOr writes t in RFC 3339 UTC, or none when t is nil.
func utcOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

func newJobsCmd(g *Globals) *cobra.Command {
	f := &jobFlags{globals: g}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, show, retry, cancel and delete the jobs of a job table (package jobs)",
		Long: `jobs manages the job table of package jobs (default claimstore_jobs, or --table)
on the database given by --backend and --dsn (postgres, mysql, mariadb, or
sqlite with --dsn naming the file). The table must exist (jobs.Migrate creates
it). --json prints JSON instead of a table.`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.table, "table", jobs.DefaultTable, "job table name")
	pf.BoolVar(&f.json, "json", false, "print JSON")
	cmd.AddCommand(newJobsListCmd(f), newJobsGetCmd(f), newJobsSequencesCmd(f), newJobsBatchCmd(f), newJobsWorkflowCmd(f), newJobsLimitsCmd(f))
	for _, op := range []struct {
		op    jobadmin.Op
		short string
	}{
		{jobadmin.Retry, "Make jobs available to run at once (final ones again, with one more attempt when they had used them all)"},
		{jobadmin.Cancel, "Cancel jobs: a waiting job never runs, a running one is asked to stop within a tick"},
		{jobadmin.Delete, "Delete jobs that are not running"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:     string(op.op) + " ID...",
			Short:   op.short,
			Example: fmt.Sprintf("  claimstore jobs %s 17 18 --backend postgres", op.op),
			Args:    cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ids, err := jobadmin.ParseIDs(args)
				if err != nil {
					return err
				}
				return withJobs(cmd, f, false, func(c *jobs.Client) error {
					out := jobadmin.Apply(cmd.Context(), c, op.op, ids)
					if f.json {
						if err := writeJSONTo(cmd.OutOrStdout(), out); err != nil {
							return err
						}
					} else {
						for _, o := range out {
							fmt.Fprintln(cmd.OutOrStdout(), o)
						}
					}
					return jobadmin.Err(out)
				})
			},
		})
	}
	return cmd
}

func newJobsListCmd(f *jobFlags) *cobra.Command {
	var (
		states      string // comma-separated
		queue, kind string
		sequence    string
		batch       string
		tags        string // comma-separated
		priority    int
		metadata    string
		before      int64
		limit       int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first, by state, queue, kind, tags, priority and metadata",
		Long: `list prints the jobs newest (highest id) first: id, kind, queue, state, attempt,
priority, scheduled and created times, tags and the last attempt's error.
--state (one or more, comma-separated), --queue, --kind, --tag (jobs carrying
every tag given), --priority, --metadata (a JSON object the jobs' metadata
contains), --sequence (the jobs of one sequence) and --batch (the jobs of one
batch and its callback) select; --limit bounds the page, and the last line says how to list
the older jobs (--before).`,
		Example: `  claimstore jobs list --backend postgres --state discarded
  claimstore jobs list --backend sqlite --dsn app.db --queue mail --state retryable,discarded --json
  claimstore jobs list --backend postgres --tag billing --metadata '{"tenant": 7}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c FlagChecks
			Between(&c, "limit", limit, 1, jobs.MaxListLimit-1)
			AtLeast(&c, "before", before, 0)
			if priority != 0 {
				Between(&c, "priority", priority, 1, jobs.MaxPriority)
			}
			if metadata != "" && (!json.Valid([]byte(metadata)) || strings.TrimSpace(metadata)[0] != '{') {
				c.Fail("metadata", "must be a JSON object, got %s", metadata)
			}
			if c.err != nil {
				return c.err
			}
			p := jobs.ListParams{Queue: queue, Kind: kind, SequenceKey: sequence, BatchID: batch, BeforeID: before, Limit: limit + 1}
			for _, tag := range strings.Split(tags, ",") {
				if tag = strings.TrimSpace(tag); tag != "" {
					p.Tags = append(p.Tags, tag)
				}
			}
			if priority != 0 {
				p.Priorities = []int{priority}
			}
			if metadata != "" {
				p.Metadata = json.RawMessage(metadata)
			}
			for _, s := range strings.Split(states, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				if !slices.Contains(jobs.States(), jobs.State(s)) {
					return fmt.Errorf("%w: --state %q: want available, scheduled, running, retryable, completed, cancelled or discarded", dao.ErrInvalidArgument, s)
				}
				p.States = append(p.States, jobs.State(s))
			}
			if queue != "" {
				if err := jobs.CheckQueue(queue); err != nil {
					return fmt.Errorf("--queue: %w", err)
				}
			}
			if kind != "" {
				if err := jobs.CheckKind(kind); err != nil {
					return fmt.Errorf("--kind: %w", err)
				}
			}
			return withJobs(cmd, f, false, func(c *jobs.Client) error {
				res, err := c.ListPage(cmd.Context(), p)
				if err != nil {
					return err
				}
				rows := res.Jobs
				var next int64
				switch {
				case len(rows) > limit:
					rows = rows[:limit]
					next = rows[limit-1].ID
				case res.Cursor != nil: // the tag or metadata match read its most jobs
					next = res.Cursor.LastID()
				}
				return printJobs(cmd.OutOrStdout(), f.json, rows, next)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&states, "state", "", "list only jobs in these states, comma-separated")
	fl.StringVar(&queue, "queue", "", "list only jobs of this queue")
	fl.StringVar(&kind, "kind", "", "list only jobs of this kind")
	fl.StringVar(&sequence, "sequence", "", "list only jobs of the sequence of this key")
	fl.StringVar(&batch, "batch", "", "list only jobs of this batch, and its callback")
	fl.StringVar(&tags, "tag", "", "list only jobs carrying every one of these tags, comma-separated")
	fl.IntVar(&priority, "priority", 0, "list only jobs of this priority (1 to 4)")
	fl.StringVar(&metadata, "metadata", "", "list only jobs whose metadata contains this JSON object")
	fl.Int64Var(&before, "before", 0, "list jobs whose id is smaller (the next page)")
	fl.IntVar(&limit, "limit", 50, "most jobs listed")
	return cmd
}

// printJobs writes rows as a table, or as JSON with json; next, when not
// 0, is the --before of the next page.
func printJobs(w io.Writer, asJSON bool, rows []jobs.Row, next int64) error {
	views := make([]jobadmin.Job, len(rows))
	for i := range rows {
		views[i] = jobadmin.View(&rows[i])
	}
	if asJSON {
		return writeJSONTo(w, struct {
			Jobs       []jobadmin.Job `json:"jobs"`
			NextBefore int64          `json:"nextBefore,omitempty"`
		}{views, next})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tQUEUE\tSTATE\tATTEMPT\tPRIORITY\tSCHEDULED\tCREATED\tTAGS\tLAST ERROR")
	for _, j := range views {
		tags := strings.Join(j.Tags, ",")
		if tags == "" {
			tags = "-"
		}
		last := j.LastError()
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, j.Queue, j.State, j.Attempt, j.MaxAttempts, j.Priority,
			utcOr(&j.ScheduledAt, "-"), utcOr(&j.CreatedAt, "-"), tags, oneLine(last, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next > 0 {
		fmt.Fprintf(w, "older jobs: --before %d\n", next)
	}
	return nil
}

func newJobsGetCmd(f *jobFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one job: its fields, args, metadata, and every failed attempt's error and trace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := jobadmin.ParseIDs(args)
			if err != nil {
				return err
			}
			return withJobs(cmd, f, false, func(c *jobs.Client) error {
				r, err := c.Get(cmd.Context(), ids[0])
				if err != nil {
					return err
				}
				return printJob(cmd.OutOrStdout(), f.json, r)
			})
		},
	}
}

// printJob writes r for people, or as JSON with asJSON.
func printJob(w io.Writer, asJSON bool, r *jobs.Row) error {
	j := jobadmin.View(r)
	if asJSON {
		return writeJSONTo(w, j)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	lease := "-"
	if j.LeaseOwner != "" {
		lease = j.LeaseOwner + " until " + utcOr(j.LeaseUntil, "-")
	}
	unique := j.UniqueKey
	if unique == "" {
		unique = "-"
	}
	for _, kv := range [][2]string{
		{"id", strconv.FormatInt(j.ID, 10)}, {"kind", j.Kind}, {"queue", j.Queue}, {"state", string(j.State)},
		{"attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts)}, {"priority", strconv.Itoa(j.Priority)},
		{"scheduled", utcOr(&j.ScheduledAt, "-")}, {"created", utcOr(&j.CreatedAt, "-")},
		{"last attempt", utcOr(j.AttemptedAt, "-")}, {"finalized", utcOr(j.FinalizedAt, "-")},
		{"cancel requested", utcOr(j.CancelRequestedAt, "-")}, {"lease", lease}, {"unique key", unique},
		{"sequence", sequenceText(j)}, {"batch", batchText(j)}, {"workflow", workflowText(j)},
		{"tags", strings.Join(j.Tags, ", ")},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "args:\n%s\n", indentText(jobadmin.Indent(r.EncodedArgs)))
	if r.Metadata != "" {
		fmt.Fprintf(w, "metadata:\n%s\n", indentText(jobadmin.Indent(r.Metadata)))
	}
	fmt.Fprintf(w, "attempts: %d started, %d failed\n", j.Attempt, len(j.Errors))
	for _, e := range j.Errors {
		fmt.Fprintf(w, "  attempt %d, ended %s:\n%s\n", e.Attempt, e.At.UTC().Format(time.RFC3339), indentText(e.Error))
		if e.Trace != "" {
			fmt.Fprintf(w, "  trace:\n%s\n", indentText(e.Trace))
		}
	}
	if j.ErrorsText != "" {
		fmt.Fprintf(w, "errors column (does not parse):\n%s\n", indentText(j.ErrorsText))
	}
	return nil
}

// indentText indents every line of s by four spaces.
func indentText(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func newQueuesCmd(g *Globals) *cobra.Command {
	f := &jobFlags{globals: g}
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "List, pause and resume the queues of a job table (package jobs)",
		Long: `queues manages the queue table of package jobs (default claimstore_job_queues, or
--queue-table) next to its job table (default claimstore_jobs, or --table), on
the database given by --backend and --dsn (postgres, mysql, mariadb, or sqlite
with --dsn naming the file). Both must exist (jobs.Migrate creates them). A
pause or resume reaches every client of the table within its tick.`,
		Args: cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.table, "table", jobs.DefaultTable, "job table name")
	pf.StringVar(&f.queueTable, "queue-table", jobs.DefaultQueueTable, "queue table name")
	pf.BoolVar(&f.json, "json", false, "print JSON")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the queues of the queue table with their jobs by state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withJobs(cmd, f, true, func(c *jobs.Client) error { return listQueues(cmd, c, f.json) })
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "unknown-kinds",
		Short: "List the kinds of available jobs that no running client knows, by queue",
		Long: `unknown-kinds lists, by queue, the kinds of available jobs that no client running
their queue has a worker for (clients record their kinds in the queue table when
they start and every minute; a kind not recorded for 3 minutes is not known), or
whose queue no client runs. No client claims such a job: it waits for a client
that knows its kind (a rolling deploy not finished, a worker removed too early).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withJobs(cmd, f, true, func(c *jobs.Client) error { return listUnknownKinds(cmd, c, f.json) })
		},
	})
	for _, op := range []struct {
		name, short string
		run         func(*jobs.Client, context.Context, string) error
	}{
		{"pause", "Pause a queue ('*': every queue): within a tick no client claims its jobs; running jobs go on", (*jobs.Client).PauseQueue},
		{"resume", "Resume a paused queue ('*': every queue)", (*jobs.Client).ResumeQueue},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   op.name + " QUEUE",
			Short: op.short,
			Long: op.short + `.
QUEUE must be in the queue table (a client that ran it recorded it) or have
a job: another name fails (not found) and changes nothing. '*' is every
queue of the queue table.`,
			Example: fmt.Sprintf("  claimstore queues %s mail --backend postgres\n  claimstore queues %s '*' --backend postgres", op.name, op.name),
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if args[0] != jobs.AllQueues {
					if err := jobs.CheckQueue(args[0]); err != nil {
						return err
					}
				}
				return withJobs(cmd, f, true, func(c *jobs.Client) error {
					if err := op.run(c, cmd.Context(), args[0]); err != nil {
						return err
					}
					if f.json {
						return writeJSONTo(cmd.OutOrStdout(), map[string]string{op.name + "d": args[0]})
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%sd: %s\n", op.name, args[0])
					return nil
				})
			},
		})
	}
	return cmd
}

// queueInfo is one queue as `claimstore queues list --json` prints it.
type queueInfo struct {
	Name     string               `json:"name"`
	Paused   bool                 `json:"paused"`
	PausedAt *time.Time           `json:"pausedAt,omitempty"`
	Kinds    []string             `json:"kinds"`
	Counts   map[jobs.State]int64 `json:"counts"`
}

// unknownKind is one kind as `claimstore queues unknown-kinds --json`
// prints it.
type unknownKind struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"`
	Jobs  int64  `json:"jobs"`
}

// listUnknownKinds prints the kinds of available jobs that no running
// client knows (jobs.Client.UnknownKinds).
func listUnknownKinds(cmd *cobra.Command, c *jobs.Client, asJSON bool) error {
	ks, err := c.UnknownKinds(cmd.Context())
	if err != nil {
		return err
	}
	out := make([]unknownKind, len(ks))
	for i, k := range ks {
		out[i] = unknownKind{Queue: k.Queue, Kind: k.Kind, Jobs: k.Jobs}
	}
	if asJSON {
		return writeJSONTo(cmd.OutOrStdout(), out)
	}
	if len(out) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "no kind waits without a client that knows it")
		return nil
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tKIND\tJOBS")
	for _, k := range out {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", k.Queue, k.Kind, k.Jobs)
	}
	return tw.Flush()
}

// listQueues prints the queues of c's queue table and their jobs by
// state.
func listQueues(cmd *cobra.Command, c *jobs.Client, asJSON bool) error {
	qs, err := c.Queues(cmd.Context())
	if err != nil {
		return err
	}
	out := make([]queueInfo, len(qs))
	for i, q := range qs {
		out[i] = queueInfo{Name: q.Name, Paused: q.Paused, PausedAt: q.PausedAt, Kinds: q.Kinds}
		if out[i].Kinds == nil {
			out[i].Kinds = []string{}
		}
		if out[i].Counts, err = c.Count(cmd.Context(), q.Name); err != nil {
			return err
		}
	}
	if asJSON {
		return writeJSONTo(cmd.OutOrStdout(), out)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	head := "QUEUE\tSTATUS"
	for _, s := range jobs.States() {
		head += "\t" + strings.ToUpper(string(s))
	}
	fmt.Fprintln(tw, head)
	for _, q := range out {
		line := q.Name + "\tactive"
		if q.Paused {
			line = q.Name + "\tpaused since " + utcOr(q.PausedAt, "-")
		}
		for _, s := range jobs.States() {
			line += "\t" + strconv.FormatInt(q.Counts[s], 10)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
