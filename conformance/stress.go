package conformance

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// EnvStress is the environment variable that turns the stress mode on
// ("1"). Without it [RunStress] skips.
const EnvStress = "CLAIMSTORE_STRESS"

// Environment variables by which a stress parent tells the child processes
// (the same test binary, run again) what to do.
const (
	envChild   = "CLAIMSTORE_CONFORMANCE_CHILD" // the test name the child runs
	envTarget  = "CLAIMSTORE_CONFORMANCE_TARGET"
	envDir     = "CLAIMSTORE_CONFORMANCE_DIR"
	envProc    = "CLAIMSTORE_CONFORMANCE_PROC"
	envWorkers = "CLAIMSTORE_CONFORMANCE_WORKERS"
	envBatch   = "CLAIMSTORE_CONFORMANCE_BATCH"
)

// StressHarness connects the multi-process stress test to one backend that
// several processes can open: a database server, or a database file.
type StressHarness struct {
	// Setup creates an empty table for [Job] and returns a target: a
	// string that Open, in this process and in the child processes, turns
	// into a store over that table (a table name; for a database file, the
	// path and the table name). Setup removes the table when t finishes.
	// Called in the parent process only. Required.
	Setup func(t *testing.T) (target string)

	// Open returns a store over the table target names. It is called in
	// every process; it must not create or drop anything. Required.
	Open func(t *testing.T, target string) dao.Store[Job]

	// Nodes, optional, are other ways into the same database (for a
	// cluster whose every node takes writes, one per node other than
	// Open's): each returns a store over the table target names through
	// its node, creating and dropping nothing. Child process p opens its
	// store with Open when p modulo len(Nodes)+1 is 0, with Nodes[that-1]
	// otherwise, so that the processes claim through every node.
	Nodes []func(t *testing.T, target string) dao.Store[Job]

	// Processes, Workers, Rows and Batch size the test: Processes child
	// processes with Workers claiming goroutines each claim Rows rows,
	// Batch per claim. Zero means the environment variable
	// CLAIMSTORE_STRESS_PROCESSES, CLAIMSTORE_STRESS_WORKERS,
	// CLAIMSTORE_STRESS_ROWS or CLAIMSTORE_STRESS_BATCH when it holds a
	// positive integer, else 3 processes, 8 workers, 100,000 rows and
	// batches of 100.
	Processes, Workers, Rows, Batch int
}

// RunStress runs the no-double-claim check across operating-system
// processes when CLAIMSTORE_STRESS=1, and skips otherwise. The parent seeds
// the rows, then runs the test binary again Processes times, selecting the
// calling test with -test.run; each child runs Workers goroutines that
// claim Batch rows at a time until no eligible row is left and writes the
// ids it received to files. The parent checks that the received sets are
// disjoint, that their union is every row, and that each row's final state
// names the worker that received it, and logs the throughput.
//
// The calling test must be a top-level test or a subtest whose name does not
// depend on anything but constants, so that the child selects it again; the
// child process runs the same function and RunStress takes the child role
// there, so code before RunStress in the test runs in the children too.
func RunStress(t *testing.T, h StressHarness) {
	t.Helper()
	if h.Setup == nil || h.Open == nil {
		t.Fatal("conformance: StressHarness.Setup and Open are required")
	}
	if name := os.Getenv(envChild); name != "" {
		if name != t.Name() {
			t.Skipf("stress child for %s", name)
		}
		stressChild(t, h)
		return
	}
	if os.Getenv(EnvStress) != "1" {
		t.Skipf("stress mode is off; set %s=1 to run it", EnvStress)
	}
	stressParent(t, h)
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// envSize returns the positive integer in CLAIMSTORE_STRESS_<name>, or def.
func envSize(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(EnvStress + "_" + name)); err == nil && v > 0 {
		return v
	}
	return def
}

