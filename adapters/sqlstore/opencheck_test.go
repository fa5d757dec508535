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
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/ncruces/go-sqlite3/gormlite"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

// mysqlDSNWith returns the MySQL test DSN with parseTime and loc replaced.
func mysqlDSNWith(t *testing.T, parseTime bool, loc string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testdb.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = parseTime
	if cfg.Loc, err = time.LoadLocation(loc); err != nil {
		t.Fatal(err)
	}
	return cfg.FormatDSN()
}

// openMySQL opens dsn the way a program does on its own: by DSN through
// gorm.io/driver/mysql, or (overPool) over a *sql.DB it opened, so that
// the dialector holds no DSN.
func openMySQL(t *testing.T, dsn string, overPool bool) *gorm.DB {
	t.Helper()
	d := gormmysql.Open(dsn)
	if overPool {
		sqlDB, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		d = gormmysql.New(gormmysql.Config{Conn: sqlDB})
	}
	db, err := gorm.Open(d, testdb.Config())
	if err != nil {
		t.Fatal(err)
	}
	return testdb.CloseAtCleanup(t, db)
}

// wantRefused checks that err wraps dao.ErrInvalidArgument and names the
// DSN parameter to add.
func wantRefused(t *testing.T, what string, err error, param string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), param) {
		t.Errorf("%s: New = %v; want ErrInvalidArgument naming %s", what, err, param)
	}
}

// A MySQL or MariaDB handle without parseTime=true returns DATETIME
// columns as text, which Find cannot scan into time.Time: New refuses it,
// whether the handle was opened by DSN or over a pool the dialector knows
// no DSN of.
func TestNewRefusesMySQLWithoutParseTime(t *testing.T) {
	testdb.MySQL(t) // skip or fail like every MySQL test when unreachable
	for _, overPool := range []bool{false, true} {
		db := openMySQL(t, mysqlDSNWith(t, false, "UTC"), overPool)
		// the failure New prevents
		var at time.Time
		if err := db.Raw("SELECT CAST('2000-01-01 00:00:00' AS DATETIME)").Row().Scan(&at); err == nil {
			t.Fatalf("overPool=%v: a DATETIME scanned into time.Time without parseTime", overPool)
		}
		_, err := sqlstore.New[job](db, sqlstore.WithTable("never_created"))
		wantRefused(t, "without parseTime", err, "parseTime=true")
		_, err = sqlstore.New[job](openMySQL(t, mysqlDSNWith(t, true, "UTC"), overPool), sqlstore.WithTable("never_created"))
		if err != nil {
			t.Errorf("overPool=%v: New with parseTime=true: %v", overPool, err)
		}
	}
	// Open adds parseTime=true to a DSN that lacks it; one that sets
	// parseTime=false keeps it and is refused.
	ctx := context.Background()
	bare := testdb.MySQLDSN()
	if i := strings.IndexByte(bare, '?'); i >= 0 {
		bare = bare[:i]
	}
	for dsn, ok := range map[string]bool{bare: true, bare + "?parseTime=false": false} {
		db, err := sqlstore.Open(ctx, "mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		testdb.CloseAtCleanup(t, db)
		_, err = sqlstore.New[job](db, sqlstore.WithTable("never_created"))
		if ok && err != nil {
			t.Errorf("Open(%q): New = %v; want accepted", dsn, err)
		}
		if !ok {
			wantRefused(t, "Open("+dsn+")", err, "parseTime=true")
		}
	}
}

// A DATETIME column keeps the wall-clock time the driver writes in its
// loc, and the driver reads it back in the same loc. In a zone whose
// offset goes back (daylight saving time ends), two instants an hour
// apart share one wall-clock time and the earlier one reads back an hour
// later. New refuses such a loc and accepts one with a fixed offset, in
// which every instant round-trips through Create, Find, Update and Claim.
func TestNewRefusesMySQLLocThatRepeatsWallClock(t *testing.T) {
	testdb.MySQL(t)
	// 00:30 and 01:30 UTC on 27 Oct 2024 are both 02:30 in Berlin.
	early := time.Date(2024, 10, 27, 0, 30, 0, 0, time.UTC)
	late := early.Add(time.Hour)
	roundTrip := func(db *gorm.DB, in time.Time) time.Time {
		t.Helper()
		var out time.Time
		if err := db.Raw("SELECT CAST(? AS DATETIME(6))", in).Row().Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	berlin := openMySQL(t, mysqlDSNWith(t, true, "Europe/Berlin"), false)
	if got := roundTrip(berlin, early); got.Equal(early) {
		t.Fatalf("loc=Europe/Berlin: %v read back as the same instant; the refusal below would be needless", early)
	}
	for _, overPool := range []bool{false, true} {
		_, err := sqlstore.New[job](openMySQL(t, mysqlDSNWith(t, true, "Europe/Berlin"), overPool), sqlstore.WithTable("never_created"))
		wantRefused(t, "loc=Europe/Berlin", err, "loc=UTC")
	}

	for _, loc := range []string{"UTC", "Etc/GMT-2"} { // Etc/GMT-2 is UTC+2 all year
		db := openMySQL(t, mysqlDSNWith(t, true, loc), false)
		s := newStore(t, db)
		ctx := context.Background()
		a, b := early, late
		items := []*job{{Name: "a", Status: "pending", LockedUntil: &a}, {Name: "b", Status: "pending", LockedUntil: &b}}
		if err := s.Create(ctx, items...); err != nil {
			t.Fatalf("loc=%s: %v", loc, err)
		}
		for i, want := range []time.Time{early, late} {
			got, err := s.Get(ctx, items[i].ID)
			if err != nil || got.LockedUntil == nil || !got.LockedUntil.Equal(want) {
				t.Errorf("loc=%s: Get(%d).LockedUntil = %v, %v; want %v", loc, items[i].ID, got.LockedUntil, err, want)
			}
		}
		if n, err := s.Count(ctx, dao.Lt("locked_until", late)); err != nil || n != 1 {
			t.Errorf("loc=%s: Count(locked_until < %v) = %d, %v; want 1", loc, late, n, err)
		}
		if _, err := s.Update(ctx, dao.Eq("id", items[0].ID), dao.Set{"locked_until": late}); err != nil {
			t.Fatal(err)
		}
		claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("locked_until", late), Set: dao.Set{"status": "running", "locked_until": early}, Limit: 5})
		if err != nil || len(claimed) != 2 {
			t.Fatalf("loc=%s: Claim = %d rows, %v; want both", loc, len(claimed), err)
		}
		for _, id := range []int64{items[0].ID, items[1].ID} {
			got, err := s.Get(ctx, id)
			if err != nil || got.LockedUntil == nil || !got.LockedUntil.Equal(early) {
				t.Errorf("loc=%s: after Claim, Get(%d).LockedUntil = %v, %v; want %v", loc, id, got.LockedUntil, err, early)
			}
		}
	}
}

