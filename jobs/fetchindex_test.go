package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestClaimReadsFetchIndexOnMariaDB checks, with EXPLAIN and ANALYZE on
// MariaDB, that the fast path's locking read of a queue's claim reads the
// fetch index jobs.Migrate creates, in the claim's order (no filesort),
// over a table holding running, scheduled and completed jobs besides the
// available ones; it prints the plan and the rows the read examined.
func TestClaimReadsFetchIndexOnMariaDB(t *testing.T) {
	ctx := context.Background()
	db := testdb.MySQL(t)
	table := testdb.Table(t, db, "fetch_jobs")
	js, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Drop(context.Background(), js, nil) })
	if err := jobs.Migrate(ctx, js, nil); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	const available, running, scheduled, completed = 5000, 100, 1000, 2000
	params := make([]jobs.InsertParams, 0, available+running+scheduled+completed)
	for i := range available + running + scheduled + completed {
		p := jobs.InsertParams{Args: benchArgs{Seq: int64(i)}}
		if i >= available+running && i < available+running+scheduled {
			p.Opts = &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}
		}
		params = append(params, p)
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	g := db.Session(&gorm.Session{NewDB: true}).WithContext(ctx)
	now := time.Now().UTC()
	// The first jobs are running (a lease that has not ended) and the last
	// ones completed, as a busy queue's table holds them.
	if err := g.Table(table).Where("id <= ?", running).Updates(map[string]any{jobs.ColLeaseOwner: "w", jobs.ColLeaseUntil: now.Add(time.Minute), jobs.ColAttempt: 1}).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Table(table).Where("id > ?", available+running+scheduled).Updates(map[string]any{jobs.ColState: string(jobs.StateCompleted), jobs.ColFinalizedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Exec("ANALYZE TABLE " + table).Error; err != nil {
		t.Fatal(err)
	}
	req, err := js.CheckClaim(dao.ClaimRequest{
		Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, jobs.DefaultQueue),
			dao.In(jobs.ColKind, "bench"), dao.Le(jobs.ColScheduledAt, now), dao.LtField(jobs.ColAttempt, jobs.ColMaxAttempts),
			dao.IsNull(jobs.ColCancelRequestedAt), dao.Or(dao.IsNull(jobs.ColLeaseUntil), dao.Le(jobs.ColLeaseUntil, now))),
		Set:     dao.Set{jobs.ColLeaseOwner: "x"},
		Limit:   100,
		OrderBy: []dao.Order{dao.Asc(jobs.ColPriority), dao.Asc(jobs.ColScheduledAt), dao.Asc(jobs.ColID)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var dt dialects.Table
	if !js.As(&dt) {
		t.Fatal("the store does not tell its table")
	}
	r, err := dialects.NewRenderer(dialects.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.LockCandidates(dt, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("locking read: %s", st.SQL)
	var plan []map[string]any
	if err := g.Raw("EXPLAIN "+st.SQL, st.Args...).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	fetch, _, _ := jobs.IndexNames(db, table)
	for _, row := range plan {
		t.Logf("EXPLAIN: type=%v key=%v key_len=%v rows=%v Extra=%v", row["type"], row["key"], row["key_len"], row["rows"], row["Extra"])
	}
	if len(plan) != 1 || fmt.Sprint(plan[0]["key"]) != fetch {
		t.Errorf("the claim's locking read does not read the fetch index %s: %v", fetch, plan)
	} else if extra := fmt.Sprint(plan[0]["Extra"]); strings.Contains(extra, "filesort") {
		t.Errorf("the claim's locking read sorts: %s", extra)
	}
	// ANALYZE runs the read (in a transaction rolled back here) and
	// reports the rows it examined: the running jobs at the head of the
	// index, then the claimed ones.
	tx := g.Begin()
	defer tx.Rollback()
	var analyzed string
	if err := tx.Raw("ANALYZE FORMAT=JSON "+st.SQL, st.Args...).Row().Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	t.Logf("ANALYZE: %s", compactJSON(analyzed))
}

// compactJSON joins the lines of a JSON text.
func compactJSON(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
