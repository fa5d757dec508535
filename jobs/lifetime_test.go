package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/leaktest"
	"github.com/claimstore/claimstore/jobs"
)

// longNamed is a job store that reports a table name too long for the
// name of the client's leader election ("jobs:" and the table name, at
// most 191 bytes), as a store wrapped by its user may.
type longNamed struct{ dao.Store[jobs.Row] }

func (longNamed) TableName() string { return strings.Repeat("t", 190) }

// A configuration whose leader election cannot be built is refused by
// NewClient, before anything runs. Were it found by Run after the queues
// started, Run would return while they went on running jobs.
func TestNewClientRefusesWhatRunCouldNotStart(t *testing.T) {
	mem, _ := memstore.New[jobs.Row]()
	store := longNamed{mem}
	var ran atomic.Int64
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[GreetArgs](func(context.Context, *jobs.Job[GreetArgs]) error {
		ran.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{
		Store: store, Workers: ws, Leases: memstore.NewLeases(), PollInterval: 20 * time.Millisecond,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}},
	})
	if err != nil {
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("NewClient: %v, want dao.ErrInvalidArgument", err)
		}
		return
	}
	t.Errorf("NewClient accepted a table whose election name is too long for a lease")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatalf("Run did not fail within 5 s: %v", <-done)
	}
	if _, err := c.Insert(context.Background(), GreetArgs{Name: "after Run"}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ran.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if ran.Load() > 0 {
		t.Fatalf("Run returned (%v), and then its queue ran a job inserted after it returned", runErr)
	}
}

// Run returns only once every goroutine it started has ended: queues,
// maintenance, periodic jobs and wake-ups.
func TestRunLeavesNoGoroutine(t *testing.T) {
	store, _ := memstore.New[jobs.Row]()
	queues, _ := memstore.New[jobs.Queue]()
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[GreetArgs](func(context.Context, *jobs.Job[GreetArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{
		Store: store, QueueStore: queues, Workers: ws, Leases: memstore.NewLeases(), PollInterval: 20 * time.Millisecond,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}, "other": {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for i := range 20 {
		if _, err := c.Insert(ctx, GreetArgs{Name: strings.Repeat("x", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if live := leaktest.Remaining("claimstore/jobs.(", "claimstore/dispatch.(", "claimstore/coord.("); len(live) > 0 {
		t.Fatalf("%d goroutines of the client alive after Run returned:\n%s", len(live), strings.Join(live, "\n\n"))
	}
}
