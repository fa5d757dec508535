package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/retry"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Config returns the GORM configuration [Open] uses: GORM's logger
// silenced (the store returns every error instead of printing it) and no
// default transaction around single writes, since one statement is atomic
// on its own and BEGIN/COMMIT would add two round trips to every write.
func Config() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
	}
}

// Open opens a GORM handle on dsn for backend ("postgres", "mysql",
// "mariadb", "sqlite" or "sqlserver"; see dialects.Parse for aliases),
// with the dialector of the backend's package, which must be linked into
// the program (see [New]); pings the server with ctx; and returns the
// handle with [Config]. Each backend package documents its DSN. It is
// the one way to open a handle by name: the backend packages register
// their dialectors when imported and have no functions of their own. On
// SQLite GORM's timestamps are taken in UTC, an in-memory database
// (":memory:" or mode=memory) is limited to one open connection, since
// each connection would see its own database, and a file to
// [OpenSQLiteConns] (two), for the reasons given there. The pool keeps up to
// [OpenIdleConns] idle connections (database/sql keeps 2), each closed
// after [OpenConnMaxIdleTime] unused: workers, relays and log readers use
// several connections at once, and with 2 idle slots every burst closes
// connections and opens new ones, a server process each on PostgreSQL.
// A later sql.DB.SetMaxOpenConns below it lowers the idle limit to match;
// set your own with SetMaxIdleConns and SetConnMaxIdleTime. A
// SQLite ping refused as busy is tried again for about 5 s, so that
// several processes may open one new file at the same moment.
//
// Errors: an unknown or unlinked backend or a malformed DSN is
// [dao.ErrInvalidArgument]; a server that cannot be reached is
// [dao.ErrUnavailable]; other failures are mapped like every database
// error. On error nothing stays open.
func Open(ctx context.Context, backend string, dsn string) (*gorm.DB, error) {
	name, err := dialects.Parse(backend)
	if err != nil {
		return nil, fmt.Errorf("claimstore: open: %w", err)
	}
	b, ok := backendOf(name)
	if !ok {
		return nil, fmt.Errorf("claimstore: open: %w: no backend package is linked for %s: import %s", dao.ErrInvalidArgument, name, backendPackage(name))
	}
	d, err := b.Dialector(dsn)
	if err != nil {
		return nil, fmt.Errorf("claimstore: open %s: %w", name, err)
	}
	cfg := Config()
	if name == dialects.SQLite {
		// SQLite stores times as text: keep GORM's timestamps in UTC.
		cfg.NowFunc = func() time.Time { return time.Now().UTC() }
	}
	db, err := gorm.Open(d, cfg)
	if err != nil {
		return nil, fmt.Errorf("claimstore: open %s: %w", name, mapError(err))
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("claimstore: open %s: %w", name, mapError(err))
	}
	sqlDB.SetMaxIdleConns(OpenIdleConns)
	sqlDB.SetConnMaxIdleTime(OpenConnMaxIdleTime)
	switch {
	case name == dialects.SQLite && (strings.Contains(dsn, ":memory:") || strings.Contains(dsn, "mode=memory")):
		sqlDB.SetMaxOpenConns(1) // each connection would see its own database
	case name == dialects.SQLite:
		sqlDB.SetMaxOpenConns(OpenSQLiteConns) // one writer at a time
	}
	ping := func() (struct{}, error) { return struct{}{}, mapError(sqlDB.PingContext(ctx)) }
	tries := uint(1)
	if name == dialects.SQLite {
		// A new connection sets the DSN's PRAGMAs. Switching a new file
		// to WAL takes an exclusive lock, and SQLite may report "database
		// is locked" to another connection at once instead of calling its
		// busy handler, when waiting could deadlock (SQLite manual,
		// "sqlite3_busy_handler()"); so several processes opening one new
		// file together retry that refusal, about 5 s in all.
		tries = sqliteOpenTries
	}
	if _, err := retry.While(ctx, tries, 500*time.Millisecond, isBusy, ping); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("claimstore: open %s: ping: %w", name, err)
	}
	return db, nil
}

// The idle connections of a pool opened by [Open]: at most OpenIdleConns
// are kept, each closed after OpenConnMaxIdleTime (5 minutes) unused.
const (
	OpenIdleConns       = 16
	OpenConnMaxIdleTime = 5 * time.Minute
)

// OpenSQLiteConns is the most open connections of a pool that [Open]
// opens on a SQLite file: 2. SQLite lets one writer at a time into a
// database file, also in WAL mode (SQLite documentation, "Write-Ahead
// Logging", section "Concurrency": "there can only be one writer at a
// time"). The connections that wait for the write lock wait in the busy
// handler, which polls the lock (SQLite documentation,
// "sqlite3_busy_timeout()"): it is not a queue, a waiter can lose the
// lock to later comers again and again, and each poll costs CPU. With
// many connections in one process, a worker's claims, outcome writes,
// lease renewals and maintenance all poll, and under load a write can
// wait past its timeout (an outcome not written runs its job again after
// the lease). With two, the process's statements wait in order in the
// pool of database/sql and at most two of them contend for the lock.
// Not one: every transaction of a pool from Open takes the write lock
// at BEGIN (_txlock=immediate), so while one connection holds a
// transaction the other is free or waits for the lock at most the busy
// timeout; a statement run on the pool while the same goroutine holds a
// transaction gets that connection, at once or when a writer waiting on
// it gives up after the busy timeout (a read runs; a write is refused as
// busy, as it would be from any connection), and a try-lock
// (coord.WithLock) tried while another of the same process holds it is
// refused instead of waiting for a connection that only the holder's
// end would free. An in-memory database gets one
// connection (each would see its own database). Raise it with
// sql.DB.SetMaxOpenConns on the handle's DB() when a program needs more
// concurrent readers.
const OpenSQLiteConns = 2

// sqliteOpenTries bounds the pings [Open] makes while a SQLite database
// is busy: with waits of 20 ms doubling to 500 ms, about 5 s in all.
const sqliteOpenTries = 14

func isBusy(err error) bool { return errors.Is(err, dao.ErrBusy) }
