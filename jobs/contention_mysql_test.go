package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// contendArgs is the job of TestFastPathContentionMariaDB: Mode 1 fails
// its first attempt, Mode 2 snoozes on its first attempt, Mode 0
// completes at once.
type contendArgs struct {
	Seq  int64 `json:"seq"`
	Mode int   `json:"mode"`
}

func (contendArgs) Kind() string { return "contend" }

// jobRuns counts, per job id, the runs of its work function, how many
// ran at once, and the successful ones.
type jobRuns struct {
	mu        sync.Mutex
	running   map[int64]int
	runs      map[int64]int
	succeeded map[int64]int
	overlaps  []int64 // ids that ran twice at once
}

// start records that job id began a run.
func (r *jobRuns) start(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[id]++
	r.runs[id]++
	if r.running[id] > 1 {
		r.overlaps = append(r.overlaps, id)
	}
}

// end records that job id ended a run, successfully when ok.
func (r *jobRuns) end(id int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[id]--
	if ok {
		r.succeeded[id]++
	}
}

// storeErrors is a slog handler that keeps the warnings and errors of
// the clients' logs.
type storeErrors struct {
	mu   *sync.Mutex
	msgs *[]string
}

func (h storeErrors) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h storeErrors) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	*h.msgs = append(*h.msgs, b.String())
	h.mu.Unlock()
	return nil
}
func (h storeErrors) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h storeErrors) WithGroup(string) slog.Handler      { return h }

// errorHandler keeps the errors of failed attempts.
type errorHandler struct {
	mu   sync.Mutex
	errs []string
}

func (e *errorHandler) HandleError(_ context.Context, _ *jobs.Row, err error) *jobs.ErrorHandlerResult {
	e.mu.Lock()
	e.errs = append(e.errs, err.Error())
	e.mu.Unlock()
	return nil
}

func (e *errorHandler) HandlePanic(context.Context, *jobs.Row, any, string) *jobs.ErrorHandlerResult {
	return nil
}

// deadlockText reports whether s reads like a deadlock or lock-wait
// error of MySQL or MariaDB.
func deadlockText(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "deadlock") || strings.Contains(l, "1213") || strings.Contains(l, "1205") || strings.Contains(l, "lock wait")
}