// openSQLite opens dsn with gormlite as a program does on its own.
func openSQLite(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(gormlite.Open(dsn), testdb.Config())
	if err != nil {
		t.Fatal(err)
	}
	return testdb.CloseAtCleanup(t, db)
}

func busyTimeout(t *testing.T, db *gorm.DB) int {
	t.Helper()
	var ms int
	if err := db.Raw("PRAGMA busy_timeout").Row().Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// An SQLite DSN that sets a PRAGMA but no busy timeout leaves the
// driver's connections with none, so a second writer fails with
// SQLITE_BUSY at once: New refuses such a handle when its pool can hold
// several connections, and accepts it when the pool is limited to one
// (writers then wait for the connection in the pool). A DSN without any
// PRAGMA gets the driver's one-minute timeout and is accepted.
func TestNewRefusesSQLiteWithoutBusyTimeout(t *testing.T) {
	dir := t.TempDir()
	noTimeout := "file:" + filepath.Join(dir, "a.db") + "?_pragma=journal_mode(WAL)"
	db := openSQLite(t, noTimeout)
	if ms := busyTimeout(t, db); ms != 0 {
		t.Fatalf("busy_timeout = %d ms; the case needs a handle without one", ms)
	}
	_, err := sqlstore.New[job](db)
	wantRefused(t, "busy_timeout 0", err, "_pragma=busy_timeout")

	zero := openSQLite(t, "file:"+filepath.Join(dir, "b.db")+"?_pragma=busy_timeout(0)")
	_, err = sqlstore.New[job](zero)
	wantRefused(t, "busy_timeout(0)", err, "_pragma=busy_timeout")

	one := openSQLite(t, noTimeout)
	sqlDB, err := one.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)
	if _, err := sqlstore.New[job](one); err != nil {
		t.Errorf("busy_timeout 0 on a one-connection pool: New = %v; want accepted", err)
	}
	plain := openSQLite(t, "file:"+filepath.Join(dir, "c.db"))
	if ms := busyTimeout(t, plain); ms != 60000 {
		t.Errorf("DSN without PRAGMAs: busy_timeout = %d ms; want the driver's 60000", ms)
	}
	if _, err := sqlstore.New[job](plain); err != nil {
		t.Errorf("DSN without PRAGMAs: New = %v; want accepted", err)
	}
	if _, err := sqlstore.New[job](testdb.SQLite(t)); err != nil {
		t.Errorf("SQLiteDSN: New = %v; want accepted", err)
	}
}

