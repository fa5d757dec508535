package jobs_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// benchArgs is the job of the benchmarks: Seq numbers it.
type benchArgs struct {
	Seq int64 `json:"seq"`
	// Part is the partition of the limited job cycle (Seq % partitions).
	Part int64 `json:"part,omitempty"`
}

func (benchArgs) Kind() string { return "bench" }

// benchStores opens migrated job and queue tables of db, removed when b
// ends; an iteration that made its own removes them with dropStores as it
// ends, so that an interrupted run leaves at most one iteration's tables.
func benchStores(b *testing.B, db *gorm.DB) (*dao.Table[jobs.Row], *dao.Table[jobs.Queue]) {
	b.Helper()
	base := testdb.Table(b, db, "bench_jobs")
	js, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(base))
	if err != nil {
		b.Fatal(err)
	}
	qs, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(base+"_q"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = jobs.Drop(context.Background(), js, qs) })
	if err := jobs.Migrate(context.Background(), js, qs); err != nil {
		b.Fatal(err)
	}
	return js, qs
}

// dropStores removes the tables of benchStores at once.
func dropStores(b *testing.B, js *dao.Table[jobs.Row], qs *dao.Table[jobs.Queue]) {
	b.Helper()
	if err := jobs.Drop(context.Background(), js, qs); err != nil {
		b.Fatal(err)
	}
}

// insertJobs inserts n jobs numbered from first.
func insertJobs(b *testing.B, c *jobs.Client, first, n int) {
	b.Helper()
	insertParted(b, c, first, n, 0)
}

// insertParted inserts n jobs numbered from first, job seq in partition
// seq % parts (no partition when parts is 0).
func insertParted(b *testing.B, c *jobs.Client, first, n, parts int) {
	b.Helper()
	for i := 0; i < n; i += 5000 {
		params := make([]jobs.InsertParams, min(5000, n-i))
		for k := range params {
			a := benchArgs{Seq: int64(first + i + k)}
			if parts > 0 {
				a.Part = a.Seq % int64(parts)
			}
			params[k] = jobs.InsertParams{Args: a}
		}
		if _, err := c.InsertMany(context.Background(), params); err != nil {
			b.Fatal(err)
		}
	}
}

// sizeBenchPool gives db's pool the open connections of a pool from
// sqlstore.Open on SQLite, sqlstore.OpenSQLiteConns; on the servers 16,
// for the client's claim, outcome writers, renewals and maintenance at
// once.
func sizeBenchPool(b *testing.B, backend string, db *gorm.DB) {
	b.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	if backend == "sqlite" {
		sqlDB.SetMaxOpenConns(sqlstore.OpenSQLiteConns)
		return
	}
	sqlDB.SetMaxOpenConns(16)
}

// cycleJobs is the number of jobs of one job-cycle iteration.
const cycleJobs = 20000

