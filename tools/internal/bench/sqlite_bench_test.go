package bench

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
)

// BenchmarkSQLiteClaim compares, on SQLite (a database file in a
// temporary directory, opened with sqlstore.SQLiteDSN), three claims of one
// batch of 100 rows, one right after the other in every iteration, each on
// its own table of the same shape loaded with enough rows for b.N claims,
// so drift of the machine hits them alike. The order of the three turns
// with every iteration: a claim that runs right after the portable
// default's 101 statements pays for the garbage collection and the WAL
// checkpoint they started, and with a fixed order that was always the
// same side.
//
//   - fast: Store.Claim with the fast path (sqlstore.WithStrategy(
//     dao.StrategyFastPath)): one UPDATE … WHERE id IN (SELECT … LIMIT n)
//     RETURNING *;
//   - raw: database/sql (github.com/ncruces/go-sqlite3) running the same
//     statement text (dialects.Renderer.Claim), scanning into Job;
//   - portable: Store.Claim with the portable default (one SELECT, then one
//     guarded UPDATE per row).
//
// Metrics:
//
//	fast-µs/claim, raw-µs/claim, portable-µs/claim  mean latency of one claim call
//	fast-rt/claim, raw-rt/claim, portable-rt/claim  statements per call (counting driver hook)
//	fast/raw       raw time / fast-path time: fast-path throughput relative to raw
//	fast/portable  portable time / fast-path time: what the fast path buys
//
// workers=1 runs the calls serially; workers=4 from 4 goroutines, whose
// writes SQLite serializes (a write waiting past the 5 s busy timeout
// would fail the benchmark).
func BenchmarkSQLiteClaim(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchSQLiteClaim(b, workers) })
	}
}

func benchSQLiteClaim(b *testing.B, workers int) {
	ctx := context.Background()
	const batch = 100
	dsn := sqlstore.SQLiteDSN(b.TempDir() + "/bench.db")
	cfg := Config{Backend: "sqlite", DSN: dsn, Rows: int64(b.N+workers) * batch, Workers: workers, Batch: batch}
	s, err := openSQLRun(ctx, cfg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.close) // registered first, so it runs after the tables are dropped
	setup := func(prefix string, build func(context.Context, *table) (runner, error)) runner {
		return benchRunner(ctx, b, s, prefix, build)
	}
	fast := setup("bench_libf", func(ctx context.Context, t *table) (runner, error) {
		return s.libraryRunner(ctx, t, sqlstore.WithStrategy(dao.StrategyFastPath))
	})
	raw := setup("bench_sqlf", func(ctx context.Context, t *table) (runner, error) {
		return s.sqlRunner(ctx, func(db *sql.DB) (ClaimFunc, error) {
			stmts, err := s.claimStatements(t.name)
			if err != nil {
				return nil, err
			}
			return SQLClaim(db, stmts), nil
		})
	})
	portable := setup("bench_libp", func(ctx context.Context, t *table) (runner, error) {
		return s.libraryRunner(ctx, t, sqlstore.WithStrategy(dao.StrategyPortable))
	})

	type side struct {
		r          runner
		ns, rows   atomic.Int64
		roundTrips int64
	}
	sides := []*side{{r: fast}, {r: raw}, {r: portable}}
	claim := func(sd *side, w int) {
		t0 := time.Now()
		got, err := sd.r.Claim(ctx, w, batch)
		sd.ns.Add(int64(time.Since(t0)))
		if err != nil {
			b.Error(err)
		}
		sd.rows.Add(int64(len(got)))
	}
	for _, sd := range sides {
		sd.roundTrips = sd.r.RoundTrips()
	}
	// round runs the three claims of iteration i, starting with side i%3.
	round := func(i, w int) {
		for k := range sides {
			claim(sides[(i+k)%len(sides)], w)
		}
	}
	b.ResetTimer()
	if workers == 1 {
		for i := range b.N {
			round(i, 0)
		}
	} else {
		var next atomic.Int64
		b.SetParallelism((workers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			w := int(next.Add(1)-1) % workers
			for i := w; pb.Next(); i++ {
				round(i, w)
			}
		})
	}
	b.StopTimer()
	n := float64(b.N)
	for i, name := range []string{"fast", "raw", "portable"} {
		sd := sides[i]
		switch got, want := sd.rows.Load(), int64(b.N)*batch; {
		case got > want:
			b.Errorf("%s claimed %d rows in %d calls of %d", name, got, b.N, batch)
		case got < want:
			// Concurrent portable claims read the same candidates and
			// lose some of them to each other.
			b.Logf("%s claimed %d rows in %d calls of %d", name, got, b.N, batch)
		}
		b.ReportMetric(float64(sd.ns.Load())/n/1e3, name+"-µs/claim")
		b.ReportMetric(float64(sd.r.RoundTrips()-sd.roundTrips)/n, name+"-rt/claim")
	}
	b.ReportMetric(float64(sides[1].ns.Load())/float64(sides[0].ns.Load()), "fast/raw")
	b.ReportMetric(float64(sides[2].ns.Load())/float64(sides[0].ns.Load()), "fast/portable")
}

// BenchmarkSQLiteAllocs counts, on SQLite, the heap allocations of
// one claim of 100 rows on each of the three sides of BenchmarkSQLiteClaim
// (fast path, raw statement, portable default), with testing.AllocsPerRun
// over 50 claims per side in one run, after one warm-up claim each.
// Metrics: fast-allocs/claim, raw-allocs/claim, portable-allocs/claim, and
// fast/raw-allocs, the fast path's allocations over the raw statement's.
func BenchmarkSQLiteAllocs(b *testing.B) {
	ctx := context.Background()
	const batch, runs = 100, 50
	dsn := sqlstore.SQLiteDSN(b.TempDir() + "/bench.db")
	calls := int64(b.N) * (runs + 2)
	cfg := Config{Backend: "sqlite", DSN: dsn, Rows: calls * batch, Workers: 1, Batch: batch}
	s, err := openSQLRun(ctx, cfg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.close)
	setup := func(prefix string, build func(context.Context, *table) (runner, error)) runner {
		return benchRunner(ctx, b, s, prefix, build)
	}
	sides := []runner{
		setup("bench_libf", func(ctx context.Context, t *table) (runner, error) {
			return s.libraryRunner(ctx, t, sqlstore.WithStrategy(dao.StrategyFastPath))
		}),
		setup("bench_sqlf", func(ctx context.Context, t *table) (runner, error) {
			return s.sqlRunner(ctx, func(db *sql.DB) (ClaimFunc, error) {
				stmts, err := s.claimStatements(t.name)
				if err != nil {
					return nil, err
				}
				return SQLClaim(db, stmts), nil
			})
		}),
		setup("bench_libp", func(ctx context.Context, t *table) (runner, error) {
			return s.libraryRunner(ctx, t, sqlstore.WithStrategy(dao.StrategyPortable))
		}),
	}
	var allocs [3]float64
	b.ResetTimer()
	for range b.N {
		for i, r := range sides {
			claim := func() {
				if got, err := r.Claim(ctx, 0, batch); err != nil || len(got) != batch {
					b.Fatalf("claim: %d rows, %v", len(got), err)
				}
			}
			claim()
			allocs[i] += testing.AllocsPerRun(runs, claim)
		}
	}
	n := float64(b.N)
	for i, name := range []string{"fast", "raw", "portable"} {
		b.ReportMetric(allocs[i]/n, name+"-allocs/claim")
	}
	b.ReportMetric(allocs[0]/allocs[1], "fast/raw-allocs")
}
