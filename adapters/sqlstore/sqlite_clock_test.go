package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/conformance"
)

// TestSQLiteNowNeedsNoConnection: on SQLite, whose clock is the host's
// (the database runs in the process), Table.Now answers while every
// connection of the pool is taken, as they are when a transaction holds
// the write lock and the other connection waits for it; and it answers
// the host's time.
func TestSQLiteNowNeedsNoConnection(t *testing.T) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "clock.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(db)
	store, err := sqlstore.New[conformance.Job](db)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	var held []*sql.Conn
	for range sqlDB.Stats().MaxOpenConnections {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	nctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	before := time.Now()
	now, err := store.Now(nctx)
	after := time.Now()
	if err != nil {
		t.Fatalf("Now with the pool's %d connections taken: %v", len(held), err)
	}
	if now.Before(before.Add(-time.Millisecond)) || now.After(after.Add(time.Millisecond)) || now.Location() != time.UTC {
		t.Errorf("Now = %v, want the host's time in UTC, between %v and %v", now, before.UTC(), after.UTC())
	}
}