// runPattern returns a -test.run pattern that selects exactly the test
// named name (with its parents).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func stressParent(t *testing.T, h StressHarness) {
	procs, workers := orDefault(h.Processes, envSize("PROCESSES", 3)), orDefault(h.Workers, envSize("WORKERS", 8))
	rows, batch := orDefault(h.Rows, envSize("ROWS", 100000)), orDefault(h.Batch, envSize("BATCH", 100))
	if d, ok := t.Deadline(); ok && time.Until(d) < 20*time.Minute {
		t.Logf("stress: the test binary stops in %v; a slow backend may need more (go test -timeout 30m)", time.Until(d).Round(time.Second))
	}
	target := h.Setup(t)
	s := h.Open(t, target)
	began := time.Now()
	seeded := seed(t, s, rows, func(i int, j *Job) { j.Priority = (i * 7919) % 13 })
	t.Logf("stress: seeded %d rows in %v", rows, time.Since(began).Round(time.Millisecond))

	dir := t.TempDir()
	claimStart, errs, outs := runChildren(t, dir, procs, 30*time.Minute,
		envTarget+"="+target, envWorkers+"="+strconv.Itoa(workers), envBatch+"="+strconv.Itoa(batch))
	elapsed := time.Since(claimStart)
	for p, err := range errs {
		if err != nil {
			t.Errorf("stress: child %d failed: %v\n%s", p, err, outs[p])
		}
	}

	var results []workerResult
	var calls, empty, retries int
	for p := range procs {
		for w := range workers {
			r := readResult(t, dir, p, w)
			calls, empty, retries = calls+r.Calls, empty+r.Empty, retries+r.Retries
			results = append(results, r)
		}
	}
	t.Logf("stress: %d processes x %d workers claimed %d rows in batches of %d in %v: %.0f rows/s, %d claims (%.0f claims/s), %d empty while rows were left, %d retried",
		procs, workers, rows, batch, elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds(), calls, float64(calls)/elapsed.Seconds(), empty, retries)
	for _, p := range checkNoDoubleClaim(ids(seeded), results, snapshot(t, s)) {
		t.Error(p)
	}
}

// waitFile waits up to two minutes for path to exist, and reports whether
// it does; it gives up early when exited is closed.
func waitFile(path string, exited <-chan struct{}) bool {
	deadline := time.After(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		select {
		case <-exited:
			_, err := os.Stat(path)
			return err == nil
		case <-deadline:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func resultPath(dir string, p, w int) string {
	return filepath.Join(dir, fmt.Sprintf("result-%d-%d", p, w))
}

func workerName(p, w int) string { return fmt.Sprintf("p%d-w%d", p, w) }

// writeResult stores r as text: a header line "calls empty retries", then
// one received id per line, then problems prefixed with "!".
func writeResult(path string, r workerResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d\n", r.Calls, r.Empty, r.Retries)
	for _, id := range r.IDs {
		fmt.Fprintf(&b, "%d\n", id)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "!%s\n", strings.ReplaceAll(p, "\n", " "))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func readResult(t *testing.T, dir string, p, w int) workerResult {
	t.Helper()
	r := workerResult{Worker: workerName(p, w)}
	f, err := os.Open(resultPath(dir, p, w))
	if err != nil {
		t.Errorf("stress: result of %s: %v", r.Worker, err)
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d", &r.Calls, &r.Empty, &r.Retries); err != nil {
			t.Errorf("stress: result of %s: header %q: %v", r.Worker, sc.Text(), err)
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "!") {
			t.Errorf("stress: %s", line[1:])
			continue
		}
		id, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Errorf("stress: result of %s: line %q: %v", r.Worker, line, err)
			continue
		}
		r.IDs = append(r.IDs, id)
	}
	if err := sc.Err(); err != nil {
		t.Errorf("stress: result of %s: %v", r.Worker, err)
	}
	return r
}

func envInt(t *testing.T, name string) int {
	t.Helper()
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		t.Fatalf("stress child: %s: %v", name, err)
	}
	return v
}

func stressChild(t *testing.T, h StressHarness) {
	dir, target := os.Getenv(envDir), os.Getenv(envTarget)
	p, workers, batch := envInt(t, envProc), envInt(t, envWorkers), envInt(t, envBatch)
	s := h.Open
	if k := p % (len(h.Nodes) + 1); k > 0 {
		s = h.Nodes[k-1]
	}
	store := s(t, target)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("ready-%d", p)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "start")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stress child: no start signal")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := claimUntilEmpty(ctx, store, workerName(p, w), func(int) int { return batch })
			if err := writeResult(resultPath(dir, p, w), r); err != nil {
				t.Errorf("stress child: %v", err)
			}
		}()
	}
	wg.Wait()
}
