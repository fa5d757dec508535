package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestLimitedClaimBusy checks, on SQLite, that a limited claim refused
// the write lock (another connection holds it past the busy timeout)
// returns dao.ErrBusy, which dao.IsRetryable reports, as the unlimited
// claim does: the worker logs it as retryable and tries again.
func TestLimitedClaimBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for SQLite's busy timeout")
	}
	db := testdb.SQLite(t)
	js, table := newJobStore(t, db, "busy_jobs")
	ctx := context.Background()
	if err := jobs.Migrate(ctx, js, nil); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, benchArgs{Seq: 1}, &jobs.InsertOpts{Queue: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := jobs.NewLimiter(c, "busy", jobs.Limit{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	release := testdb.HoldLock(t, db, table, res.Job.ID)
	defer release()
	now := time.Now().UTC()
	rows, err := claim(ctx, now, dao.ClaimRequest{
		Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, "busy")),
		Set:   dao.Set{jobs.ColLeaseOwner: "w", jobs.ColLeaseUntil: now.Add(time.Minute)},
		Limit: 1,
	})
	t.Logf("claim with the write lock held: %d rows, %v", len(rows), err)
	if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) {
		t.Fatalf("claim with the write lock held: %v; want dao.ErrBusy, retryable", err)
	}
}
