package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/claimstore/claimstore/dao"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	mssql "github.com/microsoft/go-mssqldb"
	"github.com/ncruces/go-sqlite3"
	"gorm.io/gorm"
)

// mapCtxError maps err like [mapError] and, when ctx has ended, makes the
// result wrap ctx.Err() too, so that errors.Is(err, context.Canceled) (or
// context.DeadlineExceeded) holds whatever words the driver used for the
// cancellation: pgx reports a closed connection or SQLSTATE 57014
// (query_canceled), go-sql-driver/mysql an invalid connection or, inside a
// transaction that database/sql rolled back on the cancellation,
// sql.ErrTxDone ("transaction has already been committed or rolled back"),
// the SQLite driver SQLITE_INTERRUPT ("interrupted (9)"). Any error that
// comes back once ctx has ended is reported as a context error: a caller
// whose context ended treats the call as cancelled and does not retry it
// (dao.IsRetryable is false). The sentinel and the native error stay
// reachable with errors.Is and errors.As. nil stays nil.
func mapCtxError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	err = mapError(err)
	if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// ctxErr is ctx.Err(), and context.DeadlineExceeded once ctx's deadline
// has passed even if ctx does not say so yet: a dialer or socket given
// that deadline can fail with its own timeout ("i/o timeout") a moment
// before the context's timer marks the context done, and that failure is
// the caller's deadline all the same.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// mapError is the one place where native errors of every supported driver
// become dao sentinels. The result wraps both the sentinel and the native
// error ("%w: %w"), so errors.Is(err, dao.ErrX) and errors.As(err,
// *pgconn.PgError and the like) both work. Errors that already carry a
// sentinel, context cancellations and deadlines, and errors no rule covers
// are returned unchanged. nil stays nil. Statements run with a context use
// [mapCtxError], which also keeps that context's end reachable.
//
// The rules:
//   - PostgreSQL (pgconn.PgError, "Appendix A. PostgreSQL Error Codes"):
//     23505 unique_violation -> ErrDuplicate; 40001 serialization_failure
//     and 40P01 deadlock_detected -> ErrConflict; 55P03 lock_not_available
//     (lock_timeout) and 57014 query_canceled (statement_timeout, or a
//     cancel request) -> ErrBusy; class 08 (connection exception), 57P01 admin_shutdown,
//     57P02 crash_shutdown and 57P03 cannot_connect_now -> ErrUnavailable;
//     pgconn.ConnectError -> ErrUnavailable.
//   - MySQL and MariaDB (mysql.MySQLError, "Server Error Message
//     Reference"): 1062 ER_DUP_ENTRY and 1586 ER_DUP_ENTRY_WITH_KEY_NAME ->
//     ErrDuplicate; 1213 ER_LOCK_DEADLOCK -> ErrConflict; 1205
//     ER_LOCK_WAIT_TIMEOUT (innodb_lock_wait_timeout), MariaDB's 1969
//     ER_STATEMENT_TIMEOUT (max_statement_time) and MySQL's 3024
//     ER_QUERY_TIMEOUT (max_execution_time) -> ErrBusy;
//     mysql.ErrInvalidConn -> ErrUnavailable.
//   - SQLite (sqlite3.Error of github.com/ncruces/go-sqlite3, "Result and
//     Error Codes"): SQLITE_BUSY and SQLITE_LOCKED with their extended
//     codes -> ErrBusy; SQLITE_CONSTRAINT_UNIQUE and
//     SQLITE_CONSTRAINT_PRIMARYKEY -> ErrDuplicate.
//   - SQL Server (mssql.Error, "Database engine events and errors"): 2627
//     (unique constraint) and 2601 (unique index) -> ErrDuplicate; 1205
//     (deadlock victim) -> ErrConflict.
//   - Any driver: a *net.OpError, ECONNREFUSED, ECONNRESET, EPIPE,
//     driver.ErrBadConn, sql.ErrConnDone, io.EOF and io.ErrUnexpectedEOF (a
//     connection closed under the driver) -> ErrUnavailable;
//     gorm.ErrDuplicatedKey -> ErrDuplicate; gorm.ErrRecordNotFound and
//     sql.ErrNoRows -> ErrNotFound.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || hasSentinel(err) {
		return err
	}
	if s := classify(err); s != nil {
		return fmt.Errorf("%w: %w", s, err)
	}
	return err
}

var sentinels = []error{
	dao.ErrNotFound, dao.ErrInvalidArgument, dao.ErrBusy, dao.ErrConflict,
	dao.ErrDuplicate, dao.ErrUnavailable, dao.ErrInTransaction,
}

func hasSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// classify returns the sentinel for err, or nil.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "23505":
			return dao.ErrDuplicate
		case code == "40001" || code == "40P01":
			return dao.ErrConflict
		case code == "55P03", code == "57014":
			return dao.ErrBusy
		case len(code) == 5 && code[:2] == "08", code == "57P01", code == "57P02", code == "57P03":
			return dao.ErrUnavailable
		}
		return nil
	}
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1062, 1586:
			return dao.ErrDuplicate
		case 1213:
			return dao.ErrConflict
		case 1205, 1969, 3024:
			return dao.ErrBusy
		}
		return nil
	}
	// The driver returns a *sqlite3.Error, or a bare result code when
	// SQLite gave no message; both convert to the extended code, whose
	// Code() is the primary code (https://www.sqlite.org/rescode.html).
	var liteCode sqlite3.ExtendedErrorCode
	if errors.As(err, &liteCode) {
		switch {
		case liteCode.Code() == sqlite3.BUSY, liteCode.Code() == sqlite3.LOCKED:
			return dao.ErrBusy
		case liteCode == sqlite3.CONSTRAINT_UNIQUE, liteCode == sqlite3.CONSTRAINT_PRIMARYKEY:
			return dao.ErrDuplicate
		}
		return nil
	}
	if n, ok := mssqlNumber(err); ok {
		switch n {
		case 2627, 2601:
			return dao.ErrDuplicate
		case 1205:
			return dao.ErrConflict
		}
		return nil
	}
	var connErr *pgconn.ConnectError
	var opErr *net.OpError
	switch {
	case errors.As(err, &connErr), errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, gomysql.ErrInvalidConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return dao.ErrUnavailable
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return dao.ErrDuplicate
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, sql.ErrNoRows):
		return dao.ErrNotFound
	}
	return nil
}

// mssqlNumber returns the error number of a SQL Server error, which the
// driver returns by value or by pointer.
func mssqlNumber(err error) (int32, bool) {
	var v mssql.Error
	if errors.As(err, &v) {
		return v.Number, true
	}
	var p *mssql.Error
	if errors.As(err, &p) && p != nil {
		return p.Number, true
	}
	return 0, false
}
