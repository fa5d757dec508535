package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestLimitSweepUnanalyzed checks, on PostgreSQL, that the sweep of a
// limited queue's free slot rows reads each of the job table's rows at
// most about once on a job table that has never been analyzed (a backlog
// loaded into a new table before autovacuum's first ANALYZE): the rows
// read from the job table, counted by the server in the sweep's
// transaction (pg_stat_xact_user_tables), stay within the slot rows plus
// the job table's rows, where a plan that steps over the queue's backlog
// for each slot row reads their product. The slot rows of the jobs still
// running are kept.
func TestLimitSweepUnanalyzed(t *testing.T) {
	ctx := context.Background()
	db := testdb.Postgres(t)
	js, table := newJobStore(t, db, "sweep_jobs")
	if err := jobs.Migrate(ctx, js, nil); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	const (
		queue   = "sweep"
		backlog = 3000
		claimed = 310
		running = 10
	)
	params := make([]jobs.InsertParams, backlog)
	for i := range params {
		params[i] = jobs.InsertParams{Args: benchArgs{Seq: int64(i)}, Opts: &jobs.InsertOpts{Queue: queue}}
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	claim, err := jobs.NewLimiter(c, queue, jobs.Limit{Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for got := 0; got < claimed; {
		rows, err := claim(ctx, now, limitedReq(queue, "w", now, min(100, claimed-got)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			t.Fatalf("claimed %d of %d jobs, then none", got, claimed)
		}
		got += len(rows)
	}
	// Every claimed job but the first running ones finishes.
	slots, err := jobs.LimitSlots(ctx, c, queue)
	if err != nil || len(slots) != claimed {
		t.Fatalf("slot rows after the claims: %d, %v; want %d", len(slots), err, claimed)
	}
	n, err := js.Update(ctx, dao.And(dao.Eq(jobs.ColQueue, queue), dao.Gt(jobs.ColID, slots[running-1]), dao.Ne(jobs.ColLeaseOwner, "")),
		dao.Set{jobs.ColState: string(jobs.StateCompleted), jobs.ColLeaseOwner: "", jobs.ColLeaseUntil: nil, jobs.ColFinalizedAt: now})
	if err != nil || n != claimed-running {
		t.Fatalf("finish: %d rows, %v; want %d", n, err, claimed-running)
	}

	var read int64
	err = db.Transaction(func(tx *gorm.DB) error {
		jobRowsRead := func() int64 {
			var r int64
			if err := tx.Raw("SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables WHERE relname = ?", table).Scan(&r).Error; err != nil {
				t.Fatal(err)
			}
			return r
		}
		before := jobRowsRead()
		if err := jobs.DropFreeSlots(ctx, tx, c, queue); err != nil {
			return err
		}
		read = jobRowsRead() - before
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sweep of %d free slot rows read %d rows of the job table (%d rows)", claimed-running, read, backlog)
	if bound := int64(claimed + backlog); read > bound {
		t.Errorf("the sweep read %d rows of the job table, want at most %d (the slot rows plus the job table's rows)", read, bound)
	}
	left, err := jobs.LimitSlots(ctx, c, queue)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, slots[:running]) {
		t.Errorf("slot rows after the sweep: %v, want the %d of the running jobs %v", left, running, slots[:running])
	}
}
