package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/dsn"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
)

// envNATSURL names the environment variable with the default NATS URL.
const envNATSURL = "CLAIMSTORE_NATS_URL"

// defaultNATSURL returns $CLAIMSTORE_NATS_URL or the local server.
func defaultNATSURL() string {
	if u := os.Getenv(envNATSURL); u != "" {
		return u
	}
	return nats.DefaultURL
}

// openOutbox opens the message table o describes on the command line's
// --backend and --dsn, g (o.Backend and o.DSN are set from them; see
// dsn.Resolve).
func openOutbox(ctx context.Context, g Globals, o outboxenv.Options) (*outboxenv.Env, error) {
	o.Backend = strings.ToLower(g.Backend)
	d, err := dsn.Resolve(o.Backend, g.DSN)
	if err != nil {
		return nil, err
	}
	o.DSN = d
	return outboxenv.Open(ctx, o)
}

// checkTable fails with a *missingTableError when the message table of env
// does not exist (the memory backend always has it).
func checkTable(ctx context.Context, env *outboxenv.Env) *missingTableError {
	if env.HasTable(ctx) {
		return nil
	}
	return &missingTableError{table: env.Table, backend: env.Backend}
}

func newOutboxCmd(g *Globals) *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Inspect and maintain an outbox message table: status, requeue, purge; a log's cursors: log",
		Long: `outbox inspects and maintains the message table of the transactional outbox
on the database given by --backend and --dsn (postgres, mysql, mariadb, or
sqlite with --dsn naming the file); outbox log shows the readers' cursors of
the outbox's log mode with their lag.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&table, "table", outbox.DefaultTable, "message table name")
	cmd.AddCommand(newOutboxStatusCmd(g, &table), newOutboxRequeueCmd(g, &table), newOutboxPurgeCmd(g, &table), newOutboxLogCmd(g))
	return cmd
}

// openExisting opens the table of an outbox subcommand on --backend and
// --dsn, g.
func openExisting(cmd *cobra.Command, g Globals, table string) (*outboxenv.Env, error) {
	if strings.EqualFold(g.Backend, "memory") {
		return nil, fmt.Errorf("%w: the memory backend lives only inside one process; use --backend postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument)
	}
	return openOutbox(cmd.Context(), g, outboxenv.Options{Table: table, Pool: 4})
}

func newOutboxStatusCmd(g *Globals, table *string) *cobra.Command {
	var list string
	var limit int
	var broker string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Count messages by status and show the age of the oldest unpublished one",
		Example: `  claimstore outbox status --backend postgres
  claimstore outbox status --backend sqlite --dsn app.db --list abandoned --limit 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st := outbox.Status(list)
			if list != "" && !st.Valid() {
				return fmt.Errorf("%w: --list %q: want pending, processing, published, failed or abandoned", dao.ErrInvalidArgument, list)
			}
			var c FlagChecks
			AtLeast(&c, "limit", limit, 0)
			if c.err != nil {
				return c.err
			}
			env, err := openExisting(cmd, *g, *table)
			if err != nil {
				return err
			}
			defer env.Close()
			return explainTable(outboxStatus(cmd, env, st, limit, broker), env.Backend, env.Table)
		},
	}
	cmd.Flags().StringVar(&list, "list", "", "also list messages in this status (pending, processing, published, failed, abandoned)")
	cmd.Flags().IntVar(&limit, "limit", 50, "most messages to list (0: all)")
	cmd.Flags().StringVar(&broker, "broker", "", "target broker of the oldest-message age")
	return cmd
}

// outboxStatus prints the counts of env's table by status and the age of
// its oldest unpublished message of broker; with st set, it also lists up
// to limit (0: all) messages in status st.
func outboxStatus(cmd *cobra.Command, env *outboxenv.Env, st outbox.Status, limit int, broker string) error {
	ctx := cmd.Context()
	counts, err := env.Repo.Counts(ctx)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	var total int64
	for _, s := range outbox.Statuses {
		fmt.Fprintf(w, "%s\t%d\n", s, counts[s])
		total += counts[s]
	}
	fmt.Fprintf(w, "total\t%d\n", total)
	if err := w.Flush(); err != nil {
		return err
	}
	oldest, ok, err := env.Repo.OldestUnpublished(ctx, broker)
	if err != nil {
		return err
	}
	if ok {
		fmt.Fprintf(out, "oldest unpublished message (broker %q): %s old, created %s\n", broker, time.Since(oldest).Round(time.Millisecond), oldest.Format(time.RFC3339))
	} else {
		fmt.Fprintf(out, "oldest unpublished message (broker %q): none\n", broker)
	}
	if st == "" {
		return nil
	}
	rows, err := env.Repo.List(ctx, outbox.Filter{Statuses: []outbox.Status{st}, Limit: limit})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tMESSAGE ID\tTOPIC\tBROKER\tRETRIES\tCREATED\tLOCKED BY\tLAST ERROR")
	for _, m := range rows {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", m.ID, m.MessageID, m.Topic, m.TargetBroker,
			m.RetryCount, m.MaxRetries, m.CreatedAt.Format(time.RFC3339), m.LockedBy, oneLine(m.LastError, 80))
	}
	return w.Flush()
}

