package sqlstore_test

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
)

// TestSQLiteDefaults: a path and a "file:" URI get the settings of
// SQLiteDSN they do not set; the ones they set win.
func TestSQLiteDefaults(t *testing.T) {
	layout := "&_timefmt=" + url.QueryEscape(sqlstore.SQLiteTimeLayout)
	all := "_pragma=busy_timeout%285000%29&_pragma=journal_mode%28WAL%29&_pragma=synchronous%28NORMAL%29" + layout + "&_txlock=immediate"
	for _, c := range []struct{ in, want string }{
		{"app.db", "file:app.db?" + all},
		{"/var/lib/x?y#z%.db", "file:/var/lib/x%3fy%23z%25.db?" + all},
		{"file:/tmp/c.db", "file:/tmp/c.db?" + all},
		{"file:/tmp/c.db?_pragma=journal_mode(delete)&_txlock=deferred",
			"file:/tmp/c.db?_pragma=busy_timeout%285000%29&_pragma=journal_mode%28delete%29&_pragma=synchronous%28NORMAL%29" + layout + "&_txlock=deferred"},
		{"file:/tmp/c.db?_pragma=busy_timeout(0)&_timefmt=sqlite",
			"file:/tmp/c.db?_pragma=busy_timeout%280%29&_pragma=journal_mode%28WAL%29&_pragma=synchronous%28NORMAL%29&_timefmt=sqlite&_txlock=immediate"},
		{"file:/tmp/c.db?_pragma=key('k')&_pragma=foreign_keys(1)",
			"file:/tmp/c.db?_pragma=key%28%27k%27%29&_pragma=busy_timeout%285000%29&_pragma=foreign_keys%281%29&_pragma=journal_mode%28WAL%29&_pragma=synchronous%28NORMAL%29" + layout + "&_txlock=immediate"},
		{"file:mem?mode=memory&cache=shared", "file:mem?_pragma=busy_timeout%285000%29" + layout + "&_txlock=immediate&cache=shared&mode=memory"},
		{":memory:", ":memory:"},
		{"", ""},
	} {
		if got := sqlstore.SQLiteDefaults(c.in); got != c.want {
			t.Errorf("SQLiteDefaults(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestSQLiteOpenPathAndURI: Open of a plain path and of a bare "file:" URI
// gives every connection WAL, the 5 s busy timeout and synchronous NORMAL,
// as SQLiteDSN does; a PRAGMA the URI sets itself wins.
func TestSQLiteOpenPathAndURI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		dsn, mode string
		timeout   int
	}{
		{filepath.Join(dir, "plain.db"), "wal", 5000},
		{"file:" + filepath.Join(dir, "uri.db"), "wal", 5000},
		{"file:" + filepath.Join(dir, "own.db") + "?_pragma=busy_timeout(250)&_pragma=journal_mode(delete)", "delete", 250},
	} {
		db, err := sqlstore.Open(ctx, "sqlite", c.dsn)
		if err != nil {
			t.Fatalf("%s: %v", c.dsn, err)
		}
		defer closeDB(db)
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // two connections: the settings are per connection
			conn, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var mode string
			var timeout, syncMode int
			if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != c.mode {
				t.Errorf("%s, conn %d: journal_mode = %q, %v; want %s", c.dsn, i, mode, err, c.mode)
			}
			if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout != c.timeout {
				t.Errorf("%s, conn %d: busy_timeout = %d, %v; want %d", c.dsn, i, timeout, err, c.timeout)
			}
			if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 1 {
				t.Errorf("%s, conn %d: synchronous = %d, %v; want 1 (NORMAL)", c.dsn, i, syncMode, err)
			}
		}
	}
}
