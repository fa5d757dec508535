// Command jobs is a job queue: it defines a typed job whose work fails
// its first attempt and succeeds on the retry, a periodic job inserted
// every few seconds by a cron schedule, and a job inserted in the same
// transaction as the business row that asks for it; then it runs a client
// for a bounded time, or until SIGTERM or ctrl-C, prints what runs, and
// drains before it exits.
//
// It runs on an SQLite file by default and needs nothing installed:
//
//	go run ./examples/jobs
//	go run ./examples/jobs -for 30s
//	go run ./examples/jobs -backend postgres   # $CLAIMSTORE_POSTGRES_DSN or the local server
//
// On PostgreSQL the tables (example_jobs, its queue, migration and
// schedule tables, example_signups) are dropped when it ends.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gorm.io/gorm"

	// The backends this program can open.
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
)

// The example's tables.
const (
	jobTable      = "example_jobs"
	queueTable    = "example_jobs_queues"
	scheduleTable = "example_jobs_schedules"
)

// WelcomeArgs is a typed job: a welcome mail to one address.
type WelcomeArgs struct {
	To string `json:"to"`
}

// Kind names the job's kind in the job table.
func (WelcomeArgs) Kind() string { return "welcome_mail" }

// InsertOpts are the kind's own insert options: its queue, and unique by
// address while it waits or runs, so that signing up twice sends one
// mail.
func (WelcomeArgs) InsertOpts() jobs.InsertOpts {
	return jobs.InsertOpts{Queue: "mail", UniqueOpts: jobs.UniqueOpts{ByArgs: true}}
}

// ReportArgs is the periodic job.
type ReportArgs struct{}

// Kind names the job's kind.
func (ReportArgs) Kind() string { return "report" }

// Signup is the business row a sign-up writes.
type Signup struct {
	ID    int64  `gorm:"primaryKey"`
	Email string `gorm:"size:191;not null"`
}

// TableName names the business table.
func (Signup) TableName() string { return "example_signups" }

// config is what the flags set.
type config struct {
	backend string        // sqlite or postgres
	dsn     string        // empty: a file in a temporary directory, or the local PostgreSQL
	runFor  time.Duration // how long the client runs; 0: until a signal
	cron    string        // the periodic job's cron expression
}

func main() {
	var cfg config
	flag.StringVar(&cfg.backend, "backend", "sqlite", "database: sqlite or postgres")
	flag.StringVar(&cfg.dsn, "dsn", "", "data source name (default: an SQLite file in a temporary directory, or $CLAIMSTORE_POSTGRES_DSN, else the local PostgreSQL)")
	flag.DurationVar(&cfg.runFor, "for", 5*time.Second, "how long the client runs before it drains; 0 runs until SIGTERM or ctrl-C")
	flag.StringVar(&cfg.cron, "cron", "*/2 * * * * *", "cron expression of the periodic job (6 fields: seconds first)")
	flag.Parse()
	ctx, stop := dispatch.ShutdownContext(context.Background())
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal("jobs: ", err)
	}
}

