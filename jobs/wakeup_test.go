package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// A retry with a short backoff (within ScheduleAhead) runs when it comes
// due, not at the scheduler's next tick: with a tick of a minute, a job
// failing its first attempt with a 200 ms backoff completes within
// seconds, although it waited as retryable.
func TestShortRetryWakesItsQueue(t *testing.T) {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	queues, _ := memstore.New[jobs.Queue]()
	if err := jobs.Migrate(ctx, store, queues); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	done := make(chan time.Time, 1)
	ws := jobs.NewWorkers()
	err := jobs.AddWorker(ws, jobs.WorkFunc[GreetArgs](func(ctx context.Context, j *jobs.Job[GreetArgs]) error {
		attempts.Add(1)
		if j.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		done <- time.Now()
		return nil
	}), jobs.WithBackoff(func(int) time.Duration { return 200 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{
		Store: store, QueueStore: queues, Workers: ws,
		Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 4}},
		PollInterval: time.Minute, Lease: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	start := time.Now()
	if _, err := c.Insert(ctx, GreetArgs{Name: "retry"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-done:
		t.Logf("completed on attempt %d, %v after the insert (backoff 200 ms, tick 1 min)", attempts.Load(), at.Sub(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatalf("the retry did not run within 20 s (attempts %d): it waits for the tick", attempts.Load())
	}
}
