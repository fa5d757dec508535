package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	mysqlbackend "github.com/claimstore/claimstore/adapters/mysql"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/ncruces/go-sqlite3"
	"gorm.io/gorm"
)

// A unique violation provoked on the real server is ErrDuplicate, not
// retryable, with the driver's error reachable.
func TestDuplicateIsMapped(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		if err := s.Create(ctx, &job{Name: "dup", Status: "pending"}); err != nil {
			t.Fatal(err)
		}
		err := s.Create(ctx, &job{Name: "dup", Status: "pending"})
		if !errors.Is(err, dao.ErrDuplicate) || dao.IsRetryable(err) {
			t.Fatalf("second insert: %v; want ErrDuplicate, not retryable", err)
		}
		switch s.Dialect() {
		case "postgres":
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "23505" {
				t.Fatalf("native error not reachable: %v", err)
			}
		case "mysql", "mariadb":
			var me *gomysql.MySQLError
			if !errors.As(err, &me) || me.Number != 1062 {
				t.Fatalf("native error not reachable: %v", err)
			}
		case "sqlite":
			if !errors.Is(err, sqlite3.CONSTRAINT_UNIQUE) {
				t.Fatalf("native error not reachable: %v", err)
			}
		}
		// an Update that collides is mapped the same way
		if err := s.Create(ctx, &job{Name: "other", Status: "pending"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, dao.Eq("name", "other"), dao.Set{"name": "dup"}); !errors.Is(err, dao.ErrDuplicate) {
			t.Fatalf("colliding update: %v; want ErrDuplicate", err)
		}
	})
}

// Another connection holding BEGIN IMMEDIATE keeps every writer out; with
// a short busy timeout a write fails with ErrBusy, and a claim returns
// ErrBusy having claimed nothing.
func TestSQLiteBusy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSNTimeout(path, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(db)
	s, err := sqlstore.New[job](db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	seed(t, s, 3)

	holder, err := sql.Open("sqlite3", sqlstore.SQLiteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	_, err = s.Update(ctx, dao.Criteria{}, dao.Set{"status": "x"})
	if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) {
		t.Fatalf("update under a held write lock: %v; want ErrBusy, retryable", err)
	}
	if !errors.Is(err, sqlite3.BUSY) {
		t.Fatalf("native SQLITE_BUSY not reachable: %v", err)
	}
	rows, err := s.Claim(ctx, claimReq("w", 3))
	if !errors.Is(err, dao.ErrBusy) || len(rows) != 0 {
		t.Fatalf("claim under a held write lock: %v, %v; want no rows and ErrBusy", ids(rows), err)
	}

	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(ctx, dao.Eq("status", "pending")); err != nil || n != 3 {
		t.Fatalf("after release: %d pending, %v; want 3", n, err)
	}
	if rows, err := s.Claim(ctx, claimReq("w", 3)); err != nil || len(rows) != 3 {
		t.Fatalf("claim after release: %v, %v", ids(rows), err)
	}
}

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return strconv.Itoa(port)
}

func TestUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	port := closedPort(t)
	for backend, dsn := range map[string]string{
		"postgres": "postgres://postgres@127.0.0.1:" + port + "/test?sslmode=disable&connect_timeout=5",
		"mysql":    "root@tcp(127.0.0.1:" + port + ")/test?timeout=5s",
	} {
		db, err := sqlstore.Open(ctx, backend, dsn)
		if err == nil {
			closeDB(db)
			t.Fatalf("%s: Open on a closed port succeeded", backend)
		}
		if !errors.Is(err, dao.ErrUnavailable) || !dao.IsRetryable(err) {
			t.Fatalf("%s: %v; want ErrUnavailable, retryable", backend, err)
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Errorf("%s: *net.OpError not reachable in %v", backend, err)
		}
	}
}

// A connection the server terminates under an open transaction is
// ErrUnavailable on the next statement.
func TestPostgresTerminatedConnection(t *testing.T) {
	ctx := context.Background()
	admin := testdb.Postgres(t)
	db := testdb.Postgres(t)
	s := newStore(t, db)
	seed(t, s, 1)
	err := db.Transaction(func(tx *gorm.DB) error {
		var pid int
		if err := tx.Raw("SELECT pg_backend_pid()").Scan(&pid).Error; err != nil {
			return err
		}
		if err := admin.Exec("SELECT pg_terminate_backend(?)", pid).Error; err != nil {
			return err
		}
		_, err := s.WithTx(tx).Count(ctx, dao.Criteria{})
		return err
	})
	if !errors.Is(err, dao.ErrUnavailable) || !dao.IsRetryable(err) {
		t.Fatalf("statement on a terminated connection: %v; want ErrUnavailable", err)
	}
}

