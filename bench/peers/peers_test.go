package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// requiredPostgres reports whether CLAIMSTORE_REQUIRE names postgres (or
// all), so that an unreachable server fails instead of skipping.
func requiredPostgres() bool {
	for n := range strings.SplitSeq(os.Getenv("CLAIMSTORE_REQUIRE"), ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n == "postgres" || n == "all" {
			return true
		}
	}
	return false
}

// leftovers returns the tables and schemas a round creates that exist on
// the database: what a finished run must not leave behind.
func leftovers(t *testing.T, ctx context.Context, dsn string) []string {
	t.Helper()
	db, err := openSQL(ctx, dsn, 1, nil)
	if err != nil {
		msg := err.Error() + "; to run these tests start PostgreSQL (make up, or: pg_ctlcluster <version> main start) and create database test, or set CLAIMSTORE_POSTGRES_DSN"
		if requiredPostgres() {
			t.Fatal(msg + " (required by CLAIMSTORE_REQUIRE)")
		}
		t.Skip(msg)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_name LIKE 'peers\_claim\_%' OR table_name LIKE 'watermill\_%peers\_%'
		UNION ALL SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'peers\_river\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestRunBurnsDownEverySystemExactlyOnce runs a 500-row round of every
// system against the local PostgreSQL: each must process every row, job
// and message exactly once, the JSON report must hold every result, and
// nothing the round created may remain.
func TestRunBurnsDownEverySystemExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dsn := envOr("CLAIMSTORE_POSTGRES_DSN", defaultDSN)
	before := leftovers(t, ctx, dsn)

	const rows = 500
	file := filepath.Join(t.TempDir(), "peers.json")
	var out bytes.Buffer
	err := run(ctx, []string{"--dsn", dsn, "--rows", "500", "--workers", "4", "--batch", "25", "--river-max-workers", "4,100", "--jobs-workers", "100", "--timeout", "2m", "--json", file}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.System)
		if r.Rows != rows || r.Done != rows || r.Duplicates != 0 || r.Lost != 0 || !r.Exact() {
			t.Errorf("%s (%d workers): %d rows, %d done, %d duplicates, %d lost", r.System, r.Workers, r.Rows, r.Done, r.Duplicates, r.Lost)
		}
		if r.Wall <= 0 || r.Statements <= 0 {
			t.Errorf("%s: wall %v, %d statements: the timed phase measured nothing", r.System, r.Wall, r.Statements)
		}
	}
	if want := []string{"claimstore", "dispatch", "jobs", "river", "river", "jobs-retry", "river-retry", "river-retry", "watermill-sql", "addmany", "jobs-insert", "river-insert", "outbox-write", "log-write", "watermill-publish"}; !slices.Equal(got, want) {
		t.Errorf("systems %v, want %v", got, want)
	}
	if rep.Machine.Server == "" || rep.Machine.CPUs <= 0 {
		t.Errorf("machine %+v: server version or cores missing", rep.Machine)
	}
	for _, want := range []string{"claimstore", "river", "watermill-sql", "vs claimstore", "load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if after := leftovers(t, ctx, dsn); !slices.Equal(after, before) {
		t.Errorf("tables and schemas left behind: before %v, after %v", before, after)
	}
}

// TestRunDropsWhatItCreatedWhenInterrupted cancels a run while it works
// and checks that its error says so and nothing it created remains.
func TestRunDropsWhatItCreatedWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dsn := envOr("CLAIMSTORE_POSTGRES_DSN", defaultDSN)
	before := leftovers(t, ctx, dsn)
	for _, system := range systems {
		rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := run(rctx, []string{"--dsn", dsn, "--rows", "100000", "--systems", system}, &bytes.Buffer{})
		rcancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: run interrupted after 300ms returned %v, want a deadline error", system, err)
		}
	}
	if after := leftovers(t, ctx, dsn); !slices.Equal(after, before) {
		t.Errorf("tables and schemas left behind: before %v, after %v", before, after)
	}
}

// TestRunRejectsBadFlags checks that bad flags are errors before anything
// is opened.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--rows", "0"},
		{"--workers", "21"},
		{"--pool", "1"},
		{"--systems", "kafka"},
		{"--river-max-workers", "x"},
		{"--dsn", "postgres://127.0.0.1:1/none", "--rows", "-1"},
	} {
		if err := run(t.Context(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestTallyCountsDuplicatesAndLost checks the per-id counter every phase
// is judged by.
func TestTallyCountsDuplicatesAndLost(t *testing.T) {
	tl := newTally(5)
	for _, id := range []int64{1, 2, 2, 4, 5, 5, 5} {
		if !tl.mark(id) {
			t.Fatalf("mark(%d) refused", id)
		}
	}
	if tl.mark(0) || tl.mark(6) {
		t.Error("an id outside 1..5 was counted")
	}
	done, dup, lost := tl.count()
	if done != 4 || dup != 3 || lost != 1 {
		t.Errorf("done %d, duplicates %d, lost %d; want 4, 3, 1", done, dup, lost)
	}
	r := Result{Rows: 5, Done: done, Duplicates: dup, Lost: lost}
	if r.Exact() {
		t.Error("a result with duplicates and lost rows is exact")
	}
	if r := (Result{Rows: 5, Done: 5}); !r.Exact() {
		t.Error("a result with every row once is not exact")
	}
}
