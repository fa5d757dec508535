package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/dsn"
)

// scheduleDB is an open schedule table of --backend and --dsn.
type scheduleDB struct {
	db      *gorm.DB
	store   *dao.Table[dispatch.Schedule]
	sc      *dispatch.Schedules
	backend string
	table   string
	close   func()
}

// checkScheduleTarget checks --backend and --dsn (g) and the table name
// before anything is opened: the memory backend lives in one process
// only, and every other needs a DSN (dsn.Resolve).
func checkScheduleTarget(g Globals, table string) error {
	if err := dispatch.CheckTable(table); err != nil {
		return fmt.Errorf("--table: %w", err)
	}
	backend := strings.ToLower(g.Backend)
	switch backend {
	case "memory":
		return fmt.Errorf("%w: --backend memory lives inside one process only; use postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument)
	case "sqlite", "postgres", "mysql", "mariadb":
		if _, err := dsn.Resolve(backend, g.DSN); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: --backend %q: want postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument, g.Backend)
	}
	return nil
}

// sqliteFileExists returns an error naming the file when d, an SQLite
// DSN, names a database file that does not exist: opening it would
// create it empty.
func sqliteFileExists(d string) error {
	p, _, _ := strings.Cut(strings.TrimPrefix(d, "file:"), "?")
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--dsn: SQLite database file %s does not exist", p)
	}
	return nil
}

// openDB opens the database of --backend (lower case, returned) and
// --dsn (g) with a pool of pool connections (0: database/sql's default)
// and returns it with the function that closes it. An SQLite file must
// exist unless create is set.
func openDB(ctx context.Context, g Globals, create bool, pool int) (db *gorm.DB, backend string, closeDB func(), err error) {
	backend = strings.ToLower(g.Backend)
	d, err := dsn.Resolve(backend, g.DSN)
	if err != nil {
		return nil, backend, nil, err
	}
	if backend == "sqlite" && !create {
		if err := sqliteFileExists(d); err != nil {
			return nil, backend, nil, err
		}
	}
	if db, err = sqlstore.Open(ctx, backend, d); err != nil {
		return nil, backend, nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, backend, nil, fmt.Errorf("the database pool: %w", err)
	}
	if pool > 0 {
		sqlDB.SetMaxOpenConns(pool)
		sqlDB.SetMaxIdleConns(pool)
	}
	return db, backend, func() { _ = sqlDB.Close() }, nil
}

