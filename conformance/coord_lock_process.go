package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/coord"
)

// LockProcessHarness connects the multi-process try-lock check to one
// backend that several processes can open: a database server, or a
// database file.
type LockProcessHarness struct {
	// Setup prepares what the processes share and returns a target
	// string that Open turns into a locker in every process (for a
	// server, often ""; for a database file, its path). Called in the
	// parent process only; optional.
	Setup func(t *testing.T) (target string)

	// Open returns a try-lock over the database target names. It is called
	// in every child process. Required.
	Open func(t *testing.T, target string) coord.Locker

	// Processes and Attempts size the check: Processes child processes
	// make Attempts attempts each. Zero means 3 processes and 40
	// attempts.
	Processes, Attempts int
}

// Environment variables of the try-lock child processes (the others are
// shared with the stress test).
const (
	envLockKey      = "CLAIMSTORE_CONFORMANCE_LOCK_KEY"
	envLockAttempts = "CLAIMSTORE_CONFORMANCE_LOCK_ATTEMPTS"
)

// RunLockProcesses checks the try-lock's mutual exclusion across
// operating-system processes: the parent runs the test binary again
// Processes times, selecting the calling test with -test.run, and every
// child makes Attempts attempts on one key with coord.WithLock. A holder's
// critical section creates a marker file with O_EXCL, which fails if
// another holder, in any process, is inside; appends "enter" and "exit"
// lines to a shared log; and removes the marker. The parent checks that
// no creation failed, that the log alternates enter and exit of the same
// holder, and that some attempt acquired the lock, and logs the counts.
// It runs by default (no environment variable is needed).
//
// As with [RunStress], the calling test must have a constant name, and
// code before RunLockProcesses runs in the children too.
func RunLockProcesses(t *testing.T, h LockProcessHarness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("conformance: LockProcessHarness.Open is required")
	}
	if name := os.Getenv(envChild); name != "" {
		if name != t.Name() {
			t.Skipf("try-lock child for %s", name)
		}
		lockChild(t, h)
		return
	}
	lockParent(t, h)
}

func lockParent(t *testing.T, h LockProcessHarness) {
	procs, attempts := orDefault(h.Processes, 3), orDefault(h.Attempts, 40)
	target := ""
	if h.Setup != nil {
		target = h.Setup(t)
	}
	dir := t.TempDir()
	key := fmt.Sprintf("conformance/processes/%d", time.Now().UnixNano())
	began, errs, outs := runChildren(t, dir, procs, 5*time.Minute,
		envTarget+"="+target, envLockKey+"="+key, envLockAttempts+"="+strconv.Itoa(attempts))
	for p, err := range errs {
		if err != nil {
			t.Errorf("child %d failed: %v\n%s", p, err, outs[p])
		}
	}
	elapsed := time.Since(began)
	data, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var events []string
	acquired := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Errorf("child: %s", line[1:])
			continue
		}
		if strings.HasPrefix(line, "enter ") {
			acquired++
		}
		events = append(events, line)
	}
	for _, p := range checkAlternation(events) {
		t.Error(p)
	}
	t.Logf("%d processes x %d attempts in %v: %d acquired", procs, attempts, elapsed.Round(time.Millisecond), acquired)
	if acquired == 0 {
		t.Error("no process acquired the lock")
	}
}

func lockChild(t *testing.T, h LockProcessHarness) {
	dir, key := os.Getenv(envDir), os.Getenv(envLockKey)
	p, attempts := envInt(t, envProc), envInt(t, envLockAttempts)
	l := h.Open(t, os.Getenv(envTarget))
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("ready-%d", p)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "start")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("try-lock child: no start signal")
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	record := func(line string) {
		if _, err := logf.WriteString(line + "\n"); err != nil {
			t.Errorf("try-lock child: log: %v", err)
		}
	}
	marker := filepath.Join(dir, "inside")
	acquired := 0
	for i := range attempts {
		who := fmt.Sprintf("p%d.%d", p, i)
		ran, err := coord.WithLock(context.Background(), l, key, func(context.Context, any) error {
			f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				record("!" + who + " entered while another holder was inside: " + err.Error())
				return nil
			}
			f.Close()
			record("enter " + who)
			time.Sleep(2 * time.Millisecond)
			record("exit " + who)
			if err := os.Remove(marker); err != nil {
				record("!" + who + ": remove marker: " + err.Error())
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: WithLock: %v", who, err)
		}
		if ran {
			acquired++
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("process %d: %d of %d attempts acquired", p, acquired, attempts)
}
