package roundtrip

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/ncruces/go-sqlite3/gormlite"
	"github.com/ngrok/sqlmw"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlserver"
	"gorm.io/gorm"

	// Registers the "sqlserver" database/sql driver.
	_ "github.com/microsoft/go-mssqldb"
	// Registers the "sqlite3" database/sql driver.
	_ "github.com/ncruces/go-sqlite3/driver"
)

// Counter counts database round trips. One count is one request the
// application sends through database/sql and waits on, one of:
//
//   - a statement run on a connection (ExecContext, QueryContext);
//   - a statement prepared (PrepareContext; not for SQLite, see below),
//     and each execution of a prepared statement (Stmt.ExecContext,
//     Stmt.QueryContext);
//   - BeginTx, Commit and Rollback.
//
// Not counted: Ping; closing a prepared statement (MySQL's
// COM_STMT_CLOSE expects no reply); fetching further result rows of a
// query already counted; a driver call that answers driver.ErrSkip (the
// driver declined, database/sql falls back to prepare and execute, and
// those are counted); and what a driver does on its own behind
// database/sql: pgx pings a pooled connection that has been idle for more
// than a second before reusing it (stdlib Conn.ResetSession), and pgx's
// statement cache prepares a statement text the first time a connection
// runs it. Measure steady state, on warmed connections, to count what a
// call costs. For SQLite, which runs in the process, a count is one
// statement run (or BeginTx, Commit, Rollback), the unit a claim's promise
// of 1 + N statements is stated in; preparing is not counted there: the
// SQLite driver prepares in the process every query, and every statement
// with arguments (it answers driver.ErrSkip to a direct run), before
// running it, so a prepare is not a request of its own.
//
// The zero Counter is ready to use and safe for concurrent use.
type Counter struct {
	n atomic.Int64

	// While record is set (Record), each count's statement text (or
	// BEGIN, COMMIT, ROLLBACK, PREPARE and its text) is kept in log, for
	// a test to print when a count is not the one it expected. A count
	// takes mu only then, so that counting the statements of a benchmark
	// adds no lock to them.
	record atomic.Bool
	mu     sync.Mutex
	log    []string
}

// Count returns the number of round trips counted so far.
func (c *Counter) Count() int64 { return c.n.Load() }

// Reset sets the count to zero and returns the count it had; it empties
// the log of recorded statements.
func (c *Counter) Reset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = nil
	return c.n.Swap(0)
}

// Record turns the recording of what is counted on or off.
func (c *Counter) Record(on bool) { c.record.Store(on) }

