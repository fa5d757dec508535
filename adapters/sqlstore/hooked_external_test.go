package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlserver"

	"github.com/claimstore/claimstore/adapters/sqlstore"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	mssql "github.com/microsoft/go-mssqldb"
	"github.com/ncruces/go-sqlite3/gormlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// cancelAtSendKey is a context key: its value is a cancel function that
// the hooked SQLite driver calls just before it hands an UPDATE to the
// real driver, as if the caller's context ended at that very moment.
type cancelAtSendKey struct{}

// cancelAtSend returns ctx carrying cancel for the hooked driver of
// [openHookedSQLite].
func cancelAtSend(ctx context.Context, cancel context.CancelFunc) context.Context {
	return context.WithValue(ctx, cancelAtSendKey{}, cancel)
}

// hookedDriver wraps the SQLite driver: ExecContext of an UPDATE first
// calls the context's CancelAtSend function, if any, then waits delay,
// then hands the statement to the real driver with the context it got.
type hookedDriver struct {
	inner driver.Driver
	delay time.Duration
}

func (d hookedDriver) Open(name string) (driver.Conn, error) {
	c, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return hookedConn{Conn: c, delay: d.delay}, nil
}

type hookedConn struct {
	driver.Conn
	delay time.Duration
}

func (c hookedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if strings.HasPrefix(query, "UPDATE") {
		if f, ok := ctx.Value(cancelAtSendKey{}).(context.CancelFunc); ok {
			f()
		}
		time.Sleep(c.delay)
	}
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip // database/sql prepares the statement instead
	}
	return e.ExecContext(ctx, query, args)
}

func (c hookedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return q.QueryContext(ctx, query, args)
}

func (c hookedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c hookedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

type dsnConnector struct {
	dsn string
	d   driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }

// openHookedSQLite opens a fresh one-connection SQLite database file
// through hookedDriver (so every statement, the seeding INSERT included,
// runs on the same connection) with a GORM handle over it, closed at
// cleanup.
func openHookedSQLite(t testing.TB, delay time.Duration) *gorm.DB {
	t.Helper()
	probe, err := sql.Open("sqlite3", ":memory:") // github.com/ncruces/go-sqlite3/driver, linked by gormlite
	if err != nil {
		t.Fatal(err)
	}
	inner := probe.Driver()
	probe.Close()
	path := filepath.Join(t.TempDir(), "hooked.db")
	sqlDB := sql.OpenDB(dsnConnector{dsn: sqlstore.SQLiteDSN(path), d: hookedDriver{inner: inner, delay: delay}})
	sqlDB.SetMaxOpenConns(1)
	t.Cleanup(func() { sqlDB.Close() })
	db, err := gorm.Open(gormlite.OpenDB(sqlDB), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent), SkipDefaultTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// An UPDATE whose context ends before the driver returns has no known
// outcome, whatever the driver reports: a driver handed a context already
// done may skip the statement and report the count of the statement before
// it (glebarez go-sqlite v1.21 did), or run it.
func TestExecOutcomeDistrustsALateResult(t *testing.T) {
	db := openHookedSQLite(t, 200*time.Millisecond)
	pool := sqlstore.ConnPool(db)
	ctx := context.Background()
	if _, err := pool.ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.ExecContext(ctx, "INSERT INTO t (id, s) VALUES (1, 'a'), (2, 'a'), (3, 'a')"); err != nil {
		t.Fatal(err)
	}
	up := dialects.Statement{SQL: "UPDATE t SET s = 'b' WHERE id = ? AND s = 'a'", Args: []any{1}}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	n, known, err := sqlstore.ExecOutcome(tctx, pool, up)
	if known {
		t.Errorf("execOutcome after the context ended = %d rows, known, %v; want the outcome unknown", n, err)
	}
	// With a live context the outcome is known and the count is this
	// statement's own.
	up.Args = []any{2}
	n, known, err = sqlstore.ExecOutcome(ctx, pool, up)
	if !known || err != nil || n != 1 {
		t.Errorf("execOutcome = %d, %v, %v; want 1 row, known", n, known, err)
	}
	if !errors.Is(tctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the short context did not end: %v", tctx.Err())
	}
}

// The errors of a guarded update, which runs alone in its own
// transaction: a deadlock victim or a serialization failure is a lost race
// (no error), a lock wait past the limit is a retryable ErrBusy that keeps
// the native error, anything else is mapped as usual.
func TestClassifyClaimWrite(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		lost bool
		want error
	}{
		{"mysql deadlock", &gomysql.MySQLError{Number: 1213}, true, nil},
		{"postgres deadlock", &pgconn.PgError{Code: "40P01"}, true, nil},
		{"postgres serialization failure", &pgconn.PgError{Code: "40001"}, true, nil},
		{"sqlserver deadlock", mssql.Error{Number: 1205}, true, nil},
		{"mysql lock wait timeout", &gomysql.MySQLError{Number: 1205}, false, dao.ErrBusy},
		{"mariadb max_statement_time", &gomysql.MySQLError{Number: 1969}, false, dao.ErrBusy},
		{"postgres lock_timeout", &pgconn.PgError{Code: "55P03"}, false, dao.ErrBusy},
		{"postgres statement_timeout", &pgconn.PgError{Code: "57014"}, false, dao.ErrBusy},
		{"sqlserver lock timeout", mssql.Error{Number: 1222}, false, dao.ErrBusy},
		{"mysql duplicate", &gomysql.MySQLError{Number: 1062}, false, dao.ErrDuplicate},
		{"lost connection", gomysql.ErrInvalidConn, false, dao.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			lost, err := sqlstore.ClassifyClaimWrite(fmt.Errorf("exec: %w", c.err))
			if lost != c.lost {
				t.Errorf("lost = %v, want %v", lost, c.lost)
			}
			if c.want == nil {
				if err != nil {
					t.Errorf("error = %v, want nil", err)
				}
				return
			}
			native := errors.Is(err, c.err)
			if want, ok := sqlserver.ErrorNumber(c.err); ok { // mssql.Error is not comparable
				got, _ := sqlserver.ErrorNumber(err)
				native = got == want
			}
			if !errors.Is(err, c.want) || !native {
				t.Errorf("error = %v, want it to wrap %v and the native error", err, c.want)
			}
			if c.want == dao.ErrBusy && errors.Is(err, dao.ErrConflict) {
				t.Errorf("error = %v also wraps ErrConflict", err)
			}
		})
	}
}
