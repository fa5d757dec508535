package dispatch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestMigrateScheduleStoreUsesTheStoresTable: the schedule table is named
// once, where the store is opened; MigrateScheduleStore creates that
// table, and the schedules added through the store land in it.
func TestMigrateScheduleStoreUsesTheStoresTable(t *testing.T) {
	ctx := context.Background()
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			table := testdb.Table(t, db, "own_sched")
			store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if db.Migrator().HasTable(table) {
				t.Fatalf("table %s exists before the migration", table)
			}
			if err := dispatch.MigrateScheduleStore(ctx, store); err != nil {
				t.Fatalf("MigrateScheduleStore: %v", err)
			}
			if !db.Migrator().HasTable(table) {
				t.Fatalf("MigrateScheduleStore did not create the store's table %s", table)
			}
			if err := dispatch.MigrateScheduleStore(ctx, store); err != nil {
				t.Fatalf("MigrateScheduleStore again: %v", err)
			}
			sc := newSchedules(t, store, dispatch.SchedulesConfig{})
			addKeys(t, sc, "in-own-table")
			var n int64
			if err := db.Table(table).Where("schedule_key = ?", "in-own-table").Count(&n).Error; err != nil || n != 1 {
				t.Fatalf("rows with the key in %s: %d, %v; want 1", table, n, err)
			}
		})
	}
}

// TestMigrateScheduleStoreMemoryAndBadInput: the memory store needs no
// table; a nil store or a bad table name is refused with
// ErrInvalidArgument.
func TestMigrateScheduleStoreMemoryAndBadInput(t *testing.T) {
	ctx := context.Background()
	mem, _ := memBackend().open(t)
	if err := dispatch.MigrateScheduleStore(ctx, mem); err != nil {
		t.Errorf("memory store: %v", err)
	}
	if err := dispatch.MigrateScheduleStore(ctx, nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil store: %v, want ErrInvalidArgument", err)
	}
	db := testdb.SQLite(t)
	bad, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable("bad-name"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatch.MigrateScheduleStore(ctx, bad); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("table name bad-name: %v, want ErrInvalidArgument", err)
	}
	if db.Migrator().HasTable("bad-name") {
		t.Error("a refused migration created the table")
	}
}
