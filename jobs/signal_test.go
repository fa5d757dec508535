package jobs_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// signalStores returns the job and queue stores of tables base and
// base_q on db.
func signalStores(t *testing.T, db *gorm.DB, base string) (*dao.Table[jobs.Row], *dao.Table[jobs.Queue]) {
	t.Helper()
	js, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(base))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(base+"_q"))
	if err != nil {
		t.Fatal(err)
	}
	return js, qs
}

// A job inserted through another connection pool (as by another process)
// starts on a client whose tick is an hour, on every SQL backend:
// PostgreSQL's notification or the change signal of the others wakes the
// queue that got it, also when the client runs several queues; with
// SignalInterval negative the signal is off (MySQL/MariaDB, SQLite).
func TestWakeAcrossPools(t *testing.T) {
	for _, be := range testdb.SQLBackends {
		t.Run(be.Name, func(t *testing.T) {
			db := be.Open(t)
			base := testdb.Table(t, db, "signal_jobs")
			js, qs := signalStores(t, db, base)
			t.Cleanup(func() { _ = jobs.Drop(context.Background(), js, qs) })
			if err := jobs.Migrate(context.Background(), js, qs); err != nil {
				t.Fatal(err)
			}
			other := testdb.Reopen(t, db)
			ojs, oqs := signalStores(t, other, base)
			inserter, err := jobs.NewClient(jobs.Config{Store: ojs, QueueStore: oqs})
			if err != nil {
				t.Fatal(err)
			}
			// Another process's estimate of the database's clock may run
			// ahead of the runner's: its job, inserted to run now, is
			// claimed at once all the same.
			ahead, err := jobs.NewClient(jobs.Config{Store: ojs, QueueStore: oqs, Now: func() time.Time { return time.Now().Add(5 * time.Second) }})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name     string
				queues   []string
				into     string
				poll     time.Duration
				inserter *jobs.Client
			}{
				{"one queue", []string{jobs.DefaultQueue}, jobs.DefaultQueue, 0, inserter},
				{"the second of two queues", []string{"a", "b"}, "b", 0, inserter},
				{"an inserter whose clock runs 5 s ahead", []string{"ahead"}, "ahead", 0, ahead},
				{"signal off", []string{"off"}, "off", -1, inserter},
			} {
				if tc.poll < 0 && be.Name == "postgres" {
					continue // notified: no signal to turn off
				}
				started := make(chan time.Time, 1)
				ws := jobs.NewWorkers()
				if err := jobs.AddWorker(ws, jobs.WorkFunc[benchArgs](func(context.Context, *jobs.Job[benchArgs]) error {
					started <- time.Now()
					return nil
				})); err != nil {
					t.Fatal(err)
				}
				queues := map[string]jobs.QueueConfig{}
				for _, q := range tc.queues {
					queues[q] = jobs.QueueConfig{MaxWorkers: 2}
				}
				runner, err := jobs.NewClient(jobs.Config{
					Store: js, QueueStore: qs, Workers: ws, Queues: queues,
					PollInterval: time.Hour, Lease: 3 * time.Hour, SignalInterval: tc.poll,
				})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- runner.Run(ctx) }()
				time.Sleep(time.Second) // the queues' first claims are done: idle
				sent := time.Now()
				if _, err := tc.inserter.Insert(context.Background(), benchArgs{Seq: 1}, &jobs.InsertOpts{Queue: tc.into}); err != nil {
					t.Fatal(err)
				}
				wait := 30 * time.Second
				if tc.inserter == ahead {
					wait = 2 * time.Second // well before the inserter's clock says now
				}
				if tc.poll < 0 {
					wait = 2 * time.Second
				}
				select {
				case at := <-started:
					if tc.poll < 0 {
						t.Errorf("%s: started %v after the insert with the signal off and a tick of an hour", tc.name, at.Sub(sent).Round(time.Millisecond))
					} else {
						t.Logf("%s: started %v after the insert through another pool", tc.name, at.Sub(sent).Round(time.Millisecond))
					}
				case <-time.After(wait):
					if tc.poll >= 0 {
						t.Errorf("%s: the job inserted through another pool did not start within %v (tick 1 h)", tc.name, wait)
					}
				}
				cancel()
				if err := <-ran; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
