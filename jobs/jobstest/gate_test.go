package jobstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/jobs/jobstest"
)

// A Gate reports each job that waits, holds it until Open, then lets
// every waiting and later job through; a job whose context ends returns
// the context's error; Open may be called twice.
func TestGate(t *testing.T) {
	g := jobstest.NewGate(2)
	ctx := context.Background()
	done := make(chan error, 2)
	for _, id := range []int64{1, 2} {
		go func() { done <- g.Wait(ctx, id) }()
	}
	got := map[int64]bool{<-g.Started(): true, <-g.Started(): true}
	if !got[1] || !got[2] {
		t.Fatalf("started %v, want jobs 1 and 2", got)
	}
	select {
	case err := <-done:
		t.Fatalf("a job returned before the gate opened: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() { cancelled <- g.Wait(cctx, 3) }()
	<-g.Started()
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with its context cancelled = %v, want context.Canceled", err)
	}
	g.Open()
	g.Open()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Wait after Open = %v, want nil", err)
		}
	}
	if err := g.Wait(ctx, 4); err != nil {
		t.Fatalf("Wait on an open gate = %v, want nil", err)
	}
}
