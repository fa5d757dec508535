package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runChildren runs procs copies of the test binary, each running only the
// test t (runPattern) with the environment of this process, env and
// envChild, envDir and envProc set, bounded by timeout. Once every child
// has written its ready file (ready-<p> in dir) it writes dir/start, so
// that the children begin together, and waits for all of them. It returns
// when they began and each child's error and output; a child that never
// gets ready fails t.
func runChildren(t *testing.T, dir string, procs int, timeout time.Duration, env ...string) (began time.Time, errs []error, outs []*strings.Builder) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	outs = make([]*strings.Builder, procs)
	errs = make([]error, procs)
	done := make([]chan struct{}, procs)
	for p := range procs {
		cmd := exec.CommandContext(ctx, exe, "-test.run", runPattern(t.Name()), "-test.count=1", "-test.v",
			"-test.timeout="+timeout.String())
		cmd.Env = append(append(os.Environ(), env...),
			envChild+"="+t.Name(), envDir+"="+dir, envProc+"="+strconv.Itoa(p))
		outs[p] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[p], outs[p]
		if err := cmd.Start(); err != nil {
			t.Fatalf("start child %d: %v", p, err)
		}
		done[p] = make(chan struct{})
		go func() { defer close(done[p]); errs[p] = cmd.Wait() }()
	}
	// Let the children open their stores, then start them together.
	for p := range procs {
		if !waitFile(filepath.Join(dir, fmt.Sprintf("ready-%d", p)), done[p]) {
			cancel()
			for q := range procs {
				<-done[q]
			}
			t.Fatalf("child %d did not get ready: %v\n%s", p, errs[p], outs[p])
		}
	}
	began = time.Now()
	if err := os.WriteFile(filepath.Join(dir, "start"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for p := range procs {
		<-done[p]
	}
	return began, errs, outs
}
