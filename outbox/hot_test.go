package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// pgTableLayout returns table's storage parameters and the predicate of its
// claim index, as PostgreSQL prints them.
func pgTableLayout(t *testing.T, db *gorm.DB, table string) (reloptions, predicate string) {
	t.Helper()
	claim, _ := outbox.IndexNames(db, table)
	err := db.Raw("SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = ?::regclass", table).Scan(&reloptions).Error
	if err != nil {
		t.Fatal(err)
	}
	err = db.Raw("SELECT coalesce(pg_get_expr(indpred, indrelid), '') FROM pg_index WHERE indexrelid = ?::regclass", claim).Scan(&predicate).Error
	if err != nil {
		t.Fatal(err)
	}
	return reloptions, predicate
}

// hotClaims adds n messages to table through one connection of db, claims
// them all and marks them published, and returns the table's row updates
// and HOT updates as pg_stat_user_tables counts them.
func hotClaims(t *testing.T, db *gorm.DB, table string, n int) (updates, hot int64) {
	t.Helper()
	ctx := context.Background()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1) // one backend: its statistics are flushed below
	s, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	repo := newRepo(t, s)
	write(t, repo, db, msgs("hot", testSubject, n))
	batch, err := repo.ClaimBatch(ctx, "hot-worker", n, "")
	if err != nil || len(batch) != n {
		t.Fatalf("claimed %d of %d: %v", len(batch), n, err)
	}
	if refused, err := repo.MarkPublished(ctx, "hot-worker", ids(batch)...); err != nil || len(refused) != 0 {
		t.Fatalf("mark published: %v %v", refused, err)
	}
	// The backend reports its counts when it is next idle after this.
	if err := db.Exec("SELECT pg_stat_force_next_flush()").Error; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var row struct{ Upd, Hot int64 }
		err := db.Raw("SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relid = ?::regclass", table).Scan(&row).Error
		if err != nil {
			t.Fatal(err)
		}
		if row.Upd >= int64(2*n) || time.Now().After(deadline) {
			return row.Upd, row.Hot
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// On a table Migrate creates on PostgreSQL, claims are HOT updates: the
// table has fillfactor 50 and the claim index a predicate on published_at,
// which a claim does not change. (The marks, which take rows out of the
// claim index, cannot be.)
func TestMigratePostgresHOTClaims(t *testing.T) {
	db := testdb.Postgres(t)
	table := testdb.Table(t, db, "outbox_hot")
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	rel, pred := pgTableLayout(t, db, table)
	if rel != "fillfactor=50" || pred != "(published_at IS NULL)" {
		t.Fatalf("new table: reloptions %q, claim index predicate %q", rel, pred)
	}
	const n = 200
	upd, hot := hotClaims(t, db, table, n)
	if upd != 2*n {
		t.Fatalf("%d row updates, want %d (a claim and a mark per message)", upd, 2*n)
	}
	// A claim of a whole page of rows writes a second, slightly longer,
	// version of each: the last of them may not fit.
	if hot < n*8/10 || hot > n {
		t.Fatalf("%d of %d claims were HOT updates", hot, n)
	}
}

// A table made by an earlier version (claim index on status, default
// fillfactor) is left as it is by Migrate and keeps working: claims and
// marks go through, as non-HOT updates.
func TestMigrateKeepsEarlierPostgresTable(t *testing.T) {
	ctx := context.Background()
	db := testdb.Postgres(t)
	table := testdb.Table(t, db, "outbox_old")
	if err := db.Table(table).AutoMigrate(&outbox.Message{}); err != nil {
		t.Fatal(err)
	}
	claim, _ := outbox.IndexNames(db, table)
	err := db.Exec("CREATE INDEX ? ON ? (target_broker, priority DESC, created_at, id) WHERE status IN ('pending', 'processing', 'failed')",
		clause.Column{Name: claim}, clause.Table{Name: table}).Error
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	rel, pred := pgTableLayout(t, db, table)
	if rel != "" || !strings.Contains(pred, "status") || strings.Contains(pred, "published_at") {
		t.Fatalf("earlier table after Migrate: reloptions %q, claim index predicate %q", rel, pred)
	}
	const n = 50
	upd, hot := hotClaims(t, db, table, n)
	if upd != 2*n || hot != 0 {
		t.Fatalf("%d row updates, %d HOT; want %d, none HOT", upd, hot, 2*n)
	}
}

// The statements docs/operations.md gives bring a table of the earlier
// layout to the current one while it is in use: Migrate then finds the
// claim index under its name, and claims become HOT updates.
func TestConvertEarlierPostgresTable(t *testing.T) {
	ctx := context.Background()
	db := testdb.Postgres(t)
	table := testdb.Table(t, db, "outbox_conv")
	if err := db.Table(table).AutoMigrate(&outbox.Message{}); err != nil {
		t.Fatal(err)
	}
	claim, _ := outbox.IndexNames(db, table)
	idx, tmp, tbl := clause.Column{Name: claim}, clause.Column{Name: claim + "_hot"}, clause.Table{Name: table}
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{"CREATE INDEX ? ON ? (target_broker, priority DESC, created_at, id) WHERE status IN ('pending', 'processing', 'failed')", []any{idx, tbl}},
		// docs/operations.md, "Outbox table on PostgreSQL: HOT claims":
		{"ALTER TABLE ? SET (fillfactor = 50)", []any{tbl}},
		{"CREATE INDEX CONCURRENTLY ? ON ? (target_broker, priority DESC, created_at, id) WHERE published_at IS NULL", []any{tmp, tbl}},
		{"DROP INDEX CONCURRENTLY ?", []any{idx}},
		{"ALTER INDEX ? RENAME TO ?", []any{tmp, idx}},
	} {
		if err := db.Exec(st.sql, st.args...).Error; err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	rel, pred := pgTableLayout(t, db, table)
	if rel != "fillfactor=50" || pred != "(published_at IS NULL)" {
		t.Fatalf("converted table: reloptions %q, claim index predicate %q", rel, pred)
	}
	const n = 100
	if upd, hot := hotClaims(t, db, table, n); upd != 2*n || hot < n*8/10 {
		t.Fatalf("%d row updates, %d HOT; want %d, most claims HOT", upd, hot, 2*n)
	}
}
