package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	gomysql "github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// cancelAfterExecKey is a context key: its value is a cancel function
// that the hooked MySQL connection calls once an UPDATE has returned from
// the server, as if the caller's context ended just then, between the
// UPDATE and the COMMIT of its transaction.
type cancelAfterExecKey struct{}

// afterExecConnector opens go-sql-driver/mysql connections wrapped in
// afterExecConn.
type afterExecConnector struct{ inner driver.Connector }

func (c afterExecConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return afterExecConn{conn}, nil
}

func (c afterExecConnector) Driver() driver.Driver { return c.inner.Driver() }

// afterExecConn passes every call to the driver's connection; ExecContext
// of an UPDATE then calls the context's cancelAfterExecKey function, if
// any, and gives database/sql a moment to roll the transaction back as it
// does when a transaction's context ends.
type afterExecConn struct{ driver.Conn }

func (c afterExecConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if f, ok := ctx.Value(cancelAfterExecKey{}).(context.CancelFunc); ok && err == nil && strings.HasPrefix(query, "UPDATE") {
		f()
		time.Sleep(100 * time.Millisecond)
	}
	return res, err
}

func (c afterExecConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c afterExecConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c afterExecConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c afterExecConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c afterExecConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c afterExecConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

// openAfterExecMySQL opens the MySQL test database through
// afterExecConnector, with a GORM handle over the pool (so the store
// reads no DSN: UPDATE counts changed rows, and Update runs its locking
// count and UPDATE in a transaction), closed at cleanup.
func openAfterExecMySQL(t *testing.T) *gorm.DB {
	t.Helper()
	testdb.MySQL(t) // skips, or fails where required, without a server
	cfg, err := gomysql.ParseDSN(testdb.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = true
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := sql.OpenDB(afterExecConnector{connector})
	t.Cleanup(func() { sqlDB.Close() })
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// UpdateKeys and Update run, on MySQL and MariaDB, a transaction of a
// locking read and an UPDATE (Update only when the connection reports
// changed rows). A caller's context that ends after the UPDATE and before
// the COMMIT makes database/sql roll the transaction back; the error then
// wraps ctx.Err() (here context.Canceled) and says what happened, rather
// than database/sql's bare "transaction has already been committed or
// rolled back", and nothing is written. Before, both returned that bare
// error.
func TestMySQLWriteTransactionContextEndsBeforeCommit(t *testing.T) {
	for _, op := range []string{"update_keys", "update"} {
		t.Run(op, func(t *testing.T) {
			s := newStore(t, openAfterExecMySQL(t))
			all := seedOrdered(t, s, 3)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx = context.WithValue(ctx, cancelAfterExecKey{}, cancel)
			var err error
			if op == "update_keys" {
				_, err = s.UpdateKeys(ctx, dao.Eq("id", all[0]), dao.Set{"status": "done"})
			} else {
				_, err = s.Update(ctx, dao.Eq("id", all[0]), dao.Set{"status": "done"})
			}
			t.Logf("%s: %v", op, err)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error = %v, want it to wrap context.Canceled", err)
			}
			if n, err := s.Count(context.Background(), dao.Eq("status", "done")); err != nil || n != 0 {
				t.Errorf("%d rows done (%v) after a rolled-back transaction, want 0", n, err)
			}
		})
	}
}
