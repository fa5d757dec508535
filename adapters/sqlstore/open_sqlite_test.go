package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/ncruces/go-sqlite3"
)

// Every connection of a pool opened with SQLiteDSNTimeout has WAL, the
// busy timeout, synchronous NORMAL, BEGIN IMMEDIATE transactions and the
// time layout, read back from the database.
func TestSQLiteDSNSettings(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "settings.db")
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSNTimeout(path, 1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(db)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	// The pool of a file is limited to OpenSQLiteConns connections; hold
	// that many at once so the pool opens each, then give them back.
	if got := sqlDB.Stats().MaxOpenConnections; got != sqlstore.OpenSQLiteConns {
		t.Errorf("max open connections = %d, want %d", got, sqlstore.OpenSQLiteConns)
	}
	var held []*sql.Conn
	for i := 0; i < sqlstore.OpenSQLiteConns; i++ {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
		var mode string
		var timeout, syncMode int
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("conn %d: journal_mode = %q, %v; want wal", i, mode, err)
		}
		if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout != 1500 {
			t.Errorf("conn %d: busy_timeout = %d, %v; want 1500", i, timeout, err)
		}
		// PRAGMA synchronous reports NORMAL as 1
		if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 1 {
			t.Errorf("conn %d: synchronous = %d, %v; want 1 (NORMAL)", i, syncMode, err)
		}
	}
	for _, conn := range held {
		conn.Close()
	}

	if err := db.Exec("CREATE TABLE settings_t (id INTEGER PRIMARY KEY, at DATETIME, raw TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	// times: stored as text in SQLiteTimeLayout, read back as time.Time
	at := time.Date(2031, 2, 3, 4, 5, 6, 700, time.UTC)
	if err := db.Exec("INSERT INTO settings_t (id, at, raw) VALUES (1, ?, ?)", at, at).Error; err != nil {
		t.Fatal(err)
	}
	var raw, typ string
	if err := sqlDB.QueryRowContext(ctx, "SELECT raw, typeof(at) FROM settings_t").Scan(&raw, &typ); err != nil {
		t.Fatal(err)
	}
	if want := at.Format(sqlstore.SQLiteTimeLayout); raw != want || typ != "text" {
		t.Errorf("stored time = %q (%s); want %q (text)", raw, typ, want)
	}
	var back time.Time
	if err := sqlDB.QueryRowContext(ctx, "SELECT at FROM settings_t").Scan(&back); err != nil || !back.Equal(at) {
		t.Errorf("time read back = %v, %v; want %v", back, err, at)
	}

	// BEGIN IMMEDIATE: a transaction that has not written yet already
	// holds the write lock, so a writer on another connection waits its
	// busy timeout and fails with SQLITE_BUSY. A deferred BEGIN would take
	// no lock until its first write and let that writer through.
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSNTimeout(path, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(other)
	otherDB, err := other.DB()
	if err != nil {
		t.Fatal(err)
	}
	const write = "UPDATE settings_t SET raw = 'x' WHERE id = 1"
	if _, err := otherDB.ExecContext(ctx, write); !errors.Is(err, sqlite3.BUSY) {
		t.Fatalf("write during an open transaction that has not written: %v; want SQLITE_BUSY (BEGIN IMMEDIATE)", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := otherDB.ExecContext(ctx, write); err != nil {
		t.Fatalf("write after the rollback: %v", err)
	}
	if !strings.Contains(sqlstore.SQLiteDSN(path), "_txlock=immediate") {
		t.Errorf("SQLiteDSN lacks _txlock=immediate: %s", sqlstore.SQLiteDSN(path))
	}
}

// A "file:" DSN of the user's own that does not set _timefmt still stores
// times in SQLiteTimeLayout, so they sort as text; one that sets it keeps
// its own.
func TestSQLiteOpenAddsTimeLayout(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, tc := range []struct{ query, want string }{
		{"", at.Format(sqlstore.SQLiteTimeLayout)},
		{"?_pragma=busy_timeout(2000)", at.Format(sqlstore.SQLiteTimeLayout)},
		{"?_timefmt=rfc3339", at.Format(time.RFC3339Nano)},
	} {
		path := filepath.Join(t.TempDir(), "own.db")
		db, err := sqlstore.Open(ctx, "sqlite", "file:"+path+tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var raw string
		err = db.Raw("SELECT CAST(? AS TEXT)", at).Scan(&raw).Error
		closeDB(db)
		if err != nil || raw != tc.want {
			t.Errorf("DSN query %q: time stored as %q, %v; want %q", tc.query, raw, err, tc.want)
		}
	}
}

// Several handles opening one new database file at the same moment (as
// several processes starting together do) all open it: switching a new
// file to WAL takes an exclusive lock, and SQLite may report "database is
// locked" at once to the others instead of calling their busy handler
// (SQLite manual, "sqlite3_busy_handler()": the handler is not called when
// that could deadlock). Each round counts the handles that failed.
func TestSQLiteConcurrentOpenNewFile(t *testing.T) {
	ctx := context.Background()
	const rounds, handles = 30, 6
	failed := 0
	for r := 0; r < rounds; r++ {
		path := filepath.Join(t.TempDir(), "new.db")
		errs := make(chan error, handles)
		start := make(chan struct{})
		for h := 0; h < handles; h++ {
			go func() {
				<-start
				db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(path))
				if err == nil {
					var mode string
					err = db.Raw("PRAGMA journal_mode").Scan(&mode).Error
					if err == nil && mode != "wal" {
						err = errors.New("journal_mode " + mode + ", want wal")
					}
					closeDB(db)
				}
				errs <- err
			}()
		}
		close(start)
		for h := 0; h < handles; h++ {
			if err := <-errs; err != nil {
				failed++
				if failed <= 3 {
					t.Errorf("round %d: %v", r, err)
				}
			}
		}
	}
	t.Logf("%d rounds × %d handles: %d opens failed", rounds, handles, failed)
}
