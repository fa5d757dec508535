package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// TestFinishCancelledAfterOwnRelease checks that a job whose outcome made
// it wait again after a cancel request is finalized cancelled although
// the outcome's release stamped lease_until a few milliseconds after the
// recheck's clock: the outcome is written with the worker's clock and
// the recheck reads the client's, two estimates of the database's clock
// that may differ by a few milliseconds under load. A lease released (no
// owner) holds the job for no one, whatever its time says.
func TestFinishCancelledAfterOwnRelease(t *testing.T) {
	ctx := context.Background()
	store, err := memstore.New[jobs.Row]()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[benchArgs](func(context.Context, *jobs.Job[benchArgs]) error { return nil })); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: store, Workers: ws, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, benchArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	// As the worker's outcome wrote it: retryable, released at its clock,
	// 5 ms ahead of the client's; the cancel request came while it ran.
	if _, err := store.Update(ctx, dao.Eq(jobs.ColID, id), dao.Set{
		jobs.ColState: string(jobs.StateRetryable), jobs.ColAttempt: 1,
		jobs.ColLeaseOwner: "", jobs.ColLeaseUntil: t0.Add(5 * time.Millisecond),
		jobs.ColCancelRequestedAt: t0.Add(-time.Second), jobs.ColScheduledAt: t0.Add(time.Hour),
		jobs.ColErrors: `[{"attempt":1,"at":"2026-12-07T11:59:59Z","error":"failed"}]`,
	}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.FinishCancelled(c, ctx, []int64{id}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != jobs.StateCancelled {
		t.Fatalf("job released 5 ms after the recheck's clock with a cancel request: state %s, want cancelled", got.State)
	}
}
