package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
	"gorm.io/gorm/clause"
)

// TestLimitClaimAfterLockWait checks, on SQLite, PostgreSQL and MariaDB,
// that a limited claim that waited for its queue's lock counts the jobs
// claimed by the transaction that held it: another session holds the
// lock while it leases two jobs and writes their slot rows; the claim,
// under a limit of two, starts meanwhile, waits, and once the other
// session commits takes nothing. (On PostgreSQL the lock's statement also
// counts the running jobs, in a snapshot taken before the wait.)
func TestLimitClaimAfterLockWait(t *testing.T) {
	for _, be := range testdb.SQLBackends {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			db := be.Open(t)
			js, table := newJobStore(t, db, "lockwait_jobs")
			if err := jobs.Migrate(ctx, js, nil); err != nil {
				t.Fatal(err)
			}
			c, err := jobs.NewClient(jobs.Config{Store: js})
			if err != nil {
				t.Fatal(err)
			}
			const queue = "lockwait"
			claim, err := jobs.NewLimiter(c, queue, jobs.Limit{Max: 2})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now().UTC().Truncate(time.Millisecond)
			req := func(now time.Time) dao.ClaimRequest { return limitedReq(queue, "limited", now, 10) }
			// The first claim creates the lock row (and reconciles).
			if rows, err := claim(ctx, t0, req(t0)); err != nil || len(rows) != 0 {
				t.Fatalf("first claim: %d rows, %v", len(rows), err)
			}
			var ids []any
			for i := range 4 {
				res, err := c.Insert(ctx, benchArgs{Seq: int64(i)}, &jobs.InsertOpts{Queue: queue})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.Job.ID)
			}
			held := db.Begin()
			if err := held.Error; err != nil {
				t.Fatal(err)
			}
			defer held.Rollback()
			if err := held.Exec("UPDATE ? SET claims = claims + 1 WHERE queue = ? AND part = ''", clause.Table{Name: jobs.LimitTable(table)}, queue).Error; err != nil {
				t.Fatal(err)
			}
			if err := held.Exec("UPDATE ? SET lease_owner = ?, lease_until = ?, attempt = 1 WHERE id IN ?",
				clause.Table{Name: table}, "holder", t0.Add(time.Hour), ids[:2]).Error; err != nil {
				t.Fatal(err)
			}
			for _, id := range ids[:2] {
				if err := held.Exec("INSERT INTO ? (queue, job_id, part) VALUES (?, ?, '')", clause.Table{Name: jobs.LimitSlotTable(table)}, queue, id).Error; err != nil {
					t.Fatal(err)
				}
			}
			type result struct {
				rows []jobs.Row
				err  error
			}
			done := make(chan result, 1)
			at := t0.Add(time.Second)
			go func() {
				rows, err := claim(ctx, at, req(at))
				done <- result{rows, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("the claim returned while the lock was held: %d rows, %v", len(r.rows), r.err)
			case <-time.After(300 * time.Millisecond):
			}
			if err := held.Commit().Error; err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.rows) != 0 {
				got := make([]int64, len(r.rows))
				for i := range r.rows {
					got[i] = r.rows[i].ID
				}
				t.Fatalf("claim after the wait took %v: 4 running under a limit of 2", got)
			}
		})
	}
}