// oneLine shortens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}

func newOutboxRequeueCmd(g *Globals, table *string) *cobra.Command {
	var status string
	var all bool
	cmd := &cobra.Command{
		Use:   "requeue [ID...]",
		Short: "Send failed or abandoned messages again: back to pending with the retry count reset",
		Example: `  claimstore outbox requeue --backend postgres 17 18
  claimstore outbox requeue --backend postgres --all --status abandoned`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !all {
				return fmt.Errorf("%w: give message ids, or --all", dao.ErrInvalidArgument)
			}
			if len(args) > 0 && all {
				return fmt.Errorf("%w: give message ids or --all, not both", dao.ErrInvalidArgument)
			}
			ids := make([]int64, len(args))
			for i, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%w: message id %q is not a positive integer", dao.ErrInvalidArgument, a)
				}
				ids[i] = id
			}
			var statuses []outbox.Status
			switch status {
			case "", "any":
			case string(outbox.StatusFailed), string(outbox.StatusAbandoned):
				statuses = []outbox.Status{outbox.Status(status)}
			default:
				return fmt.Errorf("--status: %w: %q (want failed, abandoned or any)", dao.ErrInvalidArgument, status)
			}
			env, err := openExisting(cmd, *g, *table)
			if err != nil {
				return err
			}
			defer env.Close()
			n, err := env.Repo.Requeue(cmd.Context(), statuses, ids...)
			if err != nil {
				return explainTable(err, env.Backend, env.Table)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "requeued %d message(s)\n", n)
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "any", "requeue only messages in this status: failed, abandoned or any")
	cmd.Flags().BoolVar(&all, "all", false, "requeue every message in --status")
	return cmd
}

func newOutboxPurgeCmd(g *Globals, table *string) *cobra.Command {
	var status string
	var olderThan time.Duration
	var batch, maxBatches int
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete old published (or abandoned) messages in bounded batches",
		Long: `purge deletes published (or, with --status abandoned, abandoned) messages older
than --older-than, at most --batch rows per DELETE, until none is left. Any
number of servers may purge at the same time; each row is deleted once.`,
		Example: `  claimstore outbox purge --backend postgres --older-than 168h`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != string(outbox.StatusPublished) && status != string(outbox.StatusAbandoned) {
				return fmt.Errorf("%w: --status %q: only published or abandoned messages can be purged", dao.ErrInvalidArgument, status)
			}
			var c FlagChecks
			AtLeast(&c, "older-than", olderThan, 0)
			AtLeast(&c, "batch", batch, 1)
			AtLeast(&c, "max-batches", maxBatches, 0)
			if c.err != nil {
				return c.err
			}
			env, err := openExisting(cmd, *g, *table)
			if err != nil {
				return err
			}
			defer env.Close()
			start := time.Now()
			n, err := env.Repo.Purge(cmd.Context(), outbox.PurgeRequest{
				Status: outbox.Status(status), OlderThan: olderThan, BatchSize: batch, MaxBatches: maxBatches,
			})
			if err == nil || n > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %d %s message(s) older than %v in %v\n", n, status, olderThan, time.Since(start).Round(time.Millisecond))
			}
			return explainTable(err, env.Backend, env.Table)
		},
	}
	cmd.Flags().StringVar(&status, "status", string(outbox.StatusPublished), "published or abandoned")
	cmd.Flags().DurationVar(&olderThan, "older-than", 7*24*time.Hour, "delete messages older than this (published: since published; abandoned: since last processed)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "most rows per DELETE")
	cmd.Flags().IntVar(&maxBatches, "max-batches", 0, "stop after this many batches (0: until done)")
	return cmd
}
