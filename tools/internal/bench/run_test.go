package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// checkReport asserts what every run must show: each expected variant
// present, every id of every run claimed exactly once, rows in their
// post-claim state, and a report that renders.
func checkReport(t *testing.T, rep *Report, cfg Config, want ...string) {
	t.Helper()
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Variants) != len(want) {
		t.Fatalf("variants %d, want %v", len(rep.Variants), want)
	}
	for i, name := range want {
		v := rep.Variants[i]
		if v.Name != name {
			t.Fatalf("variant %d is %q, want %q", i, v.Name, name)
		}
		if len(v.Runs) != max(cfg.Repeat, 1) {
			t.Fatalf("%s: %d runs, want %d", name, len(v.Runs), max(cfg.Repeat, 1))
		}
		for _, r := range v.Runs {
			tl := r.Tally
			if tl.Duplicates != 0 || tl.Lost != 0 || tl.Unknown != 0 || tl.Claimed != cfg.Rows || r.RowsClaimed != cfg.Rows || r.WrongState != 0 {
				t.Fatalf("%s: accounting %+v, rows claimed %d, wrong state %d", name, tl, r.RowsClaimed, r.WrongState)
			}
			if r.Calls < (cfg.Rows+int64(cfg.Batch)-1)/int64(cfg.Batch) || r.Latency.N != int(r.Calls) {
				t.Fatalf("%s: %d calls for %d rows in batches of %d, %d latency samples", name, r.Calls, cfg.Rows, cfg.Batch, r.Latency.N)
			}
		}
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"duplicates:      0", "lost:            0", "rows:            "} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("report lacks %q:\n%s", s, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// checkPortableRoundTrips asserts the round trips of a portable-default
// variant: one SELECT per call plus one guarded UPDATE per candidate, so at
// least one per claimed row and at most 1 + batch per call.
func checkPortableRoundTrips(t *testing.T, v *Variant, batch int) {
	t.Helper()
	r := v.Result
	if !r.Counted {
		t.Fatalf("%s: round trips not counted", v.Name)
	}
	if r.RoundTrips < r.Calls+r.RowsClaimed || r.RoundTrips > r.Calls*int64(1+batch) {
		t.Fatalf("%s: %d round trips for %d calls claiming %d rows", v.Name, r.RoundTrips, r.Calls, r.RowsClaimed)
	}
}

func TestRunMemory(t *testing.T) {
	cfg := Config{Backend: "memory", Rows: 1500, Workers: 4, Batch: 40, Repeat: 2, Baseline: true}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, VariantLibrary)
	if rep.Variants[0].Result.Counted || len(rep.Notes) == 0 {
		t.Fatal("memory claims round trips or lacks the baseline note")
	}
}

func TestRunSQLite(t *testing.T) {
	cfg := Config{Backend: "sqlite", Rows: 1200, Workers: 4, Batch: 50, Baseline: true}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, VariantLibrary, VariantRawSQL, VariantNaive)
	if rep.Backend != "sqlite" || !strings.HasPrefix(rep.Server, "SQLite 3.") {
		t.Fatalf("backend %q server %q", rep.Backend, rep.Server)
	}
	// The library's default claim and its raw baseline are one statement
	// per claim call; the naive variant is one per row and one more.
	for _, name := range []string{VariantLibrary, VariantRawSQL} {
		r := rep.Variant(name).Result
		if !r.Counted || r.RoundTrips != r.Calls {
			t.Fatalf("%s: %d statements for %d claim calls, want exactly one per call", name, r.RoundTrips, r.Calls)
		}
	}
	if v := rep.Variant(VariantLibrary); !strings.HasPrefix(v.Path, "fast path") || v.Promised != "1" {
		t.Fatalf("library path %q promised %q", v.Path, v.Promised)
	}
	checkPortableRoundTrips(t, rep.Variant(VariantNaive), cfg.Batch)
}

