package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	gomysql "github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

// threadIDs caches the server thread id of each driver connection that
// interrupter has readied, so that CONNECTION_ID() is asked once per
// connection. It holds at most maxThreadIDs entries and starts afresh
// when full (entries of closed connections are never read again: a key
// keeps its connection from being freed, so a new connection never takes
// its place).
var threadIDs = struct {
	sync.Mutex
	m map[any]uint64
}{m: map[any]uint64{}}

const maxThreadIDs = 4096

// threadID returns the thread id of the server session of conn: from the
// cache, or by SELECT CONNECTION_ID() on conn with ctx (MySQL manual,
// "Information Functions"; MariaDB, CONNECTION_ID).
func threadID(ctx context.Context, conn *sql.Conn) (uint64, error) {
	var key any
	if err := conn.Raw(func(dc any) error { key = dc; return nil }); err != nil {
		return 0, err
	}
	threadIDs.Lock()
	id, ok := threadIDs.m[key]
	threadIDs.Unlock()
	if ok {
		return id, nil
	}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return 0, fmt.Errorf("mysql: CONNECTION_ID: %w", err)
	}
	threadIDs.Lock()
	if len(threadIDs.m) >= maxThreadIDs {
		clear(threadIDs.m)
	}
	threadIDs.m[key] = id
	threadIDs.Unlock()
	return id, nil
}

// interrupter returns the [sqlstore.Interrupt] of conn: KILL QUERY of the
// server thread that serves conn (MySQL manual, "KILL Statement"; MariaDB,
// KILL), sent from another connection. The statement then running on conn
// fails with error 1317 ER_QUERY_INTERRUPTED and is rolled back (conn
// stays open), or completes if the request came too late. The thread id
// is read once per connection (threadID), on conn with ctx. The KILL runs
// on a connection opened for it with db's DSN (a new session, so a pool
// whose every connection waits behind locks does not delay it), or, when
// db's dialector has no DSN (a handle over an existing pool), on a
// connection of db's pool. The user needs the right to kill its own
// threads, which every user has.
func interrupter(ctx context.Context, db *gorm.DB, conn *sql.Conn) (sqlstore.Interrupt, error) {
	id, err := threadID(ctx, conn)
	if err != nil {
		return nil, err
	}
	// id is the server's own integer; KILL takes no placeholder.
	kill := "KILL QUERY " + strconv.FormatUint(id, 10)
	cfg := dsnConfig(db)
	return func(ctx context.Context) error {
		if cfg != nil {
			return killOn(ctx, cfg, kill)
		}
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		_, err = sqlDB.ExecContext(ctx, kill)
		return err
	}, nil
}

// dsnConfig returns the parsed DSN of db's MySQL dialector, or nil.
func dsnConfig(db *gorm.DB) *gomysql.Config {
	switch d := db.Dialector.(type) {
	case *gormmysql.Dialector:
		return d.DSNConfig
	case gormmysql.Dialector:
		return d.DSNConfig
	}
	return nil
}

// killOn runs the statement kill on a new connection with cfg and closes
// it.
func killOn(ctx context.Context, cfg *gomysql.Config, kill string) error {
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	dc, err := c.Connect(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	ex, ok := dc.(driver.ExecerContext)
	if !ok {
		return errors.New("mysql: the driver connection runs no statement")
	}
	_, err = ex.ExecContext(ctx, kill, nil)
	return err
}
