package dispatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// cycleJob is the row of the job-cycle benchmark: a job with a due time,
// an attempt count and a lease; the composite index serves the due
// criteria in claim order.
type cycleJob struct {
	ID         int64      `gorm:"primaryKey;autoIncrement:false"`
	Status     string     `gorm:"size:16;not null;index:,composite:due,priority:1"`
	RunAt      time.Time  `gorm:"not null;index:,composite:due,priority:2"`
	Attempts   int64      `gorm:"not null"`
	LeaseOwner string     `gorm:"size:191;not null"`
	LeaseUntil *time.Time `gorm:""`
}

func cycleDue(now time.Time) dao.Criteria {
	return dao.And(dao.Eq("status", "available"), dao.Le("run_at", now))
}

// BenchmarkJobCycle measures on each backend, in one run, the job cycle
// of a dispatch.Worker (claim with a lease, a handler that does nothing,
// the outcome written) beside the claim-only burn-down of the same rows
// with the same claims (one claim loop, as the worker has, claiming 100
// rows at a time, nothing written after): b.N jobs each, on two tables of
// the same shape. The worker runs 200 handlers and claims 100 rows at a
// time. Metrics:
//
//	cycle-jobs/s, claim-rows/s  throughput of each
//	cycle/claim                 the job cycle's throughput relative to the claim-only burn-down
//	cycle-allocs/job            heap allocations per job during the job cycle (runtime.MemStats, whole process)
//	claim-allocs/row            the same during the claim-only burn-down: the difference is the worker's own
//
// Run it with a fixed count, e.g.
//
//	go test ./dispatch -run '^$' -bench JobCycle -benchtime 20000x
func BenchmarkJobCycle(b *testing.B) {
	backends := append([]testdb.Backend{{Name: "memory"}}, testdb.SQLBackends...)
	for _, be := range backends {
		b.Run(be.Name, func(b *testing.B) {
			open := func() dao.Store[cycleJob] {
				if be.Open == nil {
					s, err := memstore.New[cycleJob]()
					if err != nil {
						b.Fatal(err)
					}
					return s
				}
				db := be.Open(b)
				if sqlDB, err := db.DB(); err == nil {
					sqlDB.SetMaxOpenConns(16)
					sqlDB.SetMaxIdleConns(16)
				}
				s, err := sqlstore.New[cycleJob](db, sqlstore.WithTable(testdb.Table(b, db, "cycle")))
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Migrate(context.Background()); err != nil {
					b.Fatal(err)
				}
				return s
			}
			benchJobCycle(b, open(), open())
		})
	}
}

func loadCycleJobs(b *testing.B, s dao.Store[cycleJob], n int) {
	b.Helper()
	runAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	for first := 1; first <= n; first += 500 {
		rows := make([]*cycleJob, 0, 500)
		for i := first; i < first+500 && i <= n; i++ {
			rows = append(rows, &cycleJob{ID: int64(i), Status: "available", RunAt: runAt})
		}
		if err := s.Create(context.Background(), rows...); err != nil {
			b.Fatal(err)
		}
	}
}

func benchJobCycle(b *testing.B, claimStore, cycleStore dao.Store[cycleJob]) {
	ctx := context.Background()
	n := b.N
	loadCycleJobs(b, claimStore, n)
	loadCycleJobs(b, cycleStore, n)
	b.ResetTimer()

	// The claim-only burn-down.
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	var wg sync.WaitGroup
	var claimed atomic.Int64
	for g := range 1 {
		wg.Go(func() {
			for {
				now := time.Now()
				got, err := claimStore.Claim(ctx, dao.ClaimRequest{
					Where:   dao.And(cycleDue(now), dao.Or(dao.IsNull("lease_until"), dao.Le("lease_until", now))),
					Set:     dao.Set{"lease_owner": fmt.Sprintf("g%d", g), "lease_until": now.Add(time.Minute), "attempts": dao.Incr(1)},
					Limit:   100,
					OrderBy: []dao.Order{dao.Asc("run_at")},
				})
				claimed.Add(int64(len(got)))
				if err != nil && !dao.IsRetryable(err) {
					b.Error(err)
					return
				}
				if len(got) == 0 && err == nil {
					return
				}
			}
		})
	}
	wg.Wait()
	claimWall := time.Since(start)
	runtime.ReadMemStats(&m1)
	claimAllocs := m1.Mallocs - m0.Mallocs
	if int(claimed.Load()) != n {
		b.Fatalf("claim-only burn-down claimed %d of %d rows", claimed.Load(), n)
	}

	// The job cycle.
	seen := make([]atomic.Int32, n+1)
	var handled atomic.Int64
	done := make(chan struct{})
	w, err := dispatch.New(dispatch.Config[cycleJob]{
		Store: cycleStore, KeyField: "id", Key: func(j *cycleJob) any { return j.ID },
		Due: cycleDue, OrderBy: []dao.Order{dao.Asc("run_at")},
		ClaimSet: func(time.Time) dao.Set { return dao.Set{"attempts": dao.Incr(1)} },
		Handler: func(_ context.Context, job *dispatch.Job[cycleJob]) dao.Set {
			seen[job.Row.ID].Add(1)
			if handled.Add(1) == int64(n) {
				close(done)
			}
			return dao.Set{"status": "completed"}
		},
		WorkerID: "bench", Concurrency: 200, BatchSize: 100, PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	runtime.ReadMemStats(&m0)
	wctx, stop := context.WithCancel(ctx)
	start = time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(wctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("job cycle: %d of %d jobs handled in 10 minutes", handled.Load(), n)
	}
	stop()
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
	cycleWall := time.Since(start)
	runtime.ReadMemStats(&m1)
	b.StopTimer()
	dup := 0
	for i := 1; i <= n; i++ {
		if c := seen[i].Load(); c != 1 {
			dup++
		}
	}
	if st := w.Stats(); dup != 0 || st.Completed != int64(n) {
		b.Fatalf("job cycle: %d jobs not handled exactly once, %d of %d outcomes written", dup, st.Completed, n)
	}
	b.ReportMetric(float64(n)/cycleWall.Seconds(), "cycle-jobs/s")
	b.ReportMetric(float64(n)/claimWall.Seconds(), "claim-rows/s")
	b.ReportMetric(claimWall.Seconds()/cycleWall.Seconds(), "cycle/claim")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "cycle-allocs/job")
	b.ReportMetric(float64(claimAllocs)/float64(n), "claim-allocs/row")
	b.ReportMetric(0, "ns/op")
}
