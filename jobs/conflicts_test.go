package jobs_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// conflictingJobs is a job store whose first claims report conflicts
// through the claim trace, as a SQL store does for the deadlock victims
// its claim goes on from, and whose first deletes fail with
// dao.ErrConflict, as a deadlock victim's statement does.
type conflictingJobs struct {
	dao.Store[jobs.Row]
	claimsLeft, deletesLeft atomic.Int64
}

func (s *conflictingJobs) Claim(ctx context.Context, req dao.ClaimRequest) ([]jobs.Row, error) {
	if s.claimsLeft.Add(-1) >= 0 {
		if tr := dao.ContextClaimTrace(ctx); tr != nil && tr.Conflict != nil {
			tr.Conflict(ctx)
		}
	}
	return s.Store.Claim(ctx, req)
}

func (s *conflictingJobs) Delete(ctx context.Context, where dao.Criteria, limit int) (int64, error) {
	if s.deletesLeft.Add(-1) >= 0 {
		return 0, fmt.Errorf("deadlock victim: %w", dao.ErrConflict)
	}
	return s.Store.Delete(ctx, where, limit)
}

// Stats.ConflictRetries counts the retention sweep's statements run again
// after a conflict and the conflicts its queues' claims absorbed, and the
// claims' conflicts still reach the trace of Run's context.
func TestClientCountsConflictRetries(t *testing.T) {
	mem, _ := memstore.New[jobs.Row]()
	store := &conflictingJobs{Store: mem}
	store.deletesLeft.Store(2)
	var ran atomic.Int64
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[GreetArgs](func(context.Context, *jobs.Job[GreetArgs]) error {
		ran.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{
		Store: store, Workers: ws, PollInterval: 10 * time.Millisecond,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Sweep(ctx); err != nil {
		t.Fatalf("Sweep: %v, want its conflicts retried", err)
	}
	if got := c.Stats().ConflictRetries; got != 2 {
		t.Fatalf("after a sweep whose first two deletes were deadlock victims, ConflictRetries = %d, want 2", got)
	}

	store.claimsLeft.Store(3)
	var outer atomic.Int64
	rctx, cancel := context.WithCancel(dao.WithClaimTrace(ctx, &dao.ClaimTrace{Conflict: func(context.Context) { outer.Add(1) }}))
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	if _, err := c.Insert(ctx, GreetArgs{Name: "conflicts"}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (ran.Load() == 0 || store.claimsLeft.Load() >= 0) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ran.Load() != 1 {
		t.Errorf("the job ran %d times, want once", ran.Load())
	}
	if got := c.Stats().ConflictRetries; got != 5 {
		t.Errorf("ConflictRetries = %d, want 5 (2 of the sweep, 3 of the claims)", got)
	}
	if got := outer.Load(); got != 3 {
		t.Errorf("the trace of Run's context saw %d conflicts, want the claims' 3", got)
	}
}