// A concurrent update seen by a REPEATABLE READ transaction is a
// serialization failure (SQLSTATE 40001): ErrConflict.
func TestPostgresSerializationFailure(t *testing.T) {
	ctx := context.Background()
	db := testdb.Postgres(t)
	s := newStore(t, db)
	items := seed(t, s, 1)
	err := db.Transaction(func(tx *gorm.DB) error {
		ts := s.WithTx(tx)
		if _, err := ts.Get(ctx, items[0].ID); err != nil { // takes the snapshot
			return err
		}
		if _, err := s.Update(ctx, dao.Eq("id", items[0].ID), dao.Set{"status": "moved"}); err != nil {
			return err
		}
		_, err := ts.Update(ctx, dao.Eq("id", items[0].ID), dao.Set{"status": "mine"})
		return err
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if !errors.Is(err, dao.ErrConflict) || !dao.IsRetryable(err) {
		t.Fatalf("%v; want ErrConflict", err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "40001" {
		t.Fatalf("native 40001 not reachable: %v", err)
	}
}

// A row lock held past innodb_lock_wait_timeout is error 1205:
// ErrBusy, the store's outcome of a lock wait past its limit.
func TestMySQLLockWaitTimeout(t *testing.T) {
	ctx := context.Background()
	db := testdb.MySQL(t)
	s := newStore(t, db)
	items := seed(t, s, 1)
	holder, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	hold, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, "UPDATE `"+s.TableName()+"` SET status = 'held' WHERE id = ?", items[0].ID); err != nil {
		t.Fatal(err)
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET SESSION innodb_lock_wait_timeout = 1").Error; err != nil {
			return err
		}
		_, err := s.WithTx(tx).Update(ctx, dao.Eq("id", items[0].ID), dao.Set{"status": "mine"})
		return err
	})
	if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) {
		t.Fatalf("%v; want ErrBusy", err)
	}
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 {
		t.Fatalf("native 1205 not reachable: %v", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	if _, err := sqlstore.Open(ctx, "oracle", "x"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("unknown backend: %v", err)
	}
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "a b?#.db")))
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.Raw("PRAGMA journal_mode").Scan(&mode).Error; err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var timeout int
	if err := db.Raw("PRAGMA busy_timeout").Scan(&timeout).Error; err != nil || timeout != 5000 {
		t.Errorf("busy_timeout = %d, %v; want 5000", timeout, err)
	}
	closeDB(db)

	// MySQL through Open: parseTime is added, so times scan into time.Time.
	testdb.MySQL(t) // skip or fail like every MySQL test when unreachable
	dsn := testdb.MySQLDSN()
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		dsn = dsn[:i]
	}
	my, err := sqlstore.Open(ctx, "mariadb", dsn)
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup, not a defer: newStore's cleanup drops the table, which
	// needs the pool open, and cleanups run after defers, last first.
	t.Cleanup(func() { closeDB(my) })
	s := newStore(t, my)
	lease := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	it := &job{Name: "t", Status: "pending", LockedUntil: &lease}
	if err := s.Create(ctx, it); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, it.ID)
	if err != nil || got.LockedUntil == nil || !got.LockedUntil.Equal(lease) {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

func TestMySQLDSN(t *testing.T) {
	for in, want := range map[string]string{
		"root@tcp(h:3306)/db":                                          "root@tcp(h:3306)/db?parseTime=true&interpolateParams=true&clientFoundRows=true",
		"root@tcp(h:3306)/db?loc=UTC":                                  "root@tcp(h:3306)/db?loc=UTC&parseTime=true&interpolateParams=true&clientFoundRows=true",
		"u:p?w@tcp(h)/db?parseTime=false":                              "u:p?w@tcp(h)/db?parseTime=false&interpolateParams=true&clientFoundRows=true",
		"root@tcp(h)/db?interpolateParams=false&clientFoundRows=false": "root@tcp(h)/db?interpolateParams=false&clientFoundRows=false&parseTime=true",
	} {
		got, err := mysqlbackend.DSN(in)
		if err != nil || got != want {
			t.Errorf("MySQLDSN(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := mysqlbackend.DSN("not a dsn"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("malformed DSN: %v", err)
	}
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
}
