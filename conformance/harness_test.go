package conformance_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
)

// fastPathStore is an in-memory store that declares a fast path whose
// lost race is skipped, as PostgreSQL's does: the suite needs
// Harness.HoldLock to force that race.
type fastPathStore struct{ dao.Store[conformance.Job] }

func (fastPathStore) Capabilities() dao.Capabilities {
	return dao.Capabilities{Backend: "fast-path-memory", Strategy: dao.StrategyFastPath, ClaimRoundTrips: dao.RoundTrips{Fixed: 1}, LostRace: dao.LostRaceSkip}
}

// envChild selects the harness TestHarnessChild runs in a child process.
const envChild = "CONFORMANCE_HARNESS_CHILD"

// TestHarnessChild runs the suite's HeldLock check in a child process
// started by TestMissingHarnessCapabilityFails; it does nothing otherwise.
func TestHarnessChild(t *testing.T) {
	mode := os.Getenv(envChild)
	if mode == "" {
		t.Skip("run as a child process only")
	}
	h := conformance.Harness{NewStore: func(t *testing.T) dao.Store[conformance.Job] {
		s, err := memstore.New[conformance.Job]()
		if err != nil {
			t.Fatal(err)
		}
		return fastPathStore{s}
	}}
	switch mode {
	case "opt-out":
		h.Skip = []string{conformance.CheckHeldLock}
	case "unknown-name":
		h.Skip = []string{"LostRace/NoSuchCheck"}
	}
	conformance.Run(t, h)
}

// runChild runs TestHarnessChild's subtests matching run, with mode, and
// returns whether it passed and its output.
func runChild(t *testing.T, mode, run string) (bool, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"="+mode)
	out, err := cmd.CombinedOutput()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("run child: %v", err)
	}
	return err == nil, string(out)
}

// TestMissingHarnessCapabilityFails checks that a harness without HoldLock,
// run against a store whose declared lost race needs it, fails the run
// rather than skipping the check, unless the harness names the check in
// Skip; and that an unknown name in Skip fails the run.
func TestMissingHarnessCapabilityFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	heldLock := "^TestHarnessChild$/^LostRace$/^HeldLock$"
	ok, out := runChild(t, "missing", heldLock)
	if ok || !strings.Contains(out, "HoldLock") || !strings.Contains(out, "--- FAIL: TestHarnessChild/LostRace/HeldLock") {
		t.Errorf("suite run without HoldLock on a fast-path store: passed %v, want a failure of LostRace/HeldLock naming HoldLock; output:\n%s", ok, out)
	}
	ok, out = runChild(t, "opt-out", heldLock)
	if !ok || !strings.Contains(out, "--- SKIP: TestHarnessChild/LostRace/HeldLock") {
		t.Errorf("suite run with Skip naming %s: passed %v, want the check skipped; output:\n%s", conformance.CheckHeldLock, ok, out)
	}
	ok, out = runChild(t, "unknown-name", "^TestHarnessChild$/^Capabilities$")
	if ok || !strings.Contains(out, "NoSuchCheck") {
		t.Errorf("suite run with an unknown name in Skip: passed %v, want a failure naming it; output:\n%s", ok, out)
	}
}
