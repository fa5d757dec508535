package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/bench"
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

// outboxEnv is an open message table.
type outboxEnv struct {
	repo    *outbox.Repository
	db      *gorm.DB // nil for the memory backend
	backend string
	table   string
	// file is the SQLite database file, tempFile whether it is a temporary
	// one that Close removes unless keepFile is set.
	file     string
	tempFile bool
	keepFile bool
	cleanup  []func()
}

// Close releases the database and removes a temporary SQLite file.
func (e *outboxEnv) Close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

// openOutbox opens the message table for the global --backend and --dsn.
// Without --dsn the servers default to the local test servers and SQLite to
// a temporary file (removed by Close) when tempSQLite, else it is an error.
// migrate creates the table and its indexes when missing; without it, an
// SQLite file that does not exist is an error rather than created empty.
// pool is the most open connections the command needs.
func openOutbox(ctx context.Context, table string, migrate, tempSQLite bool, pool int, opts ...outbox.Option) (*outboxEnv, error) {
	backend, dsn := strings.ToLower(globalFlags.Backend), globalFlags.DSN
	env := &outboxEnv{backend: backend, table: table}
	if backend == "memory" {
		s, err := memstore.New[outbox.Message]()
		if err != nil {
			return nil, err
		}
		if env.repo, err = outbox.New(s, opts...); err != nil {
			return nil, err
		}
		return env, nil
	}
	if err := outbox.CheckTable(table); err != nil {
		return nil, fmt.Errorf("--table: %w", err)
	}
	switch {
	case dsn == "" && backend == "sqlite":
		if !tempSQLite {
			return nil, fmt.Errorf("--dsn is required for sqlite: the path of the database file, e.g. --dsn %q", sqlstore.SQLiteDSN("claimstore.db"))
		}
		dir, err := os.MkdirTemp("", "claimstore-")
		if err != nil {
			return nil, err
		}
		env.file, env.tempFile = filepath.Join(dir, "claimstore.db"), true
		env.cleanup = append(env.cleanup, func() {
			if !env.keepFile {
				_ = os.RemoveAll(dir)
			}
		})
		dsn = sqlstore.SQLiteDSN(env.file)
	case dsn == "":
		d, cleanup, err := bench.DefaultDSN(backend)
		if err != nil {
			return nil, err
		}
		dsn = d
		env.cleanup = append(env.cleanup, func() { _ = cleanup() })
	case backend == "sqlite":
		if !strings.Contains(dsn, "?") && !strings.HasPrefix(dsn, "file:") {
			dsn = sqlstore.SQLiteDSN(dsn) // a bare path gets the recommended settings
		}
		env.file, _ = sqlitePath(dsn)
		if !migrate {
			if err := checkSQLiteFile(dsn); err != nil {
				return nil, err
			}
		}
	}
	db, err := sqlstore.Open(ctx, backend, dsn)
	if err != nil {
		env.Close()
		return nil, err
	}
	env.db = db
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(pool)
		sqlDB.SetMaxIdleConns(pool)
		env.cleanup = append(env.cleanup, func() { _ = sqlDB.Close() })
	}
	if migrate {
		if err := outbox.Migrate(ctx, db, table); err != nil {
			env.Close()
			return nil, err
		}
	}
	store, err := sqlstore.New[outbox.Message](db.WithContext(ctx), sqlstore.WithTable(table))
	if err != nil {
		env.Close()
		return nil, err
	}
	if env.repo, err = outbox.New(store, opts...); err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// checkTable fails with a *missingTableError when the message table does
// not exist (the memory backend always has it).
func (e *outboxEnv) checkTable(ctx context.Context) *missingTableError {
	if e.db == nil || e.db.WithContext(ctx).Migrator().HasTable(e.table) {
		return nil
	}
	return &missingTableError{table: e.table, backend: e.backend}
}

