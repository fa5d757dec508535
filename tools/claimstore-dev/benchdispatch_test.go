package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/tools/internal/bench/dispatchbench"
)

// benchDispatchCLI runs a command tree of its own (newRoot), every flag at
// its default, stopped after timeout.
func benchDispatchCLI(t *testing.T, timeout time.Duration, args ...string) (string, string, error) {
	t.Helper()
	return clitest.RunFresh(t, newRoot(), timeout, args...)
}

// TestBenchDispatchSQLite runs the dispatch benchmark small on an SQLite
// file (the worker processes are this test binary running the command
// line, see TestMain) and checks the verdict lines, the JSON report and
// that the table is gone afterwards.
func TestBenchDispatchSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	dir := t.TempDir()
	file, jsonFile := filepath.Join(dir, "bench.db"), filepath.Join(dir, "bench.json")
	out, errOut, err := benchDispatchCLI(t, 3*time.Minute, "bench", "dispatch", "--backend", "sqlite", "--dsn", file,
		"--schedules", "2000", "--processes", "2", "--concurrency", "16", "--json", jsonFile, "--quiet")
	if err != nil {
		t.Fatalf("bench dispatch: %v\n%s\n%s", err, out, errOut)
	}
	for _, re := range []string{
		`bench dispatch: 2000 once schedules due at once, 2 worker processes x 16 fires at once \(claims of up to 8, poll interval 100ms, lease 30s\); table dispatch_bench_[0-9a-f]{8}\n`,
		`machine:     \d+ CPU cores, \S+/\S+, go\S+`,
		`backend:     sqlite \(SQLite 3\.\d+\.\d+\)`,
		`seeded:      2000 schedules in `,
		`(?m)^  bench-worker-1\s+fires\s+\d+  claimed \d+, outcomes \d+, leases lost 0, write errors 0$`,
		`(?m)^  bench-worker-2\s+fires\s+\d+  claimed \d+, outcomes \d+, leases lost 0, write errors 0$`,
		`fired:       2000 of 2000 in \S+: \d+ fires/s\n`,
		`fire lag:    p50 \S+, p99 \S+, max \S+ \(claim time - next_fire_at, over 2000 fires\)`,
		`(?m)^duplicates 0$`, `(?m)^missed 0 \(fired in the table: 2000 of 2000\)$`,
		`verdict: OK: every schedule fired exactly once`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", re, out)
		}
	}
	var j dispatchbench.JSONReport
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, b)
	}
	if j.Schema != 1 || j.Backend != "sqlite" || j.Parameters.Schedules != 2000 || j.Parameters.Processes != 2 ||
		j.Distinct != 2000 || j.Duplicates != 0 || j.Missed != 0 || j.TableFired != 2000 || j.Partial ||
		j.FiresPerSec <= 0 || j.LagP99Seconds < j.LagP50Seconds || len(j.FiresPerProcess) != 2 ||
		j.FiresPerProcess[0]+j.FiresPerProcess[1] != 2000 {
		t.Errorf("JSON report: %+v", j)
	}
	db, err := sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(file))
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	tables, err := db.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tables {
		if strings.HasPrefix(n, dispatchbench.TablePrefix) {
			t.Errorf("table %s left behind", n)
		}
	}
}

// Bad flags and backends are refused before any database is opened: the
// DSNs point where nothing answers, and no SQLite file appears.
func TestBenchDispatchRejectsBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "none.db")
	pg := "postgres://nobody@127.0.0.1:1/none?connect_timeout=20"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dsn", pg, "--schedules", "0"}, "--schedules must be >= 1, got 0"},
		{[]string{"--dsn", pg, "--processes", "0"}, "--processes must be >= 1, got 0"},
		{[]string{"--dsn", pg, "--concurrency", "-1"}, "--concurrency must be >= 1, got -1"},
		{[]string{"--dsn", pg, "--batch", "-1"}, "--batch must be >= 0, got -1"},
		{[]string{"--dsn", pg, "--poll-interval", "0s"}, "--poll-interval must be > 0s, got 0s"},
		{[]string{"--dsn", pg, "--poll-interval", "1s", "--lease", "1s"}, "--lease must be >= 2s, got 1s"},
		{[]string{"--dsn", pg, "--load-batch", "0"}, "--load-batch must be >= 1, got 0"},
		{[]string{"--dsn", pg, "--budget", "-1s"}, "--budget must be >= 0s, got -1s"},
		{[]string{"--backend", "sqlite", "--dsn", file, "--schedules", "0"}, "--schedules must be >= 1"},
		{[]string{"--backend", "memory"}, "--backend memory lives inside one process"},
		{[]string{"--backend", "oracle", "--dsn", file}, `--backend "oracle": want postgres, mysql, mariadb or sqlite`},
	} {
		start := time.Now()
		out, _, err := benchDispatchCLI(t, time.Minute, append([]string{"bench", "dispatch", "--quiet"}, tc.args...)...)
		if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(cli.ErrorText(err), tc.want) {
			t.Errorf("%v: got %v, want an invalid argument containing %q", tc.args, err, tc.want)
		}
		if out != "" || time.Since(start) > 5*time.Second {
			t.Errorf("%v: printed %q, took %v: something ran before the check", tc.args, out, time.Since(start))
		}
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the SQLite file was created: %v", err)
	}
}
