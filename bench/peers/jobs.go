package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// seqArgs is the job the jobs phases run: Seq numbers it 1..Rows. It
// names the same kind as River's noopArgs.
type seqArgs struct {
	Seq int64 `json:"seq"`
}

// Kind returns the job kind.
func (seqArgs) Kind() string { return "peers_noop" }

// errFirstAttempt is the error the retry phases' failing jobs return on
// their first attempt.
var errFirstAttempt = errors.New("peers: this job fails its first attempt")

// failsFirst reports whether job seq fails its first attempt when one job
// in every fails: seq divisible by every (never when every is 0).
func failsFirst(seq int64, every int) bool { return every > 0 && seq%int64(every) == 0 }

// jobTables creates the job and queue tables of a jobs phase with
// jobs.Migrate (the library's table, indexes, fillfactor and trigger, and
// nothing else) and returns their stores and a drop that removes them.
func jobTables(ctx context.Context, dsn string, conns int, c *counter, what string) (*dao.Table[jobs.Row], *dao.Table[jobs.Queue], func(*error), func(), error) {
	db, closeDB, err := openGorm(ctx, dsn, conns, c)
	if err != nil {
		return nil, nil, func(*error) {}, func() {}, err
	}
	name := "peers_jobs_" + suffix()
	js, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(name))
	if err != nil {
		closeDB()
		return nil, nil, func(*error) {}, func() {}, fmt.Errorf("peers: %s: %w", what, err)
	}
	qs, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(name+"_q"))
	if err != nil {
		closeDB()
		return nil, nil, func(*error) {}, func() {}, fmt.Errorf("peers: %s: %w", what, err)
	}
	drop := func(err *error) {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if derr := jobs.Drop(cctx, js, qs); derr != nil {
			*err = errors.Join(*err, fmt.Errorf("peers: %s: %w", what, derr))
		}
	}
	if err := jobs.Migrate(ctx, js, qs); err != nil {
		var e error
		drop(&e)
		closeDB()
		return nil, nil, func(*error) {}, func() {}, errors.Join(fmt.Errorf("peers: %s: %w", what, err), e)
	}
	return js, qs, drop, closeDB, nil
}

