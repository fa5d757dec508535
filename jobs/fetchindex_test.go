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
	db := testdb.MySQL(t)
	js, table, g, now := busyJobTable(t, db)
	if err := g.Exec("ANALYZE TABLE " + table).Error; err != nil {
		t.Fatal(err)
	}
	dt, r, req := renderClaim(t, js, dialects.MariaDB, now)
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

// queueClaim is the claim a client's worker of the default queue runs at
// now for kind bench: the queue's criteria, a lease, 100 jobs.
func queueClaim(now time.Time) dao.ClaimRequest {
	return dao.ClaimRequest{
		Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, jobs.DefaultQueue),
			dao.In(jobs.ColKind, "bench"), dao.Le(jobs.ColScheduledAt, now), dao.LtField(jobs.ColAttempt, jobs.ColMaxAttempts),
			dao.IsNull(jobs.ColCancelRequestedAt), dao.Or(dao.IsNull(jobs.ColLeaseUntil), dao.Le(jobs.ColLeaseUntil, now))),
		Set:     dao.Set{jobs.ColLeaseOwner: "x", jobs.ColLeaseUntil: now.Add(time.Minute), jobs.ColAttempt: dao.Incr(1)},
		Limit:   100,
		OrderBy: []dao.Order{dao.Asc(jobs.ColPriority), dao.Asc(jobs.ColScheduledAt), dao.Asc(jobs.ColID)},
	}
}

// TestClaimReadsFetchIndexOnSQLite checks, with EXPLAIN QUERY PLAN on
// SQLite, that the claim statement of a queue reads the fetch index
// jobs.Migrate creates in the claim's order (no temporary B-tree for the
// ORDER BY) over a table holding running, scheduled and completed jobs
// besides the available ones; it prints the plan.
func TestClaimReadsFetchIndexOnSQLite(t *testing.T) {
	db := testdb.SQLite(t)
	js, table, g, now := busyJobTable(t, db)
	dt, r, req := renderClaim(t, js, dialects.SQLite, now)
	st, err := r.Claim(dt, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim: %s", st.SQL)
	var plan []struct {
		ID, Parent int
		Detail     string
	}
	if err := g.Raw("EXPLAIN QUERY PLAN "+st.SQL, st.Args...).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	fetch, _, _ := jobs.IndexNames(db, table)
	var reads bool
	for _, p := range plan {
		t.Logf("EXPLAIN QUERY PLAN: %d %d %s", p.ID, p.Parent, p.Detail)
		if strings.Contains(p.Detail, "USING INDEX "+fetch) || strings.Contains(p.Detail, "USING COVERING INDEX "+fetch) {
			reads = true
		}
		if strings.Contains(p.Detail, "TEMP B-TREE FOR ORDER BY") || strings.Contains(p.Detail, "TEMP B-TREE FOR RIGHT PART OF ORDER BY") {
			t.Errorf("the claim sorts: %s", p.Detail)
		}
	}
	if !reads {
		t.Errorf("the claim does not read the fetch index %s", fetch)
	}
}

// busyJobTable returns a migrated job table of db holding 5,000 available
// jobs behind 100 running ones (a lease that has not ended), 1,000
// scheduled an hour ahead and 2,000 completed, as a busy queue's table
// holds them; with its store, a session on db and the time the leases
// were taken at.
func busyJobTable(t *testing.T, db *gorm.DB) (*dao.Table[jobs.Row], string, *gorm.DB, time.Time) {
	t.Helper()
	ctx := context.Background()
	js, table := newJobStore(t, db, "fetch_jobs")
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
	return js, table, g, now
}

// newJobStore returns a job store of db on a new table named from prefix,
// not migrated, whose tables are dropped when t ends; and the table's
// name.
func newJobStore(t *testing.T, db *gorm.DB, prefix string) (*dao.Table[jobs.Row], string) {
	t.Helper()
	table := testdb.Table(t, db, prefix)
	js, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Drop(context.Background(), js, nil) })
	return js, table
}

// renderClaim returns the table of js, the renderer of dialect d and the
// checked queueClaim at now, from which a test renders the claim's
// statements.
func renderClaim(t *testing.T, js *dao.Table[jobs.Row], d dialects.Name, now time.Time) (dialects.Table, dialects.Renderer, dao.ClaimRequest) {
	t.Helper()
	var dt dialects.Table
	if !js.As(&dt) {
		t.Fatal("the store does not tell its table")
	}
	r, err := dialects.NewRenderer(d)
	if err != nil {
		t.Fatal(err)
	}
	req, err := js.CheckClaim(queueClaim(now))
	if err != nil {
		t.Fatal(err)
	}
	return dt, r, req
}