func TestRunPostgres(t *testing.T) {
	testdb.Postgres(t) // skips unless the server is reachable or required
	cfg := Config{Backend: "postgres", DSN: testdb.PostgresDSN(), Rows: 3000, Workers: 4, Batch: 50, Baseline: true, Portable: true}
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, VariantLibrary, VariantRawPgx, VariantRawSQL, VariantLibraryPortable, VariantNaive)
	// The fast path, the raw pgx statement and the same statement through
	// database/sql are exactly one round trip per claim call.
	for _, name := range []string{VariantLibrary, VariantRawPgx, VariantRawSQL} {
		r := rep.Variant(name).Result
		if !r.Counted || r.RoundTrips != r.Calls {
			t.Fatalf("%s: %d round trips for %d claim calls, want exactly one per call", name, r.RoundTrips, r.Calls)
		}
	}
	if v := rep.Variant(VariantLibrary); !strings.HasPrefix(v.Path, "fast path") || v.Promised != "1" {
		t.Fatalf("library path %q promised %q", v.Path, v.Promised)
	}
	checkPortableRoundTrips(t, rep.Variant(VariantLibraryPortable), cfg.Batch)
	checkPortableRoundTrips(t, rep.Variant(VariantNaive), cfg.Batch)
	if q, ok := rep.Ratio(VariantLibrary); !ok || q <= 0 {
		t.Fatalf("no library/raw ratio: %v %v", q, ok)
	}
	if !strings.Contains(progress.String(), "loaded 3000 rows into bench_lib_") {
		t.Fatalf("progress lacks the load lines: %q", progress.String())
	}
}

func TestRunMySQL(t *testing.T) {
	testdb.MySQL(t)
	cfg := Config{Backend: "mysql", DSN: testdb.MySQLDSN(), Rows: 1500, Workers: 4, Batch: 50, Baseline: true}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, VariantLibrary, VariantRawSQL, VariantNaive, VariantLibraryFast, VariantRawSQLFast)
	if rep.Backend != "mysql" && rep.Backend != "mariadb" {
		t.Fatalf("backend %q", rep.Backend)
	}
	for _, name := range []string{VariantLibrary, VariantRawSQL, VariantNaive} {
		checkPortableRoundTrips(t, rep.Variant(name), cfg.Batch)
	}
	// The opt-in fast path is one transaction: BEGIN, the locking read,
	// the UPDATE and COMMIT, without the UPDATE when nothing was locked.
	// The library's claims, which have a deadline, also read each pool
	// connection's thread id once (SELECT CONNECTION_ID(), for KILL QUERY
	// at the deadline): at most one more round trip per connection, and
	// the workers use one connection each.
	for _, name := range []string{VariantLibraryFast, VariantRawSQLFast} {
		v := rep.Variant(name)
		r := v.Result
		want := 4*(r.Calls-r.EmptyCalls) + 3*r.EmptyCalls
		extra := 0
		if name == VariantLibraryFast {
			extra = cfg.Workers
		}
		exact := r.RoundTrips >= want && r.RoundTrips <= want+int64(extra)
		if !r.Counted || (r.Retries == 0 && !exact) || r.RoundTrips > 4*r.Calls+int64(extra) {
			t.Fatalf("%s: %d round trips for %d calls (%d empty, %d retried), want %d (and at most %d thread-id reads)", name, r.RoundTrips, r.Calls, r.EmptyCalls, r.Retries, want, extra)
		}
		if v.Baseline != VariantRawSQLFast && name == VariantLibraryFast {
			t.Fatalf("%s compared with %q", name, v.Baseline)
		}
	}
	if v := rep.Variant(VariantLibraryFast); !strings.HasPrefix(v.Path, "fast path (opt-in)") || v.Promised != "4" {
		t.Fatalf("library fast path: path %q promised %q", v.Path, v.Promised)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Backend: "sqlite", Rows: 0, Workers: 1, Batch: 1},
		{Backend: "sqlite", Rows: 1, Workers: 0, Batch: 1},
		{Backend: "sqlite", Rows: 1, Workers: 1, Batch: 0},
		{Backend: "oracle", Rows: 1, Workers: 1, Batch: 1},
	} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%+v: got %v, want ErrInvalidArgument", cfg, err)
		}
	}
}

