package main

import (
	"regexp"
	"testing"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestDemoDispatch runs a shortened dispatch demo on SQLite (worker
// processes are this test binary running the command line, see TestMain)
// and checks its verdict.
func TestDemoDispatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	out, errOut, err := execFresh(t, "demo", "dispatch", "--backend", "sqlite", "--dsn", "", "--log-level", "warn",
		"--duration", "6s", "--once", "200", "--cron", "8", "--quiet")
	if err != nil {
		t.Fatalf("demo dispatch: %v\n%s\n%s", err, out, errOut)
	}
	for _, re := range []string{
		`dispatch demo: 200 once schedules \+ 8 every-second cron schedules for 6s, 3 worker processes, 5% induced failures; backend sqlite`,
		`(?m)^\s+demo-worker-1\s+fires\s+\d+\s+SIGKILL mid-run$`,
		`(?m)^\s+demo-worker-2\s+fires\s+\d+\s+SIGTERM mid-run, drained$`,
		`(?m)^\s+demo-worker-3\s+fires\s+[1-9]\d*\s+ran to the end, drained$`,
		`readyz right after SIGTERM: (503 Service Unavailable|the process exited before it answered again)\n`,
		`due occurrences: \d+ \(200 once, [1-9]\d* cron in the window\)`,
		`duplicates 0 `, `missed 0 \(once 0, cron 0\); once schedules fired in the table: 200 of 200`,
		`failures by ladder step: .*failed for good: 0`, `leases released by the drain: \d+`,
		`lag p50 \S+, p99 \S+`, `verdict: OK`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("demo output does not match %s:\n%s", re, out)
		}
	}
}

// The dispatch demo on a server drops what it created: its schedule
// table and the lease table of its worker processes' leader election.
func TestDemoDispatchLeavesNoTables(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	pg := testdb.Postgres(t) // skips, or fails when required, if the server is down
	tables := func() []string {
		var names []string
		if err := pg.Raw("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND (tablename LIKE 'dispatch\\_demo\\_%' OR tablename = 'claimstore_leaders') ORDER BY 1").Scan(&names).Error; err != nil {
			t.Fatal(err)
		}
		return names
	}
	if left := tables(); len(left) > 0 {
		t.Fatalf("tables before the demo: %v", left)
	}
	out, errOut, err := execFresh(t, "demo", "dispatch", "--backend", "postgres", "--dsn", testdb.PostgresDSN(), "--log-level", "warn",
		"--duration", "5s", "--once", "40", "--cron", "2", "--quiet")
	t.Logf("demo: %v\n%s\n%s", err, out, errOut)
	if left := tables(); len(left) > 0 {
		t.Fatalf("tables left after the demo: %v", left)
	}
}