// run opens the database, creates the tables, inserts the jobs and runs a
// client until cfg.runFor has passed or ctx ends, printing to out.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if cfg.runFor < 0 {
		return errors.New("-for must not be negative")
	}
	db, cleanup, err := open(ctx, &cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	// The library owns the job table: Migrate creates it, its indexes and
	// (on PostgreSQL) the trigger that wakes the workers on insert.
	store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(jobTable))
	if err != nil {
		return err
	}
	queues, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(queueTable))
	if err != nil {
		return err
	}
	if err := jobs.Migrate(ctx, store, queues); err != nil {
		return err
	}
	// Periodic jobs are schedules of package dispatch, in a table of
	// their own that MigrateScheduleStore creates.
	schedules, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(scheduleTable))
	if err != nil {
		return err
	}
	if err := dispatch.MigrateScheduleStore(ctx, schedules); err != nil {
		return err
	}
	if err := db.WithContext(ctx).AutoMigrate(&Signup{}); err != nil {
		return err
	}
	if cfg.backend == "postgres" {
		defer func() {
			cctx := context.WithoutCancel(ctx)
			err = errors.Join(err, jobs.Drop(cctx, store, queues),
				db.WithContext(cctx).Migrator().DropTable(scheduleTable, &Signup{}))
		}()
	}

	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	// Work functions by kind. The welcome mail fails its first attempt:
	// the error is kept with the job, which runs again after the backoff
	// (here 200 ms; the default is attempt⁴ seconds).
	workers := jobs.NewWorkers()
	err = jobs.AddWorker(workers, jobs.WorkFunc[WelcomeArgs](func(ctx context.Context, j *jobs.Job[WelcomeArgs]) error {
		if j.Attempt == 1 {
			say("welcome mail to %s: attempt %d fails", j.Args.To, j.Attempt)
			return errors.New("mail server busy")
		}
		say("welcome mail to %s: sent on attempt %d", j.Args.To, j.Attempt)
		return nil
	}), jobs.WithBackoff(func(int) time.Duration { return 200 * time.Millisecond }))
	if err != nil {
		return err
	}
	err = jobs.AddWorker(workers, jobs.WorkFunc[ReportArgs](func(ctx context.Context, j *jobs.Job[ReportArgs]) error {
		say("report: job %d ran", j.ID)
		return nil
	}))
	if err != nil {
		return err
	}
	client, err := jobs.NewClient(jobs.Config{
		Store: store, QueueStore: queues, Workers: workers,
		Queues:        map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 10}, "mail": {MaxWorkers: 5}},
		ScheduleStore: schedules,
		Periodic: []jobs.PeriodicJob{{
			Key: "report", Cron: cfg.cron,
			Construct: func() (jobs.Args, *jobs.InsertOpts) { return ReportArgs{}, nil },
		}},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}

	// A sign-up writes its row and its job in one transaction: both
	// commit, or neither. The second sign-up of the same address finds
	// the first one's job (unique by args) and inserts none.
	for range 2 {
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&Signup{Email: "ada@example.com"}).Error; err != nil {
				return err
			}
			res, err := client.InsertTx(ctx, tx, WelcomeArgs{To: "ada@example.com"}, nil)
			if err != nil {
				return err
			}
			say("sign-up: welcome job %d (duplicate: %v)", res.Job.ID, res.UniqueSkippedAsDuplicate)
			return nil
		})
		if err != nil {
			return err
		}
	}

	runCtx := ctx
	if cfg.runFor > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.runFor)
		defer cancel()
	}
	say("client running on %s", cfg.backend)
	if err := client.Run(runCtx); err != nil {
		return err
	}
	counts, err := client.Count(ctx, "")
	if err != nil {
		return err
	}
	st := client.Stats()
	say("drained: %d completed, %d retried; in the table: %d completed, %d waiting", st.Completed, st.Retried,
		counts[jobs.StateCompleted], counts[jobs.StateAvailable]+counts[jobs.StateScheduled]+counts[jobs.StateRetryable])
	welcome, err := client.List(ctx, jobs.ListParams{Kind: WelcomeArgs{}.Kind()})
	if err != nil {
		return err
	}
	for _, j := range welcome {
		errs, err := j.AttemptErrors()
		if err != nil {
			return err
		}
		for _, e := range errs {
			say("job %d attempt %d error: %s", j.ID, e.Attempt, e.Error)
		}
	}
	return nil
}

// open opens the database cfg names, filling cfg.dsn's default; cleanup
// removes the temporary directory of a default SQLite file.
func open(ctx context.Context, cfg *config) (db *gorm.DB, cleanup func(), err error) {
	cleanup = func() {}
	if cfg.dsn == "" {
		switch cfg.backend {
		case "sqlite":
			dir, err := os.MkdirTemp("", "claimstore-jobs-")
			if err != nil {
				return nil, cleanup, err
			}
			cleanup = func() { os.RemoveAll(dir) }
			cfg.dsn = filepath.Join(dir, "jobs.db")
		case "postgres":
			cfg.dsn = cmp.Or(os.Getenv("CLAIMSTORE_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		default:
			return nil, cleanup, fmt.Errorf("-backend %q: want sqlite or postgres", cfg.backend)
		}
	}
	db, err = sqlstore.Open(ctx, cfg.backend, cfg.dsn)
	if err != nil {
		cleanup()
	}
	return db, cleanup, err
}
