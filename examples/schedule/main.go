// Command schedule is a scheduled job: it adds a once schedule and a cron
// schedule by key (adding them again changes nothing), then runs a
// schedule worker that fires them and prints each fire, for a bounded time
// or until SIGTERM or ctrl-C, and drains before it exits.
//
// It runs on an SQLite file by default and needs nothing installed:
//
//	go run ./examples/schedule
//	go run ./examples/schedule -for 30s -cron '*/5 * * * * *'
//	go run ./examples/schedule -backend postgres   # $CLAIMSTORE_POSTGRES_DSN or the local server
//
// On PostgreSQL the schedules stay in the table example_schedules between
// runs: a second run finds them by key, and the once schedule, fired by
// the first run, does not fire again; a changed -cron takes effect once
// the table is dropped (Add keeps a stored definition).
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

	// The backends this program can open.
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
)

// table is the schedule table of the example.
const table = "example_schedules"

// The keys of the two schedules.
const (
	onceKey = "example-welcome-mail"
	cronKey = "example-report"
)

// config is what the flags set.
type config struct {
	backend string        // sqlite or postgres
	dsn     string        // empty: a file in a temporary directory, or the local PostgreSQL
	runFor  time.Duration // how long the worker runs; 0: until a signal
	cron    string        // the cron schedule's expression
	delay   time.Duration // how far in the future the once schedule fires
}

func main() {
	var cfg config
	flag.StringVar(&cfg.backend, "backend", "sqlite", "database: sqlite or postgres")
	flag.StringVar(&cfg.dsn, "dsn", "", "data source name (default: an SQLite file in a temporary directory, or $CLAIMSTORE_POSTGRES_DSN, else the local PostgreSQL)")
	flag.DurationVar(&cfg.runFor, "for", 5*time.Second, "how long the worker runs before it drains; 0 runs until SIGTERM or ctrl-C")
	flag.StringVar(&cfg.cron, "cron", "*/2 * * * * *", "cron expression of the cron schedule (6 fields: seconds first)")
	flag.DurationVar(&cfg.delay, "once-in", time.Second, "delay of the once schedule's fire time from now")
	flag.Parse()

	// SIGTERM (a rolling deploy) or ctrl-C ends the context: the worker
	// stops claiming and drains.
	ctx, stop := dispatch.ShutdownContext(context.Background())
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal("schedule: ", err)
	}
}

// run opens the database, adds the two schedules and fires them until
// cfg.runFor has passed or ctx ends; it prints each fire to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.runFor < 0 || cfg.delay < 0 {
		return errors.New("-for and -once-in must not be negative")
	}
	if err := dispatch.CheckCron(cfg.cron, ""); err != nil {
		return fmt.Errorf("-cron: %w", err)
	}
	if cfg.dsn == "" {
		switch cfg.backend {
		case "sqlite":
			dir, err := os.MkdirTemp("", "claimstore-schedule-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			cfg.dsn = filepath.Join(dir, "schedules.db") // sqlstore.Open gives a path WAL, a busy timeout, BEGIN IMMEDIATE
		case "postgres":
			cfg.dsn = cmp.Or(os.Getenv("CLAIMSTORE_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		default:
			return fmt.Errorf("-backend %q: want sqlite or postgres", cfg.backend)
		}
	}
	db, err := sqlstore.Open(ctx, cfg.backend, cfg.dsn)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	// The table is named once, on the store; the migration takes it
	// from there.
	store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table))
	if err != nil {
		return err
	}
	if err := dispatch.MigrateScheduleStore(ctx, store); err != nil {
		return err
	}
	schedules, err := dispatch.NewSchedules(store, dispatch.SchedulesConfig{})
	if err != nil {
		return err
	}

	// Add is idempotent by key: a second Add of a key returns the stored
	// schedule and false, unchanged even when the spec differs (Upsert
	// replaces a stored definition). A service adds its schedules like
	// this at every start.
	specs := []dispatch.Spec{
		{Key: onceKey, At: time.Now().Add(cfg.delay), Payload: []byte("send the welcome mail")},
		{Key: cronKey, Cron: cfg.cron, Payload: []byte("write the report")},
	}
	for range 2 {
		for _, sp := range specs {
			s, created, err := schedules.Add(ctx, sp)
			if err != nil {
				return err
			}
			verb := "exists"
			if created {
				verb = "added"
			}
			fmt.Fprintf(out, "%s %s %s: %s, next fire %s\n", verb, s.Kind, s.Key, s.Status, s.NextFireAt.Format("2006-01-02 15:04:05.000 MST"))
		}
	}

	var mu sync.Mutex
	worker, err := dispatch.NewScheduleWorker(store, func(ctx context.Context, f dispatch.Fire) error {
		// The job itself goes here. It may run again after a crash
		// (delivery is at least once): key its side effects by the
		// schedule's key and due time.
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "fire %s (%s) due %s, lag %v: %s\n", f.Schedule.Key, f.Schedule.Kind,
			f.Schedule.NextFireAt.Format("15:04:05.000"), f.Lag.Round(time.Millisecond), f.Schedule.Payload)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		PollInterval: 100 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}

	runCtx := ctx
	if cfg.runFor > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.runFor)
		defer cancel()
	}
	fmt.Fprintf(out, "worker running on %s (until %s)\n", cfg.backend, until(cfg.runFor))
	if err := worker.Run(runCtx); err != nil {
		return err
	}
	st := worker.ScheduleStats()
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(out, "drained: %d fires, %d retries, %d failed\n", st.Fired, st.Retries, st.Failed)
	return nil
}

// until describes when the worker stops.
func until(d time.Duration) string {
	if d == 0 {
		return "SIGTERM or ctrl-C"
	}
	return fmt.Sprintf("%v have passed, or SIGTERM or ctrl-C", d)
}
