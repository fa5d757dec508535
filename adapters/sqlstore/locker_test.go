package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/driver/sqlserver"
	"gorm.io/gorm"
)

func newLocker(t *testing.T, db *gorm.DB) *sqlstore.Locker {
	t.Helper()
	l, err := sqlstore.NewLocker(db)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLockClassIDsAgree(t *testing.T) {
	if coord.LockClassID != dialects.LockClassID {
		t.Errorf("coord.LockClassID = %d, dialects.LockClassID = %d", coord.LockClassID, dialects.LockClassID)
	}
}

func TestNewLockerRefuses(t *testing.T) {
	if _, err := sqlstore.NewLocker(nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil db: %v, want ErrInvalidArgument", err)
	}
	db := testdb.SQLite(t)
	s := confStore(t, db, testdb.Table(t, db, "lock"))
	tx := db.Begin()
	defer tx.Rollback()
	if _, err := sqlstore.NewLocker(tx); !errors.Is(err, dao.ErrInTransaction) {
		t.Errorf("db in a transaction: %v, want ErrInTransaction", err)
	}
	bound := s.WithTx(tx)
	if _, err := bound.TryLock(context.Background(), "k", func(context.Context, any) error { return nil }); !errors.Is(err, dao.ErrInTransaction) {
		t.Errorf("store bound to a transaction: %v, want ErrInTransaction", err)
	}
}

// usedLock returns IS_USED_LOCK of key's name from another connection:
// the id of the session holding it, or 0.
func usedLock(t *testing.T, db *gorm.DB, key string) int64 {
	t.Helper()
	var id *int64
	if err := db.Raw("SELECT IS_USED_LOCK(?)", dialects.LockName(key, 64)).Scan(&id).Error; err != nil {
		t.Fatal(err)
	}
	if id == nil {
		return 0
	}
	return *id
}

// TestMySQLLockReleasedBeforePool checks that no named lock stays on a
// pooled connection however the unit of work ends: returned, failed,
// panicked, cancelled.
func TestMySQLLockReleasedBeforePool(t *testing.T) {
	db := testdb.MySQL(t)
	l := newLocker(t, db)
	key := "release/" + strings.Repeat("x", 80) // past 64 bytes: the hashed name
	during := int64(0)
	check := func(name string, fn func(ctx context.Context, tx any) error, ctx context.Context) {
		t.Helper()
		func() {
			defer func() { recover() }()
			l.TryLock(ctx, key, fn)
		}()
		if id := usedLock(t, db, key); id != 0 {
			t.Errorf("%s: session %d still holds the lock after TryLock returned", name, id)
		}
	}
	check("returned", func(context.Context, any) error { during = usedLock(t, db, key); return nil }, context.Background())
	if during == 0 {
		t.Error("the lock was not held while the unit of work ran")
	}
	check("failed", func(context.Context, any) error { return errors.New("boom") }, context.Background())
	check("panicked", func(context.Context, any) error { panic("boom") }, context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	check("cancelled", func(ctx context.Context, tx any) error {
		cancel()
		<-ctx.Done()
		return tx.(*gorm.DB).Exec("SELECT 1").Error
	}, ctx)
	ran, err := l.TryLock(context.Background(), key, func(context.Context, any) error { return nil })
	if !ran || err != nil {
		t.Errorf("after every ending: %v, %v; want the lock free", ran, err)
	}
}

// TestSQLiteLockKeepsBusyTimeout checks that the attempt's busy timeout
// of 0 does not stay on the pooled connection, and that an attempt while
// another connection holds the write lock returns at once.
func TestSQLiteLockKeepsBusyTimeout(t *testing.T) {
	db, err := sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "l.db")))
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(1)
	l := newLocker(t, db)
	if ran, err := l.TryLock(context.Background(), "k", func(context.Context, any) error { return nil }); !ran || err != nil {
		t.Fatalf("TryLock = %v, %v", ran, err)
	}
	var ms int64
	if err := db.Raw("PRAGMA busy_timeout").Scan(&ms).Error; err != nil || ms != 5000 {
		t.Errorf("busy_timeout after the attempt = %d (%v), want the DSN's 5000", ms, err)
	}
	sqlDB.SetMaxOpenConns(2)
	release := testdb.HoldLock(t, db, "", 0)
	defer release()
	began := time.Now()
	ran, err := l.TryLock(context.Background(), "k", func(context.Context, any) error { return nil })
	if ran || err != nil {
		t.Errorf("attempt under another writer = %v, %v; want false, nil", ran, err)
	}
	t.Logf("attempt under another writer returned in %v (busy timeout of the DSN: 5 s)", time.Since(began))
}

// TestSQLServerTryLockStatements checks the statements of the SQL Server
// try-lock on sqlmock: BEGIN, sp_getapplock with the key's name, then
// COMMIT after the unit of work, ROLLBACK when the lock is not granted,
// and an error for a failure code.
func TestSQLServerTryLockStatements(t *testing.T) {
	conn, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	db, err := gorm.Open(sqlserver.New(sqlserver.Config{Conn: conn}), sqlstore.Config())
	if err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, db)
	r, _ := dialects.NewRenderer(dialects.SQLServer)
	st, err := r.TryLock("cycle")
	if err != nil {
		t.Fatal(err)
	}
	checkTSQL(t, st.SQL)
	result := func(v int64) *sqlmock.Rows { return sqlmock.NewRows([]string{"r"}).AddRow(v) }

	mock.ExpectBegin()
	mock.ExpectQuery(st.SQL).WithArgs("claimstore:cycle").WillReturnRows(result(1))
	mock.ExpectExec("UPDATE jobs SET n = n + 1").WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectCommit()
	ran, err := l.TryLock(context.Background(), "cycle", func(ctx context.Context, tx any) error {
		return tx.(*gorm.DB).Exec("UPDATE jobs SET n = n + 1").Error
	})
	if !ran || err != nil {
		t.Errorf("granted: %v, %v", ran, err)
	}

	mock.ExpectBegin()
	mock.ExpectQuery(st.SQL).WithArgs("claimstore:cycle").WillReturnRows(result(0))
	mock.ExpectRollback()
	if ran, err := l.TryLock(context.Background(), "cycle", func(context.Context, any) error {
		t.Error("fn ran without the lock")
		return nil
	}); ran || err != nil {
		t.Errorf("timed out (held by another): %v, %v; want false, nil", ran, err)
	}

	mock.ExpectBegin()
	mock.ExpectQuery(st.SQL).WithArgs("claimstore:cycle").WillReturnRows(result(-999))
	mock.ExpectRollback()
	if ran, err := l.TryLock(context.Background(), "cycle", func(context.Context, any) error { return nil }); ran || err == nil || !strings.Contains(err.Error(), "-999") {
		t.Errorf("failure code: %v, %v; want false and an error naming -999", ran, err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
