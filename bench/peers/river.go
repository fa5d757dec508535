package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the job River runs: Seq numbers it 1..Rows.
type noopArgs struct {
	Seq int64 `json:"seq"`
}

// Kind returns the job kind River stores and dispatches on.
func (noopArgs) Kind() string { return "peers_noop" }

// noopWorker does nothing but count which job it ran; with failEvery > 0
// one job in failEvery fails its first attempt.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	t         *tally
	failEvery int
}

// Work records the job and returns nil, so River marks it completed, or
// fails the first attempt of one job in failEvery.
func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	if job.Attempt == 1 && failsFirst(job.Args.Seq, w.failEvery) {
		return errFirstAttempt
	}
	w.t.mark(job.Args.Seq)
	return nil
}

// runRiver migrates River's tables into a fresh schema, inserts cfg.Rows
// jobs (InsertManyFast, COPY), then times a client with cfg.Workers
// maxWorkers (MaxWorkers, which is also the most jobs one fetch takes) from Start until the last job's completion event.
// The schema is dropped before it returns.
func runRiver(ctx context.Context, cfg Config, maxWorkers, failEvery int) (res Result, err error) {
	res = Result{System: "river", Unit: "job fetched (state running), run, marked completed", Rows: cfg.Rows, Workers: maxWorkers}
	if failEvery > 0 {
		res.System = "river-retry"
		res.Unit = fmt.Sprintf("as river, one job in %d failing its first attempt (error recorded, retried after the default backoff)", failEvery)
	}
	var c counter
	pool, err := openPool(ctx, cfg.DSN, cfg.Pool, &c)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	setup := startTimer()
	schema, driver, drop, err := riverSchema(ctx, pool, "river")
	defer drop(&err)
	if err != nil {
		return res, err
	}
	quiet := quietLogger()

	t := newTally(cfg.Rows)
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{t: t, failEvery: failEvery})
	client, err := river.NewClient(driver, &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     cfg.RiverFetchCooldown,
		FetchPollInterval: max(cfg.RiverFetchCooldown, 100*time.Millisecond),
		Logger:            quiet,
	})
	if err != nil {
		return res, fmt.Errorf("peers: river: client: %w", err)
	}
	const insertBatch = 5000
	for first := 1; first <= cfg.Rows; first += insertBatch {
		n := min(insertBatch, cfg.Rows-first+1)
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{Seq: int64(first + i)}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return res, fmt.Errorf("peers: river: insert: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "river_job"}.Sanitize()); err != nil {
		return res, fmt.Errorf("peers: river: analyze: %w", err)
	}
	setup.stop(&res)
	res.Setup = res.Wall

	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: cfg.Rows + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer unsubscribe()
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	before := c.n.Load()
	timer := startServerTimer(&c)
	if err := client.Start(tctx); err != nil {
		return res, fmt.Errorf("peers: river: start: %w", err)
	}
	completed, failed := 0, 0
	want := cfg.Rows
	if failEvery > 0 {
		want += cfg.Rows / failEvery // a failed attempt is an event too
	}
	for completed+failed < want && err == nil {
		select {
		case ev := <-events:
			if ev.Kind == river.EventKindJobCompleted {
				completed++
			} else {
				failed++
			}
		case <-tctx.Done():
			err = fmt.Errorf("peers: river: %d of %d jobs completed: %w", completed, cfg.Rows, tctx.Err())
		}
	}
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	sctx, scancel := cleanupContext(ctx)
	defer scancel()
	if serr := client.Stop(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("peers: river: stop: %w", serr))
	}
	res.Done, res.Duplicates, res.Lost = t.count()
	if err != nil {
		return res, err
	}
	wantFailed := 0
	if failEvery > 0 {
		wantFailed = cfg.Rows / failEvery
	}
	if failed != wantFailed || completed != cfg.Rows {
		return res, fmt.Errorf("peers: river: %d jobs completed, %d attempts failed; want %d and %d", completed, failed, cfg.Rows, wantFailed)
	}
	var inTable int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "river_job"}.Sanitize()+" WHERE state = 'completed'").Scan(&inTable); err != nil {
		return res, fmt.Errorf("peers: river: count: %w", err)
	}
	if inTable != cfg.Rows {
		return res, fmt.Errorf("peers: river: %d jobs completed in the table, want %d", inTable, cfg.Rows)
	}
	return res, nil
}

// quietLogger returns a logger that drops everything.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// riverSchema creates a fresh schema on pool, runs River's migrations in
// it and returns its name and River's driver; drop drops the schema (also
// after ctx was cancelled), joining a failure into *err. what names the
// phase in errors.
func riverSchema(ctx context.Context, pool *pgxpool.Pool, what string) (schema string, driver *riverpgxv5.Driver, drop func(err *error), err error) {
	schema = "peers_river_" + suffix()
	drop = func(err *error) {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, derr := pool.Exec(cctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); derr != nil {
			*err = errors.Join(*err, fmt.Errorf("peers: drop schema %s: %w", schema, derr))
		}
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return schema, nil, drop, fmt.Errorf("peers: %s: %w", what, err)
	}
	driver = riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quietLogger()})
	if err != nil {
		return schema, nil, drop, fmt.Errorf("peers: %s: migrator: %w", what, err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return schema, nil, drop, fmt.Errorf("peers: %s: migrate: %w", what, err)
	}
	return schema, driver, drop, nil
}