// runJobs loads cfg.Rows jobs with Client.InsertMany into a table
// jobs.Migrate made, then times one jobs.Client at its defaults, with one
// queue of cfg.JobsWorkers workers and a pool of cfg.Pool connections,
// from Run until every job is completed (one in failEvery fails its first
// attempt and completes on its retry after the default backoff, about a
// second; 0: none fails). The tables are dropped before it returns.
func runJobs(ctx context.Context, cfg Config, failEvery int) (res Result, err error) {
	system, unit := "jobs", "job claimed (lease), run, marked completed by a jobs.Client on the table jobs.Migrate made"
	if failEvery > 0 {
		system = "jobs-retry"
		unit = fmt.Sprintf("as jobs, one job in %d failing its first attempt (error recorded, retried after the default backoff)", failEvery)
	}
	res = Result{System: system, Unit: unit, Rows: cfg.Rows, Workers: cfg.JobsWorkers}
	var c counter
	setup := startTimer()
	js, qs, drop, closeDB, err := jobTables(ctx, cfg.DSN, cfg.Pool, &c, system)
	defer closeDB()
	defer drop(&err)
	if err != nil {
		return res, err
	}
	t := newTally(cfg.Rows)
	remaining := make(chan struct{}, cfg.Rows)
	ws := jobs.NewWorkers()
	err = jobs.AddWorker(ws, jobs.WorkFunc[seqArgs](func(_ context.Context, j *jobs.Job[seqArgs]) error {
		if j.Attempt == 1 && failsFirst(j.Args.Seq, failEvery) {
			return errFirstAttempt
		}
		t.mark(j.Args.Seq)
		remaining <- struct{}{}
		return nil
	}))
	if err != nil {
		return res, fmt.Errorf("peers: %s: %w", system, err)
	}
	client, err := jobs.NewClient(jobs.Config{
		Store: js, QueueStore: qs, Workers: ws, WorkerID: "peers",
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: cfg.JobsWorkers, BatchSize: cfg.DispatchBatch}},
		Logger: quietLogger(),
	})
	if err != nil {
		return res, fmt.Errorf("peers: %s: %w", system, err)
	}
	const loadBatch = 5000
	for first := 1; first <= cfg.Rows; first += loadBatch {
		n := min(loadBatch, cfg.Rows-first+1)
		params := make([]jobs.InsertParams, n)
		for i := range params {
			params[i] = jobs.InsertParams{Args: seqArgs{Seq: int64(first + i)}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return res, fmt.Errorf("peers: %s: insert: %w", system, err)
		}
	}
	if err := analyze(ctx, js); err != nil {
		return res, fmt.Errorf("peers: %s: analyze: %w", system, err)
	}
	setup.stop(&res)
	res.Setup = res.Wall

	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	wctx, stop := context.WithCancel(tctx)
	defer stop()
	before := c.n.Load()
	timer := startServerTimer(&c)
	done := make(chan error, 1)
	go func() { done <- client.Run(wctx) }()
	for range cfg.Rows {
		select {
		case <-remaining:
		case <-tctx.Done():
		}
		if tctx.Err() != nil {
			break
		}
	}
	// Every job handled; then every outcome written.
	for tctx.Err() == nil {
		n, err := js.Count(tctx, dao.Eq(jobs.ColState, string(jobs.StateCompleted)))
		if err != nil {
			return res, fmt.Errorf("peers: %s: count: %w", system, err)
		}
		if n == int64(cfg.Rows) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	timer.stop(&res)
	stop()
	runErr := <-done
	res.Statements = c.n.Load() - before
	res.Done, res.Duplicates, res.Lost = t.count()
	if err := tctx.Err(); err != nil {
		return res, fmt.Errorf("peers: %s: %d of %d jobs handled: %w", system, res.Done, cfg.Rows, err)
	}
	if runErr != nil {
		return res, fmt.Errorf("peers: %s: %w", system, runErr)
	}
	if failEvery > 0 {
		retried, err := js.Count(ctx, dao.And(dao.Eq(jobs.ColState, string(jobs.StateCompleted)), dao.Eq(jobs.ColAttempt, 2)))
		if err != nil {
			return res, fmt.Errorf("peers: %s: count: %w", system, err)
		}
		if want := int64(cfg.Rows / failEvery); retried != want {
			return res, fmt.Errorf("peers: %s: %d jobs completed on a second attempt, want %d", system, retried, want)
		}
	}
	return res, nil
}

// analyze refreshes the planner's statistics of the store's table, as
// autovacuum would after a bulk load.
func analyze(ctx context.Context, s *dao.Table[jobs.Row]) error {
	var db *gorm.DB
	if !s.As(&db) {
		return errors.New("not a SQL store")
	}
	return db.WithContext(ctx).Exec("ANALYZE ?", clause.Table{Name: s.TableName()}).Error
}

// runJobsInsert times Client.InsertMany writing cfg.Rows jobs,
// insertBatch per call, from one goroutine, into a table jobs.Migrate
// made (its trigger notifies once per statement), then checks the count.
// The tables are dropped before it returns.
func runJobsInsert(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "jobs-insert", Unit: "job inserted by jobs.Client.InsertMany (INSERT of arrays)", Rows: cfg.Rows, Workers: 1}
	var c counter
	js, qs, drop, closeDB, err := jobTables(ctx, cfg.DSN, 2, &c, "jobs-insert")
	defer closeDB()
	defer drop(&err)
	if err != nil {
		return res, err
	}
	client, err := jobs.NewClient(jobs.Config{Store: js, QueueStore: qs, Logger: quietLogger()})
	if err != nil {
		return res, fmt.Errorf("peers: jobs-insert: %w", err)
	}
	params := make([]jobs.InsertParams, cfg.Rows)
	for i := range params {
		params[i] = jobs.InsertParams{Args: seqArgs{Seq: int64(i + 1)}}
	}
	before := c.n.Load()
	timer := startTimer()
	for first := 0; first < cfg.Rows; first += insertBatch {
		out, err := client.InsertMany(ctx, params[first:min(first+insertBatch, cfg.Rows)])
		if err != nil {
			return res, fmt.Errorf("peers: jobs-insert: %w", err)
		}
		res.Done += len(out)
	}
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	stored, err := js.Count(ctx, dao.Criteria{})
	if err != nil {
		return res, fmt.Errorf("peers: jobs-insert: count: %w", err)
	}
	if stored != int64(cfg.Rows) || res.Done != cfg.Rows {
		res.Lost = cfg.Rows - int(stored)
		return res, fmt.Errorf("peers: jobs-insert: %d inserted, %d stored, want %d", res.Done, stored, cfg.Rows)
	}
	return res, nil
}