func TestRunStoppedEarlyIsNoted(t *testing.T) {
	// The first progress line after some claims cancels the run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := writerFunc(func(p []byte) (int, error) {
		if line := string(p); strings.Contains(line, "rows claimed") && !strings.Contains(line, " in 0 calls") {
			cancel()
		}
		return len(p), nil
	})
	cfg := Config{Backend: "sqlite", Rows: 5000, Workers: 2, Batch: 5, Progress: stop, ProgressEvery: time.Millisecond}
	rep, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if rep == nil || len(rep.Variants) != 1 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "stopped early") {
		t.Fatalf("report %+v", rep)
	}
	if rep.Variants[0].Result.Tally.Lost == 0 || rep.Err() == nil {
		t.Fatal("an interrupted burn shows no rows left")
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestParseVariants(t *testing.T) {
	got, err := ParseVariants(" naive,library ,naive,,raw")
	if err != nil || !slices.Equal(got, []string{SelectNaive, SelectLibrary, SelectRaw}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"library,slow", "", " , "} {
		_, err := ParseVariants(bad)
		if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), strings.Join(VariantNames(), ", ")) {
			t.Errorf("%q: got %v, want ErrInvalidArgument listing the names", bad, err)
		}
	}
}

func TestRunSQLiteSelectsVariants(t *testing.T) {
	// On SQLite raw and raw-sql are one variant; its fast path is the
	// default (measured by library), so it has no opt-in fast path, and
	// portable measures the portable default.
	cfg := Config{Backend: "sqlite", Rows: 300, Workers: 2, Batch: 20, Variants: []string{SelectNaive, SelectRawSQL, SelectRaw, SelectFast, SelectPortable}}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, VariantRawSQL, VariantLibraryPortable, VariantNaive)
	if !slices.Equal(rep.Selected, []string{SelectRaw, SelectRawSQL, SelectPortable, SelectNaive, SelectFast}) {
		t.Fatalf("selected %v", rep.Selected)
	}
	checkPortableRoundTrips(t, rep.Variant(VariantLibraryPortable), cfg.Batch)
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"fast not measured: sqlite has no opt-in fast path"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if q, ok := rep.Ratio(VariantNaive); !ok || q <= 0 {
		t.Fatalf("naive has no ratio to raw: %v %v", q, ok)
	}

	// The default is the library and its raw baseline.
	cfg = Config{Backend: "sqlite", Rows: 200, Workers: 2, Batch: 20}
	if rep, err = Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, cfg, VariantLibrary, VariantRawSQL)
}

func TestRunRejectsUnknownVariant(t *testing.T) {
	_, err := Run(context.Background(), Config{Backend: "sqlite", Rows: 1, Workers: 1, Batch: 1, Variants: []string{SelectLibrary, "slow"}})
	if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), `"slow"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := Run(context.Background(), Config{Backend: "memory", Rows: 1, Workers: 1, Batch: 1, Variants: []string{SelectNaive}}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("memory without the library: got %v", err)
	}
}

func TestRunSQLiteBudget(t *testing.T) {
	cfg := Config{Backend: "sqlite", Rows: 4000, Workers: 2, Batch: 5, Variants: []string{SelectNaive}, Budget: time.Millisecond}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	res := rep.Variant(VariantNaive).Result
	if !res.Partial || res.Tally.Claimed >= cfg.Rows || res.Tally.Claimed+res.Left != cfg.Rows || res.Tally.Lost != 0 || res.Tally.Duplicates != 0 {
		t.Fatalf("partial %v, claimed %d, left %d, accounting %+v", res.Partial, res.Tally.Claimed, res.Left, res.Tally)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d of %d rows claimed, %d left", res.Tally.Claimed, cfg.Rows, res.Left); !strings.Contains(out.String(), want) {
		t.Fatalf("report lacks %q:\n%s", want, out.String())
	}
}
