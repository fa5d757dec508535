package cli

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
	// A once schedule at a local time of a zone, as the console's form
	// takes it (dispatch.ParseSpec reads both).
	if out := run("schedule", "add", "tokyo", "--at", "2031-05-06T07:08", "--tz", "Asia/Tokyo"); !strings.Contains(out, "2031-05-05T22:08:00Z") {
		t.Fatalf("add once at a local time: %q", out)
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
		{"schedule", "add", "k", "--at", "2030-01-02T03:04:05Z", "--tz", "Europe/Berlin"},
		{"schedule", "add", "k", "--in", "1h", "--tz", "Europe/Berlin"},
		{"schedule", "add", "k", "--max-failures", "0"},
		{"schedule", "add", strings.Repeat("k", 192)},
		{"schedule", "list", "--status", "done"},
		{"schedule", "list", "--limit", "0"},
		{"schedule", "pause", "k", "--table", "bad;name"},
		{"dispatch", "run", "--lease", "1s", "--poll-interval", "1s"},
		{"dispatch", "run", "--lease", "1s", "--tick", "1s"}, // the deprecated alias sets --poll-interval
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
	out, errOut, err := execCLI(ctx, "dispatch", "run", "--backend", "sqlite", "--dsn", path, "--http", addr,
		"--poll-interval", "50ms", "--lease", "1s", "--worker-id", "cli-1", "--log-level", "warn")
	if err != nil {
		t.Fatalf("dispatch run: %v\n%s", err, errOut)
	}
	if code := <-ready; code != http.StatusOK {
		t.Fatalf("/readyz and /livez never answered 200")
	}
	var types []string
	var fire Event
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e Event
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
