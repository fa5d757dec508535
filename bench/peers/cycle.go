package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// cycleJob is a user's own table of the dispatch phase: what River's job
// row holds for the cycle (state, run time, attempts) and a lease (owner
// and end) instead of River's attempted_by and state running, with the
// index a user declares for the claim, (status, run_at, id). The jobs
// phase runs on the table the library owns and tunes.
type cycleJob struct {
	ID         int64      `gorm:"primaryKey;autoIncrement:false;index:,composite:due,priority:3"`
	Status     string     `gorm:"size:16;not null;index:,composite:due,priority:1"`
	RunAt      time.Time  `gorm:"not null;index:,composite:due,priority:2"`
	Attempts   int64      `gorm:"not null;default:0"`
	LeaseOwner string     `gorm:"size:191;not null;default:''"`
	LeaseUntil *time.Time `gorm:""`
}

// runDispatch loads cfg.Rows available jobs into a fresh table made by
// the store's Migrate from the model, then times one dispatch.Worker (cfg.Concurrency
// handlers, claims of cfg.DispatchBatch) claiming, running (a handler that
// only counts the job) and completing them until every job is completed.
// The table is dropped before it returns.
func runDispatch(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "dispatch", Unit: "job claimed (lease), run, marked completed by a dispatch.Worker on a user's table (index (status, run_at, id))", Rows: cfg.Rows, Workers: cfg.Concurrency}
	var c counter
	db, closeDB, err := openGorm(ctx, cfg.DSN, cfg.Pool, &c)
	if err != nil {
		return res, err
	}
	defer closeDB()
	name := "peers_cycle_" + suffix()
	store, err := sqlstore.New[cycleJob](db, sqlstore.WithTable(name))
	if err != nil {
		return res, fmt.Errorf("peers: dispatch: %w", err)
	}
	defer dropTable(ctx, db, name, &err)

	setup := startTimer()
	if err := store.Migrate(ctx); err != nil {
		return res, fmt.Errorf("peers: dispatch: %w", err)
	}
	runAt := time.Now().Add(-time.Minute).UTC()
	const loadBatch = 1000
	for first := 1; first <= cfg.Rows; first += loadBatch {
		n := min(loadBatch, cfg.Rows-first+1)
		rows := make([]cycleJob, n)
		ptrs := make([]*cycleJob, n)
		for i := range rows {
			rows[i] = cycleJob{ID: int64(first + i), Status: "available", RunAt: runAt}
			ptrs[i] = &rows[i]
		}
		if err := store.Create(ctx, ptrs...); err != nil {
			return res, fmt.Errorf("peers: dispatch: load: %w", err)
		}
	}
	if err := db.WithContext(ctx).Exec(`ANALYZE ` + strconv.Quote(name)).Error; err != nil {
		return res, fmt.Errorf("peers: dispatch: analyze: %w", err)
	}
	setup.stop(&res)
	res.Setup = res.Wall

	t := newTally(cfg.Rows)
	remaining := make(chan struct{}, cfg.Rows)
	w, err := dispatch.New(dispatch.Config[cycleJob]{
		Store:    store,
		KeyField: "id",
		Key:      func(j *cycleJob) any { return j.ID },
		Due: func(now time.Time) dao.Criteria {
			return dao.And(dao.Eq("status", "available"), dao.Le("run_at", now))
		},
		OrderBy:  []dao.Order{dao.Asc("run_at")},
		ClaimSet: func(time.Time) dao.Set { return dao.Set{"attempts": dao.Incr(1)} },
		Handler: func(_ context.Context, job *dispatch.Job[cycleJob]) dao.Set {
			t.mark(job.Row.ID)
			remaining <- struct{}{}
			return dao.Set{"status": "completed"}
		},
		WorkerID:     "peers",
		Concurrency:  cfg.Concurrency,
		BatchSize:    cfg.DispatchBatch,
		PollInterval: 100 * time.Millisecond,
		Logger:       quietLogger(),
	})
	if err != nil {
		return res, fmt.Errorf("peers: dispatch: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	wctx, stop := context.WithCancel(tctx)
	defer stop()
	before := c.n.Load()
	timer := startServerTimer(&c)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	// Every job handled, then every outcome written: the worker stops
	// once the table holds no job that is not completed.
	for range cfg.Rows {
		select {
		case <-remaining:
		case <-tctx.Done():
		}
		if tctx.Err() != nil {
			break
		}
	}
	stop()
	runErr := <-done
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	res.Done, res.Duplicates, res.Lost = t.count()
	if err := tctx.Err(); err != nil {
		return res, fmt.Errorf("peers: dispatch: %d of %d jobs handled: %w", res.Done, cfg.Rows, err)
	}
	if runErr != nil {
		return res, fmt.Errorf("peers: dispatch: %w", runErr)
	}
	if st := w.Stats(); st.Completed != int64(cfg.Rows) {
		return res, fmt.Errorf("peers: dispatch: %d outcomes written, want %d (stats %+v)", st.Completed, cfg.Rows, st)
	}
	completed, err := store.Count(ctx, dao.Eq("status", "completed"))
	if err != nil {
		return res, fmt.Errorf("peers: dispatch: count: %w", err)
	}
	if completed != int64(cfg.Rows) {
		return res, fmt.Errorf("peers: dispatch: %d jobs completed in the table, want %d", completed, cfg.Rows)
	}
	return res, nil
}