// TestFastPathContentionMariaDB runs, on MariaDB, four job clients that
// claim on the job table's fast path (each over its own *sql.DB pool,
// each running the scheduler) while jobs are inserted concurrently; one
// job in five fails its first attempt and is retried, one in five
// snoozes once. It checks that every job ran to completion exactly once
// (one successful run, never two runs at once), that none is lost or
// left unfinished, and that no deadlock or lock-wait error reached the
// error handler, the logs or Run; it prints the counts.
func TestFastPathContentionMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("contention run")
	}
	ctx := context.Background()
	setup := testdb.MySQL(t)
	table := testdb.Table(t, setup, "contend_jobs")
	qtable := testdb.Table(t, setup, "contend_queues")
	js, err := sqlstore.New[jobs.Row](setup, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := sqlstore.New[jobs.Queue](setup, sqlstore.WithTable(qtable))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Drop(context.Background(), js, qs) })
	if err := jobs.Migrate(ctx, js, qs); err != nil {
		t.Fatal(err)
	}
	if s := js.Capabilities().Strategy; s != dao.StrategyFastPath {
		t.Fatalf("job store claims with %v, want the fast path", s)
	}

	const clients, preload, inserters, batches, batch = 4, 600, 2, 12, 50
	const total = preload + inserters*batches*batch
	runs := &jobRuns{running: map[int64]int{}, runs: map[int64]int{}, succeeded: map[int64]int{}}
	var logMu sync.Mutex
	var logs []string
	eh := &errorHandler{}
	ws := jobs.NewWorkers()
	err = jobs.AddWorker(ws, jobs.WorkFunc[contendArgs](func(ctx context.Context, j *jobs.Job[contendArgs]) error {
		runs.start(j.ID)
		time.Sleep(time.Duration(j.Args.Seq%3) * time.Millisecond)
		var err error
		switch {
		case j.Args.Mode == 1 && j.Attempt == 1:
			err = errors.New("first attempt fails")
		case j.Args.Mode == 2 && runsOf(runs, j.ID) == 1:
			err = jobs.Snooze(150 * time.Millisecond)
		}
		runs.end(j.ID, err == nil)
		return err
	}), jobs.WithBackoff(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}

	var cs []*jobs.Client
	for i := range clients {
		db := testdb.MySQL(t) // a pool of its own
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.SetMaxOpenConns(8)
			sqlDB.SetMaxIdleConns(8)
		}
		s, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		if st := s.Capabilities().Strategy; st != dao.StrategyFastPath {
			t.Fatalf("client %d's job store claims with %v, want the fast path", i, st)
		}
		q, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(qtable))
		if err != nil {
			t.Fatal(err)
		}
		c, err := jobs.NewClient(jobs.Config{
			Store: s, QueueStore: q, Workers: ws,
			WorkerID:     fmt.Sprintf("contend-%d", i),
			Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 10}},
			PollInterval: 100 * time.Millisecond,
			ErrorHandler: eh,
			Logger:       slog.New(storeErrors{mu: &logMu, msgs: &logs}),
		})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	var seq atomic.Int64
	params := func(n int) []jobs.InsertParams {
		p := make([]jobs.InsertParams, n)
		for i := range p {
			s := seq.Add(1)
			p[i] = jobs.InsertParams{Args: contendArgs{Seq: s, Mode: []int{0, 1, 2, 0, 0}[s%5]}}
		}
		return p
	}
	if _, err := cs[0].InsertMany(ctx, params(preload)); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	rctx, stop := context.WithCancel(ctx)
	runErrs := make(chan error, clients)
	for _, c := range cs {
		go func() { runErrs <- c.Run(rctx) }()
	}
	var inserts sync.WaitGroup
	insertErrs := make(chan error, inserters*batches)
	for i := range inserters {
		inserts.Go(func() {
			c := cs[(i+1)%clients]
			for range batches {
				if _, err := c.InsertMany(ctx, params(batch)); err != nil {
					insertErrs <- err
				}
				time.Sleep(40 * time.Millisecond)
			}
		})
	}
	inserts.Wait()
	close(insertErrs)
	for err := range insertErrs {
		t.Errorf("insert: %v", err)
	}
	deadline := time.Now().Add(25 * time.Second)
	var left int64
	for {
		left, err = js.Count(ctx, dao.Ne(jobs.ColState, string(jobs.StateCompleted)))
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(began)
	stop()
	for range clients {
		if err := <-runErrs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}

	stored, err := js.Count(ctx, dao.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	completed, err := js.Count(ctx, dao.Eq(jobs.ColState, string(jobs.StateCompleted)))
	if err != nil {
		t.Fatal(err)
	}
	runs.mu.Lock()
	defer runs.mu.Unlock()
	var totalRuns, once, twice, more, never int
	for id := int64(1); id <= int64(stored); id++ {
		totalRuns += runs.runs[id]
		switch runs.succeeded[id] {
		case 0:
			never++
		case 1:
			once++
		case 2:
			twice++
		default:
			more++
		}
	}
	t.Logf("%d clients, %d jobs (%d stored, %d completed) in %v: %d runs, %d jobs succeeded once, %d twice, %d more, %d never; %d overlapping runs; %d failed attempts handled; %d warnings and errors logged",
		clients, total, stored, completed, took.Round(time.Millisecond), totalRuns, once, twice, more, never, len(runs.overlaps), len(eh.errs), len(logs))
	if stored != total || completed != total || left != 0 {
		t.Errorf("%d jobs inserted, %d stored, %d completed, %d not completed", total, stored, completed, left)
	}
	if once != total {
		t.Errorf("%d of %d jobs succeeded exactly once (%d twice, %d more, %d never)", once, total, twice, more, never)
	}
	if len(runs.overlaps) > 0 {
		t.Errorf("jobs ran twice at once: %v", runs.overlaps)
	}
	for _, e := range eh.errs {
		if !strings.Contains(e, "first attempt fails") || deadlockText(e) {
			t.Errorf("error handler got %q", e)
		}
	}
	for _, l := range logs {
		if deadlockText(l) {
			t.Errorf("deadlock or lock wait logged: %s", l)
		}
	}
	if t.Failed() {
		for _, l := range logs {
			t.Log("log: " + l)
		}
	}
}

// runsOf returns how many runs job id has begun.
func runsOf(r *jobRuns, id int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}
