package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

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
// is read once per connection (threadID), on conn with ctx.
//
// The KILL runs on a connection kept for it, outside db's pool, per DSN
// (see killerFor): opened here, at a claim, so that it exists when a
// later claim waits behind a lock while the account or the server has no
// connection left to give (1226 ER_USER_LIMIT_REACHED, 1040 "Too many
// connections") and a pool whose every connection waits behind locks
// does not delay it. When db's dialector has no DSN (a handle over an
// existing pool) the KILL runs on a connection of db's pool. The user
// needs the right to kill its own threads, which every user has.
func interrupter(ctx context.Context, db *gorm.DB, conn *sql.Conn) (sqlstore.Interrupt, error) {
	id, err := threadID(ctx, conn)
	if err != nil {
		return nil, err
	}
	// id is the server's own integer; KILL takes no placeholder.
	kill := "KILL QUERY " + strconv.FormatUint(id, 10)
	if cfg := dsnConfig(db); cfg != nil {
		k := killerFor(cfg)
		k.reserve(ctx)
		return func(ctx context.Context) error { return k.exec(ctx, kill) }, nil
	}
	return func(ctx context.Context) error {
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

// killerIdle is how long a killer keeps its connection after the last
// claim that readied it: a process that stops claiming (or a handle that
// was closed) does not hold a connection of its account for good.
const killerIdle = time.Minute

// killers holds one killer per DSN (gomysql.Config.FormatDSN), shared by
// every handle opened with it.
var killers sync.Map

// killer keeps one connection, outside any pool, that runs KILL QUERY for
// the claims of the handles of one DSN. Its connection is opened by
// reserve and closed after killerIdle without a reserve; one statement
// runs on it at a time (sem).
type killer struct {
	cfg  *gomysql.Config
	sem  chan struct{} // held while conn is used or replaced
	conn driver.Conn   // nil until opened, and after a failure or idleness
	used time.Time     // the last reserve, under sem
	idle *time.Timer   // closes conn killerIdle after the last reserve
}

// killerFor returns the killer of cfg's DSN, made on first use.
func killerFor(cfg *gomysql.Config) *killer {
	key := cfg.FormatDSN()
	if k, ok := killers.Load(key); ok {
		return k.(*killer)
	}
	k, _ := killers.LoadOrStore(key, &killer{cfg: cfg.Clone(), sem: make(chan struct{}, 1)})
	return k.(*killer)
}

// reserve opens the killer's connection if it has none, within ctx, and
// marks it used now. It never waits for a KILL under way (another claim's
// reserve or kill then stands for this one); a connection it cannot open
// is opened by the KILL that needs it.
func (k *killer) reserve(ctx context.Context) {
	select {
	case k.sem <- struct{}{}:
	default:
		return
	}
	defer func() { <-k.sem }()
	k.used = time.Now()
	if k.conn == nil {
		if c, err := connect(ctx, k.cfg); err == nil {
			k.conn = c
		}
	}
	if k.conn != nil && k.idle == nil {
		k.idle = time.AfterFunc(killerIdle, k.closeIdle)
	}
}

// closeIdle closes the connection unless a reserve came within
// killerIdle, and then checks again at the end of that reserve's
// killerIdle.
func (k *killer) closeIdle() {
	k.sem <- struct{}{}
	defer func() { <-k.sem }()
	if left := killerIdle - time.Since(k.used); left > 0 && k.conn != nil {
		k.idle.Reset(left)
		return
	}
	if k.conn != nil {
		k.conn.Close()
		k.conn = nil
	}
	k.idle = nil
}

// exec runs stmt on the killer's connection within ctx; when there is
// none, or it has failed (closed by the server's wait_timeout, a network
// error), on a new one, which is then kept.
func (k *killer) exec(ctx context.Context, stmt string) error {
	select {
	case k.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-k.sem }()
	if k.conn != nil {
		err := run(ctx, k.conn, stmt)
		if err == nil {
			return nil
		}
		var myErr *gomysql.MySQLError
		if errors.As(err, &myErr) {
			return err // the server answered: the connection works
		}
		k.conn.Close()
		k.conn = nil
	}
	c, err := connect(ctx, k.cfg)
	if err != nil {
		return err
	}
	if err := run(ctx, c, stmt); err != nil {
		c.Close()
		return err
	}
	k.conn = c
	if k.idle == nil {
		k.used = time.Now()
		k.idle = time.AfterFunc(killerIdle, k.closeIdle)
	}
	return nil
}

// connect opens a driver connection with cfg.
func connect(ctx context.Context, cfg *gomysql.Config) (driver.Conn, error) {
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return c.Connect(ctx)
}

// run runs stmt on dc.
func run(ctx context.Context, dc driver.Conn, stmt string) error {
	ex, ok := dc.(driver.ExecerContext)
	if !ok {
		return errors.New("mysql: the driver connection runs no statement")
	}
	_, err := ex.ExecContext(ctx, stmt, nil)
	return err
}