// Recorded returns what was counted since the last Reset while recording
// was on: a statement's text, or BEGIN, COMMIT, ROLLBACK or PREPARE and
// its text, in order.
func (c *Counter) Recorded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// count adds one round trip, what, to c.
func (c *Counter) count(what string) {
	if !c.record.Load() {
		c.n.Add(1)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Add(1)
	c.log = append(c.log, what)
}

// interceptor is the sqlmw hook that counts into a Counter.
type interceptor struct {
	sqlmw.NullInterceptor
	c *Counter
	// inProcess: the database runs in the process (SQLite); preparing a
	// statement is not counted.
	inProcess bool
}

func (i interceptor) add(what string, err error) {
	if !errors.Is(err, driver.ErrSkip) {
		i.c.count(what)
	}
}

func (i interceptor) ConnBeginTx(ctx context.Context, conn driver.ConnBeginTx, opts driver.TxOptions) (context.Context, driver.Tx, error) {
	i.add("BEGIN", nil)
	return i.NullInterceptor.ConnBeginTx(ctx, conn, opts)
}

func (i interceptor) ConnPrepareContext(ctx context.Context, conn driver.ConnPrepareContext, query string) (context.Context, driver.Stmt, error) {
	ctx, st, err := i.NullInterceptor.ConnPrepareContext(ctx, conn, query)
	if !i.inProcess {
		i.add("PREPARE "+query, err)
	}
	return ctx, st, err
}

func (i interceptor) ConnExecContext(ctx context.Context, conn driver.ExecerContext, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := i.NullInterceptor.ConnExecContext(ctx, conn, query, args)
	i.add(query, err)
	return res, err
}

func (i interceptor) ConnQueryContext(ctx context.Context, conn driver.QueryerContext, query string, args []driver.NamedValue) (context.Context, driver.Rows, error) {
	ctx, rows, err := i.NullInterceptor.ConnQueryContext(ctx, conn, query, args)
	i.add(query, err)
	return ctx, rows, err
}

func (i interceptor) StmtExecContext(ctx context.Context, st driver.StmtExecContext, query string, args []driver.NamedValue) (driver.Result, error) {
	i.add(query, nil)
	return i.NullInterceptor.StmtExecContext(ctx, st, query, args)
}

func (i interceptor) StmtQueryContext(ctx context.Context, st driver.StmtQueryContext, query string, args []driver.NamedValue) (context.Context, driver.Rows, error) {
	i.add(query, nil)
	return i.NullInterceptor.StmtQueryContext(ctx, st, query, args)
}

func (i interceptor) TxCommit(ctx context.Context, tx driver.Tx) error {
	i.add("COMMIT", nil)
	return i.NullInterceptor.TxCommit(ctx, tx)
}

func (i interceptor) TxRollback(ctx context.Context, tx driver.Tx) error {
	i.add("ROLLBACK", nil)
	return i.NullInterceptor.TxRollback(ctx, tx)
}

// pgxCounter counts the round trips of a PostgreSQL connection with pgx's
// own tracing hooks (pgx.QueryTracer, pgx.PrepareTracer), which see every
// statement the connection sends, whether it came through database/sql or
// was run with pgx on the connection database/sql holds ((*sql.Conn).Raw,
// as sqlstore's native claim path does). A driver wrapper such as sqlmw
// would hide the pgx connection from such code, so the PostgreSQL counter
// sits inside the driver instead. What it counts is what [Counter] lists:
// through pgx's database/sql driver, BeginTx, Commit and Rollback are one
// statement each, a prepared statement's execution is one query; a
// prepare is counted unless the statement was already prepared on the
// connection or the prepare is the statement cache's own (the cache's
// statement names start with "stmtcache_").
type pgxCounter struct{ c *Counter }

func (p pgxCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	p.c.count(data.SQL)
	return ctx
}

func (pgxCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// prepareKey carries the start data (name, text) of the prepare traced.
type prepareKey struct{}

func (pgxCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	return context.WithValue(ctx, prepareKey{}, data)
}

func (p pgxCounter) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, data pgx.TracePrepareEndData) {
	start, _ := ctx.Value(prepareKey{}).(pgx.TracePrepareStartData)
	if !data.AlreadyPrepared && !strings.HasPrefix(start.Name, "stmtcache_") {
		p.c.count("PREPARE " + start.SQL)
	}
}

// Driver returns d wrapped with github.com/ngrok/sqlmw so that every round
// trip (see [Counter]) through it adds one to c.
func Driver(d driver.Driver, c *Counter) driver.Driver {
	return sqlmw.Driver(d, interceptor{c: c})
}

// connectorDriver presents a ready connector as a driver, so that sqlmw,
// which wraps drivers, can wrap it.
type connectorDriver struct{ c driver.Connector }

func (d connectorDriver) Open(string) (driver.Conn, error) { return d.c.Connect(context.Background()) }

func (d connectorDriver) OpenConnector(string) (driver.Connector, error) { return d.c, nil }

// Connector returns conn wrapped so that every round trip through the
// connections it makes adds one to c. Pass the result to sql.OpenDB.
func Connector(conn driver.Connector, c *Counter) driver.Connector {
	wrapped, err := Driver(connectorDriver{conn}, c).(driver.DriverContext).OpenConnector("")
	if err != nil {
		// connectorDriver.OpenConnector cannot fail.
		panic(err)
	}
	return wrapped
}

// registered returns the database/sql driver registered under name.
func registered(name string) (driver.Driver, error) {
	db, err := sql.Open(name, "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Driver(), nil
}

// Open opens a *sql.DB for backend ("postgres", "mysql", "mariadb",
// "sqlite" or "sqlserver") on dsn whose round trips count into c:
//
//   - postgres: pgx (pgx.ParseConfig, stdlib.OpenDB), counted with pgx's
//     tracing hooks inside the driver rather than by a wrapping driver,
//     so that code running pgx natively on a database/sql connection is
//     counted too (see pgxCounter);
//   - mysql, mariadb: go-sql-driver (mysql.ParseDSN, mysql.NewConnector),
//     dsn used as given;
//   - sqlite: the pure-Go driver registered by
//     github.com/ncruces/go-sqlite3/driver (as "sqlite3");
//   - sqlserver: the driver registered by github.com/microsoft/go-mssqldb.
//
// It does not connect; the first call does. Errors: an unknown backend or
// a DSN the driver cannot parse.
func Open(backend, dsn string, c *Counter) (*sql.DB, error) {
	backend = strings.ToLower(backend)
	switch backend {
	case "postgres":
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("roundtrip: postgres dsn: %w", err)
		}
		cfg.Tracer = pgxCounter{c}
		return stdlib.OpenDB(*cfg), nil
	case "mysql", "mariadb":
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("roundtrip: mysql dsn: %w", err)
		}
		conn, err := gomysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("roundtrip: mysql connector: %w", err)
		}
		return sql.OpenDB(Connector(conn, c)), nil
	case "sqlite", "sqlserver":
		name := "sqlite3" // github.com/ncruces/go-sqlite3/driver
		if backend == "sqlserver" {
			name = "sqlserver"
		}
		d, err := registered(name)
		if err != nil {
			return nil, fmt.Errorf("roundtrip: %s driver: %w", backend, err)
		}
		conn, err := sqlmw.Driver(d, interceptor{c: c, inProcess: backend == "sqlite"}).(driver.DriverContext).OpenConnector(dsn)
		if err != nil {
			return nil, fmt.Errorf("roundtrip: %s dsn: %w", backend, err)
		}
		return sql.OpenDB(conn), nil
	}
	return nil, fmt.Errorf("roundtrip: unknown backend %q", backend)
}

