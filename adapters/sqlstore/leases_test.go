package sqlstore_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/driver/sqlserver"
	"gorm.io/gorm"
)

// mssqlLeases returns a lease store over a GORM SQL Server handle whose
// connection is a sqlmock matching statements exactly.
func mssqlLeases(t *testing.T) (*sqlstore.Leases, sqlmock.Sqlmock) {
	t.Helper()
	conn, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	db, err := gorm.Open(sqlserver.New(sqlserver.Config{Conn: conn}), sqlstore.Config())
	if err != nil {
		t.Fatal(err)
	}
	l, err := sqlstore.NewLeases(db, "")
	if err != nil {
		t.Fatalf("NewLeases on SQL Server: %v", err)
	}
	return l, mock
}

// TestSQLServerLeaseStatements sends the golden MERGE … OUTPUT of an
// acquisition, the read that follows when OUTPUT reports no row, and a
// release, and checks what the store makes of the answers.
func TestSQLServerLeaseStatements(t *testing.T) {
	l, mock := mssqlLeases(t)
	r, err := dialects.NewRenderer(dialects.SQLServer)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cols := []string{"leader_id", "term", "elected_at", "expires_at", "now"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	us := func(d time.Duration) int64 { return now.Add(d).UnixMicro() }

	acq, err := r.LeaseAcquire(dialects.DefaultLeaseTable, "cron", "host-1", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^MERGE \[claimstore_leaders\] WITH \(HOLDLOCK\) .* OUTPUT .*;$`).MatchString(acq.SQL) {
		t.Fatalf("acquire statement is not a MERGE … WITH (HOLDLOCK) … OUTPUT: %s", acq.SQL)
	}
	// Won: OUTPUT reports the written row.
	mock.ExpectQuery(acq.SQL).WithArgs("cron", "host-1", int64(3000), int64(3000)).
		WillReturnRows(sqlmock.NewRows(cols).AddRow("host-1", int64(4), us(-time.Second), us(3*time.Second), us(0)))
	lease, held, err := l.AcquireLease(ctx, "cron", "host-1", 3*time.Second)
	if err != nil || !held || lease.Term != 4 || !lease.ExpiresAt.Equal(now.Add(3*time.Second)) || !lease.Now.Equal(now) {
		t.Fatalf("AcquireLease = %+v, %v, %v; want held in term 4, expiring 3s after now", lease, held, err)
	}
	// Lost: no OUTPUT row, so the store reads the lease of the holder.
	get, _ := r.LeaseGet(dialects.DefaultLeaseTable, "cron")
	acq2, _ := r.LeaseAcquire(dialects.DefaultLeaseTable, "cron", "host-2", 3*time.Second)
	mock.ExpectQuery(acq2.SQL).WithArgs("cron", "host-2", int64(3000), int64(3000)).WillReturnRows(sqlmock.NewRows(cols))
	mock.ExpectQuery(get.SQL).WithArgs("cron").
		WillReturnRows(sqlmock.NewRows(cols).AddRow("host-1", int64(4), us(-time.Second), us(2*time.Second), us(0)))
	lease, held, err = l.AcquireLease(ctx, "cron", "host-2", 3*time.Second)
	if err != nil || held || lease.Holder != "host-1" || lease.Term != 4 {
		t.Fatalf("AcquireLease by another = %+v, %v, %v; want host-1's lease, not held", lease, held, err)
	}
	rel, _ := r.LeaseRelease(dialects.DefaultLeaseTable, "cron", "host-1", 4)
	mock.ExpectExec(rel.SQL).WithArgs("cron", "host-1", int64(4)).WillReturnResult(sqlmock.NewResult(0, 1))
	if ok, err := l.ReleaseLease(ctx, "cron", "host-1", 4); err != nil || !ok {
		t.Fatalf("ReleaseLease = %v, %v; want true", ok, err)
	}
	// Bad input sends nothing (the mock expects nothing more).
	if _, _, err := l.AcquireLease(ctx, "", "host-1", time.Second); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("AcquireLease with an empty name: err = %v, want ErrInvalidArgument", err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
