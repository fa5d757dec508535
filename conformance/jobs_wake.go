package conformance

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/claimstore/claimstore/jobs"
)

// The wake check's settings: its running clients tick once an hour, so
// that a job they start within wakeWait was woken, not found at a tick;
// their lease is long enough for that tick (dispatch allows a tick of at
// most 3/8 of the lease).
const (
	wakeTick  = time.Hour
	wakeLease = 3 * time.Hour
	wakeWait  = 30 * time.Second
	// wakeIdle is how long the check lets a client that just started
	// run its first claims before it inserts, so that the job comes to
	// an idle queue.
	wakeIdle = time.Second
	// roleSleeper is the child role of the wake check: a worker whose
	// client ticks once an hour.
	roleSleeper = "sleeper"
)

// testJobWake checks that a job inserted elsewhere starts without waiting
// for the tick of the client that runs it: inserted through another
// client of this process over the same stores (every backend), and, with
// Setup and Open, inserted by this process while another process runs
// the queue.
func testJobWake(t *testing.T, h JobsHarness) {
	if slices.Contains(h.Skip, CheckJobsWake) {
		t.Skipf("JobsHarness.Skip names %q", CheckJobsWake)
	}
	t.Run("OtherClient", func(t *testing.T) {
		st := h.NewStores(t)
		c := startJobs(t, st, func(cfg *jobs.Config, _ *jobs.Workers) {
			cfg.PollInterval, cfg.Lease = wakeTick, wakeLease
		})
		inserter := newJobClient(t, h.spread(t, st)[1%(len(h.Nodes)+1)])
		time.Sleep(wakeIdle)
		sent := time.Now()
		j := insert(t, inserter, NoteArgs{N: 1, Text: "wake"}, nil)
		waitJob(t, c.Client, j.ID, wakeWait, "completed (the running client ticks once an hour)", inState(jobs.StateCompleted))
		t.Logf("inserted through another client, completed within %v", time.Since(sent).Round(time.Millisecond))
	})
	t.Run("OtherProcess", func(t *testing.T) {
		target, st, parent := processTables(t, h)
		if !parent {
			return
		}
		c := newJobClient(t, st)
		dir := t.TempDir()
		child := startJobsChild(t, dir, target, "sleeper", roleSleeper, 0)
		ready := filepath.Join(dir, "ready-sleeper")
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			select {
			case <-child.done:
				t.Fatalf("child exited early (%v): %s", child.err, child.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the child was not ready within a minute: %s", child.out.String())
			}
		}
		sent := time.Now()
		j := insert(t, c, procArgs{N: 1}, nil)
		got := waitJobOrChild(t, c, j.ID, child)
		t.Logf("inserted by this process, completed by another within %v (state %s)", time.Since(sent).Round(time.Millisecond), got.State)
		child.stop(t)
		if ran := child.ran(t); len(ran) != 1 || ran[0] != j.ID {
			t.Errorf("the child ran %v; want job %d once", ran, j.ID)
		}
	})
}

// waitJobOrChild waits up to wakeWait for job id to complete, failing t
// with the child's output when it does not or the child exits.
func waitJobOrChild(t *testing.T, c *jobs.Client, id int64, child *jobsChildProc) *jobs.Row {
	t.Helper()
	deadline := time.Now().Add(wakeWait)
	for {
		r, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		if r.State == jobs.StateCompleted {
			return r
		}
		select {
		case <-child.done:
			t.Fatalf("child exited early (%v): %s", child.err, child.out.String())
		default:
		}
		if time.Now().After(deadline) {
			out := child.out.String()
			t.Fatalf("job %d: not completed within %v by a process whose client ticks once an hour: state %s, attempt %d; child's output (last 4 kB):\n%s",
				id, wakeWait, r.State, r.Attempt, out[max(0, len(out)-4096):])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