// openSchedules opens the schedule table of --backend and --dsn (g), creating
// it when migrate is set. Call checkScheduleTarget first.
func openSchedules(ctx context.Context, g Globals, table string, migrate bool, pool int) (*scheduleDB, error) {
	db, backend, closeDB, err := openDB(ctx, g, migrate, pool)
	if err != nil {
		return nil, err
	}
	s := &scheduleDB{db: db, backend: backend, table: table, close: closeDB}
	if migrate {
		if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
			s.close()
			return nil, err
		}
	} else if !db.WithContext(ctx).Migrator().HasTable(table) {
		s.close()
		return nil, &missingTableError{table: table, backend: backend, kind: "schedule",
			fix: "create it with `claimstore schedule add` or dispatch.MigrateSchedules in your program"}
	}
	if s.store, err = sqlstore.New[dispatch.Schedule](db.WithContext(ctx), sqlstore.WithTable(table)); err != nil {
		s.close()
		return nil, err
	}
	if s.sc, err = dispatch.NewSchedules(s.store, dispatch.SchedulesConfig{}); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func newScheduleCmd(g *Globals) *cobra.Command {
	var table string
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Add, list, pause, resume and delete schedules (package dispatch)",
		Long: `schedule manages the schedule table of package dispatch on the database given
by --backend and --dsn (postgres, mysql, mariadb, or sqlite with --dsn naming
the file). add creates the table when it is missing; the other commands
need it.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&table, "table", dispatch.DefaultScheduleTable, "schedule table name")
	cmd.AddCommand(newScheduleAddCmd(g, &table), newScheduleListCmd(g, &table))
	for _, op := range []struct {
		name, short string
		run         func(*dispatch.Schedules, context.Context, string) error
	}{
		{"pause", "Stop a schedule from firing until it is resumed", (*dispatch.Schedules).Pause},
		{"resume", "Make a paused schedule active again, or re-arm a failed one", (*dispatch.Schedules).Resume},
		{"delete", "Delete a schedule", (*dispatch.Schedules).Delete},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   op.name + " KEY",
			Short: op.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := checkKey(args[0]); err != nil {
					return err
				}
				if err := checkScheduleTarget(*g, table); err != nil {
					return err
				}
				s, err := openSchedules(cmd.Context(), *g, table, false, 2)
				if err != nil {
					return err
				}
				defer s.close()
				if err := op.run(s.sc, cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", op.name, args[0])
				return nil
			},
		})
	}
	return cmd
}

func checkKey(key string) error {
	if key == "" || len(key) > dispatch.MaxKeyLen {
		return fmt.Errorf("%w: schedule key must be 1 to %d bytes, got %d", dao.ErrInvalidArgument, dispatch.MaxKeyLen, len(key))
	}
	return nil
}

// scheduleAddOptions are the flags of `claimstore schedule add`.
type scheduleAddOptions struct {
	at          string
	in          time.Duration
	cron, tz    string
	payload     string
	maxFailures int
	upsert      bool
}

func newScheduleAddCmd(g *Globals, table *string) *cobra.Command {
	var o scheduleAddOptions
	cmd := &cobra.Command{
		Use:   "add KEY",
		Short: "Add a once or cron schedule (idempotent by key; --upsert replaces its definition)",
		Long: `add creates the schedule KEY: a once schedule firing at --at (RFC 3339, or
a local time such as 2030-01-02T03:04 read in the IANA zone --tz, default
UTC) or --in from now (default: now), or a cron schedule with --cron (5
fields, 6 with leading seconds) read in the IANA zone --tz (default UTC). When KEY
exists it is left unchanged and printed, unless --upsert replaces its
definition and re-arms it.`,
		Example: `  claimstore schedule add invoice-42-reminder --in 72h --payload 'invoice 42' --backend postgres
  claimstore schedule add nightly-report --cron '0 3 * * *' --tz Europe/Berlin --backend sqlite --dsn app.db`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScheduleAdd(cmd, *g, *table, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.at, "at", "", "fire time of a once schedule, RFC 3339 (e.g. 2030-01-02T03:04:05Z) or a local time in --tz (2030-01-02T03:04)")
	f.DurationVar(&o.in, "in", 0, "fire a once schedule this long from now")
	f.StringVar(&o.cron, "cron", "", "cron expression: makes a cron schedule")
	f.StringVar(&o.tz, "tz", "", "IANA time zone of --cron or of a local --at (default UTC)")
	f.StringVar(&o.payload, "payload", "", "payload handed to the handler")
	f.IntVar(&o.maxFailures, "max-failures", dispatch.DefaultMaxFailures, "consecutive failures at which a once schedule fails and a cron schedule skips ahead")
	f.BoolVar(&o.upsert, "upsert", false, "replace the definition of an existing schedule and re-arm it")
	return cmd
}

func runScheduleAdd(cmd *cobra.Command, g Globals, table, key string, o scheduleAddOptions) error {
	if err := checkKey(key); err != nil {
		return err
	}
	var c FlagChecks
	AtLeast(&c, "max-failures", o.maxFailures, 1)
	AtLeast(&c, "in", o.in, 0)
	if c.err != nil {
		return c.err
	}
	sp, err := dispatch.ParseSpec(dispatch.SpecText{Key: key, Cron: o.cron, TimeZone: o.tz, At: o.at, In: o.in,
		Payload: o.payload, MaxFailures: o.maxFailures}, time.Now())
	if err != nil {
		return err
	}
	if err := checkScheduleTarget(g, table); err != nil {
		return err
	}
	s, err := openSchedules(cmd.Context(), g, table, true, 2)
	if err != nil {
		return err
	}
	defer s.close()
	var got dispatch.Schedule
	verb := "exists"
	if o.upsert {
		got, err = s.sc.Upsert(cmd.Context(), sp)
		verb = "upserted"
	} else {
		var created bool
		got, created, err = s.sc.Add(cmd.Context(), sp)
		if created {
			verb = "added"
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: ", verb)
	return printSchedules(cmd, []dispatch.Schedule{got}, false)
}

func newScheduleListCmd(g *Globals, table *string) *cobra.Command {
	var status, after string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules in key order",
		Long: `list prints the schedules in key order: key, kind, cron and zone, status, next
fire time, failure count, last fire and last error. --after pages on.`,
		Example: `  claimstore schedule list --backend postgres --status failed`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c FlagChecks
			Between(&c, "limit", limit, 1, 100000)
			if c.err != nil {
				return c.err
			}
			switch dispatch.Status(status) {
			case "", dispatch.StatusActive, dispatch.StatusPaused, dispatch.StatusFired, dispatch.StatusFailed:
			default:
				return fmt.Errorf("%w: --status %q: want active, paused, fired or failed", dao.ErrInvalidArgument, status)
			}
			if err := checkScheduleTarget(*g, *table); err != nil {
				return err
			}
			s, err := openSchedules(cmd.Context(), *g, *table, false, 2)
			if err != nil {
				return err
			}
			defer s.close()
			rows, err := s.sc.List(cmd.Context(), dispatch.ListOptions{Status: dispatch.Status(status), AfterKey: after, Limit: limit})
			if err != nil {
				return err
			}
			return printSchedules(cmd, rows, true)
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "list only schedules in this status: active, paused, fired or failed")
	f.StringVar(&after, "after", "", "list keys after this one (paging)")
	f.IntVar(&limit, "limit", 100, "most schedules listed")
	return cmd
}

// printSchedules writes the schedules as a table (with a header line when
// header is set).
func printSchedules(cmd *cobra.Command, rows []dispatch.Schedule, header bool) error {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(w, "KEY\tKIND\tCRON\tSTATUS\tNEXT FIRE\tFAILURES\tLAST FIRED\tLAST ERROR")
	}
	for _, s := range rows {
		cron := "-"
		if s.Kind == dispatch.KindCron {
			cron = s.Cron
			if s.TimeZone != "" {
				cron += " (" + s.TimeZone + ")"
			}
		}
		last := "-"
		if s.LastFiredAt != nil {
			last = s.LastFiredAt.UTC().Format(time.RFC3339)
		}
		lastErr := s.LastError
		if lastErr == "" {
			lastErr = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", s.Key, s.Kind, cron, s.Status,
			s.NextFireAt.UTC().Format(time.RFC3339), s.FailureCount, s.MaxFailures, last, lastErr)
	}
	return w.Flush()
}
