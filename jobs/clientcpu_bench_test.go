//go:build unix

package jobs_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// BenchmarkClientCPU measures, on PostgreSQL, what a jobs.Client costs
// its own process per job: b.N jobs loaded (not timed), then one client
// with a queue of 1000 workers (claims of 500) running a no-op work
// function until every job is completed, the table analyzed after the
// load as a table in service is. It reports the rate and, over
// the cycle, the process's CPU time (user and system, getrusage) and heap
// allocations (runtime.MemStats) per job:
//
//	go test -run '^$' -bench ClientCPU -benchtime 20000x ./jobs/
func BenchmarkClientCPU(b *testing.B) {
	db := testdb.Postgres(b)
	sizeBenchPool(b, "postgres", db)
	js, qs := benchStores(b, db)
	var done atomic.Int64
	n := int64(b.N)
	all := make(chan struct{})
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[benchArgs](func(context.Context, *jobs.Job[benchArgs]) error {
		if done.Add(1) == n {
			close(all)
		}
		return nil
	})); err != nil {
		b.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: js, QueueStore: qs, Workers: ws,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 1000}}})
	if err != nil {
		b.Fatal(err)
	}
	insertJobs(b, c, 1, b.N)
	analyzeTable(b, db, js.TableName())
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := processCPU(b)
	b.ResetTimer()
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	<-all
	waitCompleted(b, js, n)
	took := time.Since(began)
	cpu := processCPU(b) - cpu0
	runtime.ReadMemStats(&m1)
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/took.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/job")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(n), "allocs/job")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n), "B/job")
	b.ReportMetric(0, "ns/op")
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
