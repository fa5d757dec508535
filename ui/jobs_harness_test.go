package ui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/ui"
)

// flakyArgs is the args of the test jobs: the first Fail attempts fail
// (with an error holding xssScript) or, with Panic, panic (with xssImg).
type flakyArgs struct {
	N     int    `json:"n"`
	Fail  int    `json:"fail,omitempty"`
	Panic bool   `json:"panic,omitempty"`
	Note  string `json:"note,omitempty"`
}

func (flakyArgs) Kind() string { return "ui_flaky" }

// jobEnv is a seeded job table with its queue table, a client that runs
// no queue, and the console's source over it.
type jobEnv struct {
	name          string
	db            *gorm.DB
	table, queueT string
	store         *dao.Table[jobs.Row]
	queues        *dao.Table[jobs.Queue]
	c             *jobs.Client
	source        ui.Source
	// The seeded jobs: discarded (its error holds xssScript, its args
	// and metadata xssImg and xssScript), panicked (discarded, the
	// panic's value xssImg and its trace), completed, scheduled (an hour
	// ahead), mail (available in queue mail, which no client runs).
	discarded, panicked, completed, scheduled, mail int64
}

// jobBackends are the databases the job pages are tested on.
var jobBackends = testdb.SQLBackends

// forEachJobs runs f on a seeded job table of every job backend.
func forEachJobs(t *testing.T, f func(t *testing.T, e *jobEnv)) {
	for _, b := range jobBackends {
		t.Run(b.Name, func(t *testing.T) { f(t, seedJobs(t, b.Name, b.Open(t))) })
	}
}

// seedJobs creates a job table and its queue table on db (dropped at
// cleanup) and fills them by running the jobs listed in jobEnv: a client
// runs queue default until the first three ended, then stops.
func seedJobs(t testing.TB, name string, db *gorm.DB) *jobEnv {
	t.Helper()
	ctx := context.Background()
	e := &jobEnv{name: name, db: db}
	e.table = testdb.Table(t, db, "ui_jobs")
	e.queueT = e.table + "_q"
	var err error
	if e.store, err = sqlstore.New[jobs.Row](db, sqlstore.WithTable(e.table)); err != nil {
		t.Fatal(err)
	}
	if e.queues, err = sqlstore.New[jobs.Queue](db, sqlstore.WithTable(e.queueT)); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, e.store, e.queues); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := jobs.Drop(context.Background(), e.store, e.queues); err != nil {
			t.Errorf("drop job tables: %v", err)
		}
	})
	if e.c, err = jobs.NewClient(jobs.Config{Store: e.store, QueueStore: e.queues}); err != nil {
		t.Fatal(err)
	}
	insert := func(args flakyArgs, opts *jobs.InsertOpts) int64 {
		t.Helper()
		res, err := e.c.Insert(ctx, args, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	e.discarded = insert(flakyArgs{N: 1, Fail: 1, Note: xssImg}, &jobs.InsertOpts{MaxAttempts: 1, Tags: []string{"billing"},
		Metadata: []byte(`{"source":` + fmt.Sprintf("%q", xssScript) + `}`)})
	e.panicked = insert(flakyArgs{N: 2, Fail: 1, Panic: true}, &jobs.InsertOpts{MaxAttempts: 1})
	e.completed = insert(flakyArgs{N: 3}, nil)
	e.scheduled = insert(flakyArgs{N: 4}, &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	e.mail = insert(flakyArgs{N: 5, Note: xssScript}, &jobs.InsertOpts{Queue: "mail", Priority: 2, Tags: []string{"a", "b"}})
	stop := e.run(t)
	e.wait(t, e.discarded, jobs.StateDiscarded)
	e.wait(t, e.panicked, jobs.StateDiscarded)
	e.wait(t, e.completed, jobs.StateCompleted)
	stop()
	if e.source, err = ui.Jobs(e.table, e.c); err != nil {
		t.Fatal(err)
	}
	return e
}

// run starts a client that runs queue default with the flaky worker and
// returns the function that stops it (also called at cleanup).
func (e *jobEnv) run(t testing.TB) (stop func()) {
	t.Helper()
	ws := jobs.NewWorkers()
	err := jobs.AddWorker(ws, jobs.WorkFunc[flakyArgs](func(ctx context.Context, j *jobs.Job[flakyArgs]) error {
		if j.Args.N == 3 {
			if err := jobs.RecordOutput(ctx, map[string]string{"note": xssScript}); err != nil {
				return err
			}
		}
		if j.Attempt > j.Args.Fail {
			return nil
		}
		if j.Args.Panic {
			panic(xssImg)
		}
		return fmt.Errorf("%s attempt %d failed", xssScript, j.Attempt)
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: e.store, QueueStore: e.queues, Workers: ws,
		Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 4}},
		PollInterval: 50 * time.Millisecond, Lease: 5 * time.Second, DrainTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("jobs client: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// wait waits up to 30 s for job id to be in state.
func (e *jobEnv) wait(t testing.TB, id int64, state jobs.State) *jobs.Row {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := e.c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
		if r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after 30 s, want %s (attempt %d, errors %s)", id, r.State, state, r.Attempt, r.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get returns job id, read through the client.
func (e *jobEnv) get(t testing.TB, id int64) *jobs.Row {
	t.Helper()
	r, err := e.c.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("job %d: %v", id, err)
	}
	return r
}

// gone reports whether job id no longer exists.
func (e *jobEnv) gone(t testing.TB, id int64) bool {
	t.Helper()
	_, err := e.c.Get(context.Background(), id)
	if err != nil && !errors.Is(err, dao.ErrNotFound) {
		t.Fatalf("job %d: %v", id, err)
	}
	return err != nil
}

// hold makes job id running: a lease held by owner for an hour, as a
// worker's claim leaves it.
func (e *jobEnv) hold(t testing.TB, id int64, owner string) {
	t.Helper()
	n, err := e.store.Update(context.Background(), dao.Eq(jobs.ColID, id),
		dao.Set{jobs.ColLeaseOwner: owner, jobs.ColLeaseUntil: time.Now().UTC().Add(time.Hour), jobs.ColAttempt: 1, jobs.ColAttemptedAt: time.Now().UTC()})
	if err != nil || n != 1 {
		t.Fatalf("hold job %d: %d, %v", id, n, err)
	}
}

// paused reports whether queue name is paused in the queue table.
func (e *jobEnv) paused(t testing.TB, name string) bool {
	t.Helper()
	qs, err := e.c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q.Paused
		}
	}
	return false
}

// serve starts the console over e's job table with cfg.
func (e *jobEnv) serve(t testing.TB, cfg ui.Config) *httptest.Server {
	t.Helper()
	cfg.Sources = []ui.Source{e.source}
	return serveConsole(t, cfg)
}