// BenchmarkJobCycle measures, on SQLite, PostgreSQL and MariaDB, the job
// cycle of a jobs.Client at its defaults (one queue of 100 workers, claims
// of at most 50, half of them, a no-op work function, every job completed)
// next to the claim
// burn-down of the same table on the same backend (8 claimers taking 100
// jobs a claim with the queue's criteria and lease until none is left),
// each over cycleJobs jobs per iteration, and reports both rates and their
// ratio (jobs/claim-rows):
//
//	go test -run '^$' -bench JobCycle -benchtime 3x ./jobs/
func BenchmarkJobCycle(b *testing.B) {
	for _, be := range testdb.SQLBackends {
		b.Run(be.Name, func(b *testing.B) {
			db := be.Open(b)
			sizeBenchPool(b, be.Name, db)
			var claimRate, jobRate []float64
			for i := 0; b.Loop(); i++ {
				claimRate = append(claimRate, burnDown(b, db))
				jobRate = append(jobRate, jobCycle(b, db, jobs.QueueConfig{}, 0))
			}
			c, j := median(claimRate), median(jobRate)
			b.ReportMetric(c, "claim-rows/s")
			b.ReportMetric(j, "jobs/s")
			b.ReportMetric(j/c, "jobs/claim")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// burnDown loads cycleJobs jobs and times 8 claimers taking them, 100 a
// claim, until none is left; it returns claimed rows per second.
func burnDown(b *testing.B, db *gorm.DB) float64 {
	b.Helper()
	b.StopTimer()
	js, qs := benchStores(b, db)
	defer dropStores(b, js, qs)
	c, err := jobs.NewClient(jobs.Config{Store: js, QueueStore: qs})
	if err != nil {
		b.Fatal(err)
	}
	insertJobs(b, c, 1, cycleJobs)
	b.StartTimer()
	began := time.Now()
	var claimed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for claimed.Load() < cycleJobs {
				now := time.Now().UTC()
				rows, err := js.Claim(context.Background(), dao.ClaimRequest{
					Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, jobs.DefaultQueue),
						dao.Le(jobs.ColScheduledAt, now), dao.LtField(jobs.ColAttempt, jobs.ColMaxAttempts), dao.IsNull(jobs.ColCancelRequestedAt),
						dao.Or(dao.IsNull(jobs.ColLeaseUntil), dao.Le(jobs.ColLeaseUntil, now))),
					Set:     dao.Set{jobs.ColAttempt: dao.Incr(1), jobs.ColAttemptedAt: now, jobs.ColLeaseOwner: fmt.Sprintf("burn-%d", w), jobs.ColLeaseUntil: now.Add(time.Minute)},
					Limit:   100,
					OrderBy: []dao.Order{dao.Asc(jobs.ColPriority), dao.Asc(jobs.ColScheduledAt), dao.Asc(jobs.ColID)},
				})
				if err != nil && !dao.IsRetryable(err) {
					b.Error(err)
					return
				}
				claimed.Add(int64(len(rows)))
			}
		})
	}
	wg.Wait()
	return float64(claimed.Load()) / time.Since(began).Seconds()
}

// benchAnalyze makes jobCycle refresh the job table's statistics after
// loading it (ANALYZE), as a table in service has them: without them
// PostgreSQL's planner takes the fetch index for statements that name a
// queue and a few ids (a limited claim's claim by id), stepping over the
// whole backlog.
var benchAnalyze = flag.Bool("bench.analyze", false, "jobCycle: ANALYZE the job table after loading it")

// jobCycle loads cycleJobs jobs (in parts partitions) and times a client
// at its defaults but for qc running them until every one is completed;
// it returns jobs per second.
func jobCycle(b *testing.B, db *gorm.DB, qc jobs.QueueConfig, parts int) float64 {
	b.Helper()
	b.StopTimer()
	js, qs := benchStores(b, db)
	defer dropStores(b, js, qs)
	var done atomic.Int64
	all := make(chan struct{})
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[benchArgs](func(context.Context, *jobs.Job[benchArgs]) error {
		if done.Add(1) == cycleJobs {
			close(all)
		}
		return nil
	})); err != nil {
		b.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: js, QueueStore: qs, Workers: ws, Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: qc}})
	if err != nil {
		b.Fatal(err)
	}
	insertParted(b, c, 1, cycleJobs, parts)
	if *benchAnalyze {
		analyzeTable(b, db, js.TableName())
	}
	b.StartTimer()
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	<-all
	waitCompleted(b, js, cycleJobs)
	rate := float64(cycleJobs) / time.Since(began).Seconds()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return rate
}

