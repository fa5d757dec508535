package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// BenchmarkClaim compares, on PostgreSQL, the library's Store.Claim (fast
// path, run with pgx on the connection of the GORM handle's database/sql
// pool) with pgx running the same statement
// text, in one benchmark: every iteration claims one batch of 100 rows
// with each, one right after the other, on two tables of the same shape
// loaded with enough rows for b.N claims, so drift of the server or the
// machine hits both alike. Metrics:
//
//	lib-µs/claim, raw-µs/claim  mean latency of one claim call
//	lib-rt/claim, raw-rt/claim  round trips per call (pgx tracers: roundtrip's, QueryCounter)
//	lib/raw                     raw time / library time = library throughput relative to raw
//
// workers=1 runs the calls serially; workers=8 from 8 goroutines.
// CLAIMSTORE_POSTGRES_DSN selects the server; add synchronous_commit=off to
// it to take the commit flush out of both sides.
func BenchmarkClaim(b *testing.B) {
	testdb.Postgres(b)
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchClaim(b, workers) })
	}
}

func benchClaim(b *testing.B, workers int) {
	ctx := context.Background()
	const batch = 100
	cfg := Config{
		Backend: "postgres", DSN: testdb.PostgresDSN(),
		Rows: int64(b.N+workers) * batch, Workers: workers, Batch: batch,
	}
	s, err := openSQLRun(ctx, cfg, cfg.DSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.close) // registered first, so it runs after the tables are dropped
	setup := func(prefix string, build func(context.Context, *table) (runner, error)) runner {
		return benchRunner(ctx, b, s, prefix, build)
	}
	lib := setup("bench_lib", func(ctx context.Context, t *table) (runner, error) { return s.libraryRunner(ctx, t) })
	raw := setup("bench_pgx", s.pgxRunner)

	var libNs, rawNs, libRows, rawRows atomic.Int64
	claim := func(r runner, w int, ns, rows *atomic.Int64) {
		t0 := time.Now()
		got, err := r.Claim(ctx, w, batch)
		ns.Add(int64(time.Since(t0)))
		if err != nil {
			b.Error(err)
		}
		rows.Add(int64(len(got)))
	}
	libRT0, rawRT0 := lib.RoundTrips(), raw.RoundTrips()
	b.ResetTimer()
	if workers == 1 {
		for range b.N {
			claim(lib, 0, &libNs, &libRows)
			claim(raw, 0, &rawNs, &rawRows)
		}
	} else {
		var next atomic.Int64
		b.SetParallelism((workers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			w := int(next.Add(1)-1) % workers
			for pb.Next() {
				claim(lib, w, &libNs, &libRows)
				claim(raw, w, &rawNs, &rawRows)
			}
		})
	}
	b.StopTimer()
	n := float64(b.N)
	if libRows.Load() != rawRows.Load() {
		b.Logf("rows claimed differ: library %d, raw %d", libRows.Load(), rawRows.Load())
	}
	b.ReportMetric(float64(libNs.Load())/n/1e3, "lib-µs/claim")
	b.ReportMetric(float64(rawNs.Load())/n/1e3, "raw-µs/claim")
	b.ReportMetric(float64(lib.RoundTrips()-libRT0)/n, "lib-rt/claim")
	b.ReportMetric(float64(raw.RoundTrips()-rawRT0)/n, "raw-rt/claim")
	b.ReportMetric(float64(rawNs.Load())/float64(libNs.Load()), "lib/raw")
}

// benchRunner creates a fresh table of the run s with prefix, dropped when
// b ends, and returns the runner build makes over it, released when b
// ends. A failure fails b.
func benchRunner(ctx context.Context, b *testing.B, s *sqlRun, prefix string, build func(context.Context, *table) (runner, error)) runner {
	b.Helper()
	t, err := s.prepare(ctx, prefix)
	b.Cleanup(func() {
		if err := s.drop(t); err != nil {
			b.Error(err)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	r, err := build(ctx, t)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Release)
	return r
}