// isBusy reports whether err is a write that found the database locked by
// another writer and may be tried again: the dao's retryable errors, and
// SQLite's BUSY and LOCKED, which a BEGIN IMMEDIATE reports before any store
// maps them.
func isBusy(err error) bool {
	if err == nil {
		return false
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && (coded.Code()&0xff == 5 || coded.Code()&0xff == 6) {
		return true
	}
	return dao.IsRetryable(err) || strings.Contains(err.Error(), "database is locked")
}

// retryBusy runs write until it succeeds, fails with an error no retry can
// cure (see isBusy), or has failed 20 times; between attempts it waits
// 10 ms more each time. It returns the last error and the number of
// retries.
func retryBusy(ctx context.Context, write func() error) (int64, error) {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || attempt == 20 || !isBusy(err) {
			return int64(attempt - 1), err
		}
		select {
		case <-ctx.Done():
			return int64(attempt - 1), err
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
}

// busyRetryStore is a message store whose claims and updates (the relay's
// marks) are retried quietly by retryBusy when the database is busy, as
// SQLite is whenever another connection holds its single write lock; it
// counts the retries in retries.
type busyRetryStore struct {
	dao.Store[outbox.Message]
	retries *atomic.Int64
}

// Claim claims up to req.Limit rows; after a busy failure it claims the
// rest of the limit again and returns every row claimed.
func (s busyRetryStore) Claim(ctx context.Context, req dao.ClaimRequest) ([]outbox.Message, error) {
	var all []outbox.Message
	n, err := retryBusy(ctx, func() error {
		got, err := s.Store.Claim(ctx, req)
		all = append(all, got...)
		req.Limit -= len(got)
		if err != nil && req.Limit <= 0 {
			return nil // the failure came after the last row
		}
		return err
	})
	s.retries.Add(n)
	return all, err
}

// Update runs the update, retried while the database is busy.
func (s busyRetryStore) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	var rows int64
	n, err := retryBusy(ctx, func() error {
		var err error
		rows, err = s.Store.Update(ctx, where, set)
		return err
	})
	s.retries.Add(n)
	return rows, err
}

// withBusyRetries returns a repository over the store of env's repository
// whose claims and marks are retried quietly while the database is busy,
// counting the retries in retries; on the memory backend it returns the
// repository as it is.
func withBusyRetries(env *outboxEnv, retries *atomic.Int64, opts ...outbox.Option) (*outbox.Repository, error) {
	s, ok := env.repo.Store().(*dao.Table[outbox.Message])
	if !ok || !s.Capabilities().Transactions {
		return env.repo, nil
	}
	opts = append(opts, outbox.WithTxStore(func(tx *gorm.DB) dao.Store[outbox.Message] { return s.WithTx(tx) }))
	return outbox.New(busyRetryStore{Store: s, retries: retries}, opts...)
}

func init() { rootCmd.AddCommand(newOutboxCmd()) }

func newOutboxCmd() *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Inspect and maintain an outbox message table: status, requeue, purge",
		Long: `outbox inspects and maintains the message table of the transactional outbox
on the database given by --backend and --dsn (postgres, mysql, mariadb, or
sqlite with --dsn naming the file).`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&table, "table", outbox.DefaultTable, "message table name")
	cmd.AddCommand(newOutboxStatusCmd(&table), newOutboxRequeueCmd(&table), newOutboxPurgeCmd(&table))
	return cmd
}

// openExisting opens the table of an outbox subcommand.
func openExisting(cmd *cobra.Command, table string) (*outboxEnv, error) {
	if strings.EqualFold(globalFlags.Backend, "memory") {
		return nil, fmt.Errorf("%w: the memory backend lives only inside one process; use --backend postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument)
	}
	return openOutbox(cmd.Context(), table, false, false, 4)
}

func newOutboxStatusCmd(table *string) *cobra.Command {
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
			var c flagChecks
			atLeast(&c, "limit", limit, 0)
			if c.err != nil {
				return c.err
			}
			env, err := openExisting(cmd, *table)
			if err != nil {
				return err
			}
			defer env.Close()
			return explainTable(outboxStatus(cmd, env, st, limit, broker), env.backend, env.table)
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
func outboxStatus(cmd *cobra.Command, env *outboxEnv, st outbox.Status, limit int, broker string) error {
	ctx := cmd.Context()
	counts, err := env.repo.Counts(ctx)
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
	oldest, ok, err := env.repo.OldestUnpublished(ctx, broker)
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
	rows, err := env.repo.List(ctx, outbox.Filter{Statuses: []outbox.Status{st}, Limit: limit})
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

func newOutboxRequeueCmd(table *string) *cobra.Command {
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
			env, err := openExisting(cmd, *table)
			if err != nil {
				return err
			}
			defer env.Close()
			n, err := env.repo.Requeue(cmd.Context(), statuses, ids...)
			if err != nil {
				return explainTable(err, env.backend, env.table)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "requeued %d message(s)\n", n)
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "any", "requeue only messages in this status: failed, abandoned or any")
	cmd.Flags().BoolVar(&all, "all", false, "requeue every message in --status")
	return cmd
}

func newOutboxPurgeCmd(table *string) *cobra.Command {
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
			var c flagChecks
			atLeast(&c, "older-than", olderThan, 0)
			atLeast(&c, "batch", batch, 1)
			atLeast(&c, "max-batches", maxBatches, 0)
			if c.err != nil {
				return c.err
			}
			env, err := openExisting(cmd, *table)
			if err != nil {
				return err
			}
			defer env.Close()
			start := time.Now()
			n, err := env.repo.Purge(cmd.Context(), outbox.PurgeRequest{
				Status: outbox.Status(status), OlderThan: olderThan, BatchSize: batch, MaxBatches: maxBatches,
			})
			if err == nil || n > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %d %s message(s) older than %v in %v\n", n, status, olderThan, time.Since(start).Round(time.Millisecond))
			}
			return explainTable(err, env.backend, env.table)
		},
	}
	cmd.Flags().StringVar(&status, "status", string(outbox.StatusPublished), "published or abandoned")
	cmd.Flags().DurationVar(&olderThan, "older-than", 7*24*time.Hour, "delete messages older than this (published: since published; abandoned: since last processed)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "most rows per DELETE")
	cmd.Flags().IntVar(&maxBatches, "max-batches", 0, "stop after this many batches (0: until done)")
	return cmd
}