// Open adds a 5 s busy timeout, as the first PRAGMA, to a "file:"
// DSN that sets other PRAGMAs and no busy timeout; an explicit
// busy_timeout is kept (and a zero one refused by New).
func TestSQLiteOpenAddsBusyTimeout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlstore.Open(ctx, "sqlite", "file:"+filepath.Join(dir, "a.db")+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	var mode string
	if err := db.Raw("PRAGMA journal_mode").Row().Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want the DSN's wal", mode, err)
	}
	if ms := busyTimeout(t, db); ms != 5000 {
		t.Errorf("busy_timeout = %d ms; want 5000 added by Open", ms)
	}
	if _, err := sqlstore.New[job](db); err != nil {
		t.Errorf("New = %v; want accepted", err)
	}

	own, err := sqlstore.Open(ctx, "sqlite", "file:"+filepath.Join(dir, "b.db")+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, own)
	if ms := busyTimeout(t, own); ms != 0 {
		t.Errorf("explicit busy_timeout(0) = %d ms after Open; want it kept", ms)
	}
	_, err = sqlstore.New[job](own)
	wantRefused(t, "Open with busy_timeout(0)", err, "_pragma=busy_timeout")

	for in, want := range map[string]string{
		"file:a.db?_pragma=journal_mode(WAL)":                         "file:a.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)",
		"file:a.db?mode=rw&_pragma=foreign_keys(1)":                   "file:a.db?_pragma=busy_timeout(5000)&mode=rw&_pragma=foreign_keys(1)",
		"file:a.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(9)": "file:a.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(9)",
		"file:a.db?_pragma=BUSY_TIMEOUT(9)":                           "file:a.db?_pragma=BUSY_TIMEOUT(9)",
		"file:a.db":                                                   "file:a.db",
		"file:a.db?_txlock=immediate":                                 "file:a.db?_txlock=immediate",
		"a.db":                                                        "a.db",
		":memory:":                                                    ":memory:",
	} {
		if got := sqlstore.SQLiteBusyTimeoutDefault(in); got != want {
			t.Errorf("SQLiteBusyTimeoutDefault(%q) = %q; want %q", in, got, want)
		}
	}
}

// The zones New refuses as a MySQL loc are those that ever set their
// clocks back: daylight saving time, or a one-off change (India's zone
// has some before 1946). Zones with one offset for all time are accepted.
func TestRepeatedWallClock(t *testing.T) {
	for name, want := range map[string]bool{
		"UTC":              false,
		"Etc/GMT-2":        false,
		"Etc/GMT+11":       false,
		"Europe/Berlin":    true,
		"America/New_York": true,
		"Asia/Kolkata":     true,
	} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		at, back := sqlstore.RepeatedWallClock(loc)
		if back != want {
			t.Errorf("%s: clocks set back = %v (%v); want %v", name, back, at, want)
		}
		if back {
			// the first repeated wall-clock time stands for two instants
			before := at.Add(-time.Nanosecond)
			_, offBefore := before.Zone()
			_, offAfter := at.Zone()
			if offAfter >= offBefore {
				t.Errorf("%s: offset %d s before %v, %d s after; want smaller after", name, offBefore, at, offAfter)
			}
		}
	}
	if _, back := sqlstore.RepeatedWallClock(time.FixedZone("UTC+5:30", 5*3600+1800)); back {
		t.Errorf("a fixed zone reported as setting its clocks back")
	}
}

// TestOpenKeepsIdleConnections: a pool opened by Open keeps the
// connections a burst used (up to OpenIdleConns) instead of closing all
// but database/sql's 2, and a lower SetMaxOpenConns lowers the idle limit
// with it.
func TestOpenKeepsIdleConnections(t *testing.T) {
	testdb.Postgres(t) // skips, or fails when required, if the server is down
	ctx := context.Background()
	burst := func(sqlDB *sql.DB, n int) {
		t.Helper()
		conns := make([]*sql.Conn, n)
		for i := range conns {
			c, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = c
		}
		for _, c := range conns {
			c.Close()
		}
	}
	for _, c := range []struct {
		maxOpen, burst, wantIdle int
	}{{0, 10, 10}, {0, sqlstore.OpenIdleConns + 4, sqlstore.OpenIdleConns}, {6, 6, 6}} {
		db, err := sqlstore.Open(ctx, "postgres", testdb.PostgresDSN())
		if err != nil {
			t.Fatal(err)
		}
		sqlDB, err := testdb.CloseAtCleanup(t, db).DB()
		if err != nil {
			t.Fatal(err)
		}
		if c.maxOpen > 0 {
			sqlDB.SetMaxOpenConns(c.maxOpen)
		}
		burst(sqlDB, c.burst)
		st := sqlDB.Stats()
		if st.Idle != c.wantIdle || int(st.MaxIdleClosed) != c.burst-c.wantIdle {
			t.Errorf("max open %d, burst of %d: %d idle, %d closed for want of idle slots; want %d idle",
				c.maxOpen, c.burst, st.Idle, st.MaxIdleClosed, c.wantIdle)
		}
	}
}
