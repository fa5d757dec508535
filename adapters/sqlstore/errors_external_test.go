package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"

	"github.com/claimstore/claimstore/dao"
	"github.com/jackc/pgx/v5/pgconn"
	mssql "github.com/microsoft/go-mssqldb"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// No SQL Server runs in this environment, so its rules are checked on
// error values of the driver's own type; the other drivers' rules are
// checked against real servers in errors_test.go.
func TestMapErrorSQLServerAndGeneric(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{mssql.Error{Number: 2627, Message: "Violation of PRIMARY KEY constraint"}, dao.ErrDuplicate},
		{mssql.Error{Number: 2601, Message: "Cannot insert duplicate key row"}, dao.ErrDuplicate},
		{mssql.Error{Number: 1205, Message: "chosen as the deadlock victim"}, dao.ErrConflict},
		{&mssql.Error{Number: 1205}, dao.ErrConflict},
		{mssql.Error{Number: 17809, Message: "the maximum number of user connections has already been reached"}, dao.ErrUnavailable},
		{mssql.Error{Number: 10928}, dao.ErrUnavailable},
		{mssql.Error{Number: 40501}, dao.ErrUnavailable},
		{fmt.Errorf("exec: %w", driver.ErrBadConn), dao.ErrUnavailable},
		{sql.ErrConnDone, dao.ErrUnavailable},
		{io.ErrUnexpectedEOF, dao.ErrUnavailable},
		{gorm.ErrRecordNotFound, dao.ErrNotFound},
		{sql.ErrNoRows, dao.ErrNotFound},
	}
	for _, c := range cases {
		got := sqlstore.MapError(c.err)
		// mssql.Error holds a slice, so errors.Is cannot compare it; the
		// errors.As check below covers it.
		native := !reflect.TypeOf(c.err).Comparable() || errors.Is(got, c.err)
		if !errors.Is(got, c.want) || !native {
			t.Errorf("sqlstore.MapError(%v) = %v; want %v wrapping the native error", c.err, got, c.want)
		}
	}
	var me mssql.Error
	if !errors.As(sqlstore.MapError(mssql.Error{Number: 2627}), &me) || me.Number != 2627 {
		t.Error("mssql.Error not reachable with errors.As")
	}
	for _, err := range []error{nil, context.Canceled, fmt.Errorf("x: %w", context.DeadlineExceeded), errors.New("other")} {
		if got := sqlstore.MapError(err); got != err {
			t.Errorf("sqlstore.MapError(%v) = %v; want it unchanged", err, got)
		}
	}
	already := fmt.Errorf("%w: %w", dao.ErrBusy, io.EOF)
	if got := sqlstore.MapError(already); got != already {
		t.Errorf("an error with a sentinel was mapped again: %v", got)
	}
}

// A transaction the caller runs on a store's handle — the transactional
// outbox's own transaction, for one — returns the driver's error from
// BEGIN or COMMIT as it is; sqlstore.MapError gives it the sentinel the
// stores would, so that dao.IsRetryable tells a server that went away (a
// PostgreSQL failover: the old primary refuses connections) from a bad
// request. Nothing listens on 127.0.0.1:1.
func TestMapErrorOfCallerTransaction(t *testing.T) {
	db, err := gorm.Open(gormpg.Open("postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"), sqlstore.Config())
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	ran := false
	err = db.WithContext(context.Background()).Transaction(func(*gorm.DB) error { ran = true; return nil })
	if err == nil || ran {
		t.Fatalf("transaction on a closed port: err %v, body ran %v; want BEGIN to fail", err, ran)
	}
	if dao.IsRetryable(err) {
		t.Fatalf("the raw error is already retryable (%v): the case below checks nothing", err)
	}
	if got := sqlstore.MapError(err); !dao.IsRetryable(got) || !errors.Is(got, dao.ErrUnavailable) || !errors.Is(got, err) {
		t.Errorf("sqlstore.MapError(%v) = %v; want dao.ErrUnavailable wrapping it", err, got)
	}
}

// pgx reports a statement on a connection it has already closed (its
// socket went away under an earlier statement: a primary killed during a
// failover) as pgconn.ErrConnClosed, wrapped; nothing was sent, so a retry
// on a new connection is safe. A writer's COMMIT after its INSERT lost the
// connection failed so in the failover test (tools/internal/hatest).
func TestMapErrorPgxConnClosed(t *testing.T) {
	err := fmt.Errorf("commit: %w", pgconn.ErrConnClosed)
	if got := sqlstore.MapError(err); !errors.Is(got, dao.ErrUnavailable) || !errors.Is(got, pgconn.ErrConnClosed) || !dao.IsRetryable(got) {
		t.Errorf("sqlstore.MapError(%v) = %v; want dao.ErrUnavailable wrapping it", err, got)
	}
}
