package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// checkHandle refuses, with an error wrapping [dao.ErrInvalidArgument]
// that names the DSN parameter to add, a handle whose connections would
// break the store later:
//
//   - MySQL and MariaDB: one query reads a DATETIME back (see
//     checkMySQLTimes);
//   - SQLite: one PRAGMA reads the busy timeout (see checkSQLiteBusy).
//
// Other dialects are not checked.
func checkHandle(ctx context.Context, db *gorm.DB, pool gorm.ConnPool, name dialects.Name, inTx bool) error {
	switch name {
	case dialects.MySQL, dialects.MariaDB:
		return checkMySQLTimes(ctx, pool)
	case dialects.SQLite:
		if inTx {
			// A store bound to a transaction runs on its one connection
			// and cannot claim.
			return nil
		}
		return checkSQLiteBusy(ctx, db, pool)
	}
	return nil
}

// checkMySQLTimes reads a DATETIME literal back and refuses the handle
// when the driver (go-sql-driver/mysql) returns it as text, which it does
// without the DSN parameter parseTime=true: Find and Get would then fail
// on the first time column. The value it returns otherwise is in the
// driver's loc (DSN parameter loc, default UTC), read this way from any
// handle, whether its dialector holds a DSN or was built over an existing
// pool.
//
// A DATETIME column keeps a wall-clock time without a zone (MySQL manual,
// "The DATE, DATETIME, and TIMESTAMP Types"): the driver writes each time
// as its wall-clock time in loc and reads it back in loc (driver README,
// "loc"). That is the same instant unless loc sets its clocks back at
// some point, such as when daylight saving time ends: the wall-clock
// times of the repeated hour then stand for two instants, and the earlier
// one reads back as the later, an hour off. A loc with such a change is
// refused; UTC (the default) or any zone without one is accepted.
func checkMySQLTimes(ctx context.Context, pool gorm.ConnPool) error {
	var v any
	if err := pool.QueryRowContext(ctx, "SELECT CAST('2000-01-01 00:00:00' AS DATETIME)").Scan(&v); err != nil {
		return fmt.Errorf("check time columns: %w", mapError(err))
	}
	t, ok := v.(time.Time)
	if !ok {
		return fmt.Errorf("%w: the MySQL handle returns DATETIME columns as %T, not time.Time: add parseTime=true to its DSN", dao.ErrInvalidArgument, v)
	}
	if _, back := repeatedWallClock(t.Location()); back {
		return fmt.Errorf("%w: the MySQL handle's time zone (DSN parameter loc=%s) sets its clocks back (daylight saving time or a historical change), so a time in a repeated hour written to a DATETIME column reads back as another instant: set loc=UTC in its DSN (or a zone that never sets its clocks back)",
			dao.ErrInvalidArgument, t.Location())
	}
	return nil
}

// repeatedWallClock reports whether loc ever changes to a smaller UTC
// offset, which makes some wall-clock times stand for two instants, and
// when it first does. It walks loc's zone changes from year 1 on (Go's
// zone data, time.Time.ZoneBounds); a zone with yearly daylight saving
// time has such a change within its first years of rules.
func repeatedWallClock(loc *time.Location) (time.Time, bool) {
	t := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).In(loc)
	for range 100_000 {
		_, end := t.ZoneBounds()
		if end.IsZero() {
			return time.Time{}, false
		}
		_, before := t.Zone()
		_, after := end.Zone()
		if after < before {
			return end, true
		}
		t = end
	}
	return time.Time{}, false
}

// checkSQLiteBusy refuses an SQLite handle whose connections have no busy
// timeout (PRAGMA busy_timeout is 0, read from one connection of the
// pool, which opens every connection with the same DSN) when its pool can
// hold more than one connection: concurrent claimers on it would fail
// with SQLITE_BUSY (dao.ErrBusy) at once instead of waiting for the write
// lock (SQLite manual, "PRAGMA busy_timeout"). A pool limited to one
// connection (sql.DB.SetMaxOpenConns(1)) is accepted: its callers wait
// for the connection instead. The driver github.com/ncruces/go-sqlite3
// sets a one-minute timeout when the DSN sets no PRAGMA, and none when it
// sets others without busy_timeout; [SQLiteDSN] sets 5 s.
func checkSQLiteBusy(ctx context.Context, db *gorm.DB, pool gorm.ConnPool) error {
	var ms int64
	if err := pool.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		return fmt.Errorf("check busy timeout: %w", mapError(err))
	}
	if ms > 0 {
		return nil
	}
	var sqlDB *sql.DB
	if p, ok := pool.(*sql.DB); ok {
		sqlDB = p
	} else if p, err := db.DB(); err == nil {
		sqlDB = p
	}
	if sqlDB != nil && sqlDB.Stats().MaxOpenConnections == 1 {
		return nil
	}
	return fmt.Errorf("%w: the SQLite handle's connections have no busy timeout and its pool holds several, so concurrent writers fail with SQLITE_BUSY at once: add _pragma=busy_timeout(5000) (milliseconds) as the first parameter of its DSN (sqlstore.SQLiteDSN does), or limit the pool to one connection", dao.ErrInvalidArgument)
}