// Gorm returns a GORM handle for backend over the existing sqlDB (as
// returned by [Open]), with GORM configuration cfg (nil: GORM's defaults).
// The GORM dialectors accept an existing connection pool
// (postgres.Config.Conn, mysql.Config.Conn, gormlite.OpenDB,
// sqlserver.Config.Conn). Opening for MySQL and MariaDB runs one
// SELECT VERSION(), which the counter sees. Closing the returned handle's
// pool closes sqlDB.
func Gorm(backend string, sqlDB *sql.DB, cfg *gorm.Config) (*gorm.DB, error) {
	return gormOver(backend, sqlDB, nil, cfg)
}

// gormOver is Gorm with, for MySQL and MariaDB, the parsed DSN handed to
// the dialector (nil when unknown), so code that reads the dialector's
// DSN settings (such as clientFoundRows) sees them.
func gormOver(backend string, sqlDB *sql.DB, mycfg *gomysql.Config, cfg *gorm.Config) (*gorm.DB, error) {
	if cfg == nil {
		cfg = &gorm.Config{}
	}
	var d gorm.Dialector
	switch strings.ToLower(backend) {
	case "postgres":
		d = postgres.New(postgres.Config{Conn: sqlDB})
	case "mysql", "mariadb":
		d = mysql.New(mysql.Config{Conn: sqlDB, DSNConfig: mycfg})
	case "sqlite":
		d = gormlite.OpenDB(sqlDB)
	case "sqlserver":
		d = sqlserver.New(sqlserver.Config{Conn: sqlDB})
	default:
		return nil, fmt.Errorf("roundtrip: unknown backend %q", backend)
	}
	db, err := gorm.Open(d, cfg)
	if err != nil {
		return nil, fmt.Errorf("roundtrip: gorm open %s: %w", backend, err)
	}
	return db, nil
}

// OpenGorm opens a counting *sql.DB with [Open], puts GORM over it with
// [Gorm] (for MySQL and MariaDB with the parsed DSN in the dialector's
// DSNConfig, as gorm.io/driver/mysql.Open would set it), and pings the
// server with ctx (the ping is not counted). On error the pool is closed.
func OpenGorm(ctx context.Context, backend, dsn string, c *Counter, cfg *gorm.Config) (*gorm.DB, error) {
	sqlDB, err := Open(backend, dsn, c)
	if err != nil {
		return nil, err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("roundtrip: ping %s: %w", backend, err)
	}
	var mycfg *gomysql.Config
	if b := strings.ToLower(backend); b == "mysql" || b == "mariadb" {
		mycfg, _ = gomysql.ParseDSN(dsn) // Open has parsed it once already
	}
	db, err := gormOver(backend, sqlDB, mycfg, cfg)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}
