// Command worker is a worker loop over a model of your own: it adds a few
// thumbnail tasks, then runs several workers that each claim a batch with a
// lease, process it and mark every task done, until no task is left.
//
// It runs on an SQLite file by default and needs nothing installed:
//
//	go run ./examples/worker
//	go run ./examples/worker -backend postgres   # $CLAIMSTORE_POSTGRES_DSN or the local server
//	go run ./examples/worker -backend postgres -dsn 'postgres://user@host:5432/db'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	// The backends this program can open.
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
)

// Thumbnail is one task: make a thumbnail of Image.
type Thumbnail struct {
	ID          int64
	Image       string
	Thumb       string
	Status      string `gorm:"index"` // ready, running or done
	LockedBy    *string
	LockedUntil *time.Time
}

// TableName is the table of the tasks.
func (Thumbnail) TableName() string { return "example_thumbnails" }

// config is what the flags set.
type config struct {
	backend string // sqlite or postgres
	dsn     string // empty: a file in a temporary directory, or the local PostgreSQL
	tasks   int
	workers int
	batch   int
	lease   time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.backend, "backend", "sqlite", "database: sqlite or postgres")
	flag.StringVar(&cfg.dsn, "dsn", "", "data source name (default: an SQLite file in a temporary directory, or $CLAIMSTORE_POSTGRES_DSN, else the local PostgreSQL)")
	flag.IntVar(&cfg.tasks, "tasks", 50, "tasks to add before the workers start")
	flag.IntVar(&cfg.workers, "workers", 3, "workers running at once")
	flag.IntVar(&cfg.batch, "batch", 5, "tasks claimed at a time")
	flag.DurationVar(&cfg.lease, "lease", 30*time.Second, "lease of a claimed task: another worker takes it over after this")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal("worker: ", err)
	}
}

// run opens the database, adds cfg.tasks tasks and works until none is
// left; it prints what each worker did to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.dsn == "" {
		switch cfg.backend {
		case "sqlite":
			dir, err := os.MkdirTemp("", "claimstore-worker-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			cfg.dsn = filepath.Join(dir, "tasks.db") // sqlstore.Open gives a path WAL, a busy timeout, BEGIN IMMEDIATE
		case "postgres":
			cfg.dsn = os.Getenv("CLAIMSTORE_POSTGRES_DSN")
			if cfg.dsn == "" {
				cfg.dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
			}
		default:
			return fmt.Errorf("unknown backend %q: use sqlite or postgres", cfg.backend)
		}
	}
	db, err := sqlstore.Open(ctx, cfg.backend, cfg.dsn)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	store, err := sqlstore.New[Thumbnail](db)
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}

	tasks := make([]*Thumbnail, cfg.tasks)
	for i := range tasks {
		tasks[i] = &Thumbnail{Image: fmt.Sprintf("photo-%03d.jpg", i), Status: "ready"}
	}
	if len(tasks) > 0 {
		if err := store.Create(ctx, tasks...); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "added %d tasks on %s\n", len(tasks), cfg.backend)

	var wg sync.WaitGroup
	done := make([]int, cfg.workers)
	errs := make([]error, cfg.workers)
	for i := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[i], errs[i] = work(ctx, store, fmt.Sprintf("worker-%d", i), cfg)
		}()
	}
	wg.Wait()
	for i, n := range done {
		fmt.Fprintf(out, "worker-%d: %d tasks done\n", i, n)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	left, err := store.Count(ctx, dao.In("status", "ready", "running"))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "tasks left: %d\n", left)
	return nil
}

// work claims up to cfg.batch tasks at a time, processes each and marks it
// done, and returns how many it marked when no task is left to claim.
func work(ctx context.Context, store dao.Store[Thumbnail], name string, cfg config) (int, error) {
	done := 0
	for {
		now := time.Now()
		claimed, err := store.Claim(ctx, dao.ClaimRequest{
			// A ready task, or one whose worker let its lease expire.
			Where: dao.Or(dao.Eq("status", "ready"),
				dao.And(dao.Eq("status", "running"), dao.Lt("locked_until", now))),
			Set:     dao.Set{"status": "running", "locked_by": name, "locked_until": now.Add(cfg.lease)},
			Limit:   cfg.batch,
			OrderBy: []dao.Order{dao.Asc("id")},
		})
		// Rows come back even with an error: they are claimed, so process them.
		for _, t := range claimed {
			n, err := finish(ctx, store, name, t)
			if err != nil {
				return done, err
			}
			done += n
		}
		switch {
		case err != nil && dao.IsRetryable(err): // busy or briefly unreachable
			time.Sleep(50 * time.Millisecond)
		case err != nil:
			return done, err
		case len(claimed) == 0:
			// Nothing left. A long-running worker would sleep and poll.
			return done, nil
		}
	}
}

// finish processes t and marks it done, provided name still holds it, and
// returns 1 when it did (0 when the lease had passed to another worker).
func finish(ctx context.Context, store dao.Store[Thumbnail], name string, t Thumbnail) (int, error) {
	thumb := strings.TrimSuffix(t.Image, ".jpg") + "-small.jpg" // the work itself
	mine := dao.And(dao.Eq("id", t.ID), dao.Eq("status", "running"), dao.Eq("locked_by", name))
	for {
		n, err := store.Update(ctx, mine, dao.Set{"status": "done", "thumb": thumb, "locked_until": nil})
		if err != nil && dao.IsRetryable(err) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return int(n), err
	}
}