// BenchmarkJobCycleLimited measures, on SQLite, PostgreSQL and MariaDB,
// the job cycle of BenchmarkJobCycle (cycleJobs jobs, one client at its
// defaults) on an unlimited queue, on a queue with a global limit of
// 1000 running (jobs.Limit{Max: 1000}) and on one with 100 partitions of
// limit 10 (jobs.Limit{Max: 10, ByArgs: []string{"part"}}), in the same
// run, and reports the rates and the ratios of the limited ones to the
// unlimited one. Neither limit is reached by the client's 100 workers:
// it is the limited claim's cost. With -bench.analyze each job table is
// analyzed after loading, as a table in service is:
//
//	go test -run '^$' -bench JobCycleLimited -benchtime 3x ./jobs/ -args -bench.analyze
func BenchmarkJobCycleLimited(b *testing.B) {
	for _, be := range testdb.SQLBackends {
		b.Run(be.Name, func(b *testing.B) {
			db := be.Open(b)
			sizeBenchPool(b, be.Name, db)
			var free, global, parted []float64
			for b.Loop() {
				free = append(free, jobCycle(b, db, jobs.QueueConfig{}, 100))
				global = append(global, jobCycle(b, db, jobs.QueueConfig{Limit: &jobs.Limit{Max: 1000}}, 100))
				parted = append(parted, jobCycle(b, db, jobs.QueueConfig{Limit: &jobs.Limit{Max: 10, ByArgs: []string{"part"}}}, 100))
			}
			f, g, p := median(free), median(global), median(parted)
			b.ReportMetric(f, "unlimited-jobs/s")
			b.ReportMetric(g, "global-jobs/s")
			b.ReportMetric(p, "parted-jobs/s")
			b.ReportMetric(g/f, "global/unlimited")
			b.ReportMetric(p/f, "parted/unlimited")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkInsertToStart measures, on SQLite, PostgreSQL and MariaDB, the
// time from an insert to the start of the job's work on an idle queue,
// when another client over a connection pool of its own (another process,
// as far as the running client can tell) inserts it: on PostgreSQL the
// insert trigger's notification wakes the queue; elsewhere the change
// signal read every poll interval (25 ms) does. Both clients run at the
// library's defaults. It reports the median, the 90th and 99th
// percentiles (the 99th is the largest below 100 iterations) and the
// largest in milliseconds:
//
//	go test -run '^$' -bench InsertToStart -benchtime 20x ./jobs/
func BenchmarkInsertToStart(b *testing.B) {
	for _, be := range testdb.SQLBackends {
		b.Run(be.Name, func(b *testing.B) {
			db := be.Open(b)
			js, qs := benchStores(b, db)
			started := make(chan time.Time, 1)
			ws := jobs.NewWorkers()
			if err := jobs.AddWorker(ws, jobs.WorkFunc[benchArgs](func(context.Context, *jobs.Job[benchArgs]) error {
				started <- time.Now()
				return nil
			})); err != nil {
				b.Fatal(err)
			}
			runner, err := jobs.NewClient(jobs.Config{Store: js, QueueStore: qs, Workers: ws, Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}}})
			if err != nil {
				b.Fatal(err)
			}
			ojs, err := sqlstore.New[jobs.Row](testdb.Reopen(b, db), sqlstore.WithTable(js.TableName()))
			if err != nil {
				b.Fatal(err)
			}
			inserter, err := jobs.NewClient(jobs.Config{Store: ojs})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- runner.Run(ctx) }()
			time.Sleep(500 * time.Millisecond) // let it listen
			var lat []float64
			for i := 0; b.Loop(); i++ {
				sent := time.Now()
				if _, err := inserter.Insert(context.Background(), benchArgs{Seq: int64(i)}, nil); err != nil {
					b.Fatal(err)
				}
				at := <-started
				lat = append(lat, float64(at.Sub(sent).Microseconds())/1000)
				// Idle again: the next insert comes to a queue
				// that waits, at a random point of the poll
				// interval (a fixed pause of two intervals would
				// put every insert just after a read of the
				// signal, the worst case, as independent inserts
				// do not).
				time.Sleep(50*time.Millisecond + rand.N(50*time.Millisecond))
			}
			cancel()
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			b.ReportMetric(lat[len(lat)/2], "p50-ms")
			b.ReportMetric(lat[len(lat)*9/10], "p90-ms")
			b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
			b.ReportMetric(lat[len(lat)-1], "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// analyzeTable gathers the planner's statistics of table (ANALYZE, on
// MySQL and MariaDB ANALYZE TABLE), as autovacuum or a DBA does for a
// table in service.
func analyzeTable(b *testing.B, db *gorm.DB, table string) {
	b.Helper()
	stmt := "ANALYZE ?"
	if db.Dialector.Name() == "mysql" {
		stmt = "ANALYZE TABLE ?"
	}
	if err := db.Exec(stmt, clause.Table{Name: table}).Error; err != nil {
		b.Fatal(err)
	}
}

// waitCompleted returns once n jobs of js are completed: every job has
// started before it is called, and their outcome writes may still be in
// flight.
func waitCompleted(b *testing.B, js dao.Store[jobs.Row], n int64) {
	b.Helper()
	for {
		k, err := js.Count(context.Background(), dao.Eq(jobs.ColState, string(jobs.StateCompleted)))
		if err != nil {
			b.Fatal(err)
		}
		if k == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
