package dispatch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// The claim of due schedules orders by next_fire_at and then the primary
// key. With a backlog of schedules due at the same time, the due index
// must serve that order: a plan that sorts reads every due row on every
// claim (about 100 ms per claim at 200,000 rows on PostgreSQL).
func TestDueIndexServesClaimOrder(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}, {"mariadb", testdb.MySQL}} {
		t.Run(b.name, func(t *testing.T) { checkDueIndex(t, b.open(t)) })
	}
}

func checkDueIndex(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	table := testdb.Table(t, db, "due")
	if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	{
		due := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		rows := make([]*dispatch.Schedule, 0, 5000)
		for i := range cap(rows) {
			rows = append(rows, &dispatch.Schedule{Key: fmt.Sprintf("k%05d", i), Kind: dispatch.KindOnce, Status: dispatch.StatusActive, NextFireAt: due, MaxFailures: 5})
		}
		for batch := range slices.Chunk(rows, 500) {
			if err := store.Create(ctx, batch...); err != nil {
				t.Fatal(err)
			}
		}
		name := db.Dialector.Name()
		analyze := map[string]string{"postgres": "ANALYZE " + table, "sqlite": "ANALYZE", "mysql": "ANALYZE TABLE " + table}[name]
		if err := db.Exec(analyze).Error; err != nil {
			t.Fatal(err)
		}
		explain := "EXPLAIN "
		if name == "sqlite" {
			explain = "EXPLAIN QUERY PLAN "
		}
		q := explain + "SELECT id FROM " + table + " WHERE status = ? AND next_fire_at <= ? ORDER BY next_fire_at, id LIMIT 32"
		r, err := db.Raw(q, string(dispatch.StatusActive), due.Add(time.Hour)).Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cols, _ := r.Columns()
		var plan []string
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, fmt.Sprintf("%s", vals))
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "idx_"+table+"_due_id") {
			t.Errorf("the claim's plan does not read the due index idx_%s_due_id:\n%s", table, text)
		}
		for _, sort := range []string{"Sort", "TEMP B-TREE", "filesort"} {
			if strings.Contains(text, sort) {
				t.Errorf("the claim's order is sorted (%s), not read from the due index:\n%s", sort, text)
			}
		}
	}
}

// A table made with the earlier due index, (status, next_fire_at) named
// idx_<table>_due, gets the new one and loses the old one when migrated.
func TestMigrateReplacesOldDueIndex(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}, {"mariadb", testdb.MySQL}} {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			ctx := context.Background()
			table := testdb.Table(t, db, "olddue")
			if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			m := db.Table(table).Migrator()
			oldName, newName := "idx_"+table+"_due", "idx_"+table+"_due_id"
			if err := m.DropIndex(&dispatch.Schedule{}, newName); err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("CREATE INDEX " + oldName + " ON " + table + " (status, next_fire_at)").Error; err != nil {
				t.Fatal(err)
			}
			if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			if m.HasIndex(&dispatch.Schedule{}, oldName) || !m.HasIndex(&dispatch.Schedule{}, newName) {
				t.Errorf("after migrating: old index there %v, new index there %v; want false, true",
					m.HasIndex(&dispatch.Schedule{}, oldName), m.HasIndex(&dispatch.Schedule{}, newName))
			}
		})
	}
}
