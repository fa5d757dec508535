package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/demo"
	"github.com/claimstore/claimstore/internal/testdb"
)

// TestScheduleCommands: add (idempotent, upsert), list, pause, resume and
// delete on an SQLite file.
func TestScheduleCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db := []string{"--backend", "sqlite", "--dsn", path}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := execFresh(t, append(args, db...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
		return out
	}
	if out := run("schedule", "add", "reminder", "--at", "2030-01-02T03:04:05Z", "--payload", "invoice 42"); !strings.HasPrefix(out, "added: reminder") {
		t.Fatalf("add: %q", out)
	}
	if out := run("schedule", "add", "reminder", "--at", "2031-01-01T00:00:00Z"); !strings.HasPrefix(out, "exists: reminder") || !strings.Contains(out, "2030-01-02T03:04:05Z") {
		t.Fatalf("second add changed the schedule: %q", out)
	}
	if out := run("schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--max-failures", "3"); !strings.Contains(out, "0 3 * * * (Europe/Berlin)") {
		t.Fatalf("add cron: %q", out)
	}
	run("schedule", "pause", "nightly")
	out := run("schedule", "list")
	for _, re := range []string{`(?m)^KEY\s+KIND`, `(?m)^nightly\s+cron\s+0 3 \* \* \* \(Europe/Berlin\)\s+paused\s+\S+\s+0/3`, `(?m)^reminder\s+once\s+-\s+active\s+2030-01-02T03:04:05Z\s+0/5`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("list does not match %s:\n%s", re, out)
		}
	}
	if out := run("schedule", "list", "--status", "paused"); strings.Contains(out, "reminder") || !strings.Contains(out, "nightly") {
		t.Errorf("list --status paused:\n%s", out)
	}
	run("schedule", "resume", "nightly")
	if out := run("schedule", "add", "reminder", "--at", "2031-01-01T00:00:00Z", "--upsert"); !strings.HasPrefix(out, "upserted: reminder") || !strings.Contains(out, "2031-01-01T00:00:00Z") {
		t.Fatalf("upsert: %q", out)
	}
	run("schedule", "delete", "reminder")
	if out := run("schedule", "list"); strings.Contains(out, "reminder") || !regexp.MustCompile(`(?m)^nightly\s+cron.*active`).MatchString(out) {
		t.Errorf("after delete and resume:\n%s", out)
	}
	if _, _, err := execFresh(t, append([]string{"schedule", "delete", "reminder"}, db...)...); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("delete of a missing schedule: %v", err)
	}
}

// Bad flags fail with ErrInvalidArgument before the database is touched:
// the SQLite file is not even created.
func TestScheduleBadFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"schedule", "add", "k", "--cron", "not a cron"},
		{"schedule", "add", "k", "--cron", "* * * * *", "--at", "2030-01-02T03:04:05Z"},
		{"schedule", "add", "k", "--at", "tomorrow"},
		{"schedule", "add", "k", "--tz", "Europe/Berlin"},
		{"schedule", "add", "k", "--max-failures", "0"},
		{"schedule", "add", strings.Repeat("k", 192)},
		{"schedule", "list", "--status", "done"},
		{"schedule", "list", "--limit", "0"},
		{"schedule", "pause", "k", "--table", "bad;name"},
		{"dispatch", "run", "--lease", "1s", "--tick", "1s"},
		{"dispatch", "run", "--fail-rate", "2"},
		{"dispatch", "run", "--misfire", "later"},
	} {
		_, _, err := execFresh(t, append(args, "--backend", "sqlite", "--dsn", path)...)
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: err %v, want ErrInvalidArgument", args, err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database file was created by a refused command: %v", err)
	}
	if _, _, err := execFresh(t, "schedule", "pause", "k", "--backend", "sqlite", "--dsn", path); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("pause on a missing SQLite file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pause created the database file: %v", err)
	}
	if _, _, err := execFresh(t, "schedule", "list", "--backend", "memory"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("memory backend: %v", err)
	}
	if _, _, err := execFresh(t, "schedule", "list", "--backend", "sqlite", "--dsn", ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("sqlite without --dsn: %v", err)
	}
}

// TestDispatchRun: `dispatch run` fires a due schedule, writes its line,
// answers /readyz and /livez, and drains on cancel.
func TestDispatchRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	if _, errOut, err := execFresh(t, "schedule", "add", "now", "--payload", "p", "--backend", "sqlite", "--dsn", path); err != nil {
		t.Fatalf("add: %v\n%s", err, errOut)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan int, 1)
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if r, err := http.Get("http://" + addr + "/readyz"); err == nil {
				r.Body.Close()
				live, lerr := http.Get("http://" + addr + "/livez")
				if lerr == nil {
					live.Body.Close()
				}
				if r.StatusCode == http.StatusOK && lerr == nil && live.StatusCode == http.StatusOK {
					ready <- r.StatusCode
					time.Sleep(500 * time.Millisecond) // time to fire
					cancel()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		ready <- 0
		cancel()
	}()
	cliMu.Lock()
	resetFlags(rootCmd)
	cliMu.Unlock()
	t.Cleanup(func() { cliMu.Lock(); resetFlags(rootCmd); cliMu.Unlock() })
	out, errOut, err := execCLI(ctx, "dispatch", "run", "--backend", "sqlite", "--dsn", path, "--http", addr,
		"--tick", "50ms", "--lease", "1s", "--worker-id", "cli-1", "--log-level", "warn")
	if err != nil {
		t.Fatalf("dispatch run: %v\n%s", err, errOut)
	}
	if code := <-ready; code != http.StatusOK {
		t.Fatalf("/readyz and /livez never answered 200")
	}
	var types []string
	var fire demo.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e demo.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, e.Type)
		if e.Type == "fire" {
			fire = e
		}
	}
	if strings.Join(types, ",") != "start,fire,stop" {
		t.Fatalf("lines %v, want start, fire, stop:\n%s", types, out)
	}
	if fire.Key != "now" || !fire.OK || fire.Payload != "p" || fire.Worker != "cli-1" || fire.Attempt != 1 || fire.Lag < 0 {
		t.Fatalf("fire line %+v", fire)
	}
	out, _, err = execFresh(t, "schedule", "list", "--status", string(dispatch.StatusFired), "--backend", "sqlite", "--dsn", path)
	if err != nil || !strings.Contains(out, "now") {
		t.Fatalf("schedule not fired in the table: %v\n%s", err, out)
	}
}

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
