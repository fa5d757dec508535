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
	"gorm.io/gorm"
)

// MapError gives an error from the caller's own use of a store's GORM
// handle — a transaction (db.Transaction, Begin, Commit), a raw statement
// — the dao sentinel that the stores give the same native error, so that
// [dao.IsRetryable] and errors.Is work on it too: a refused or lost
// connection (the old primary of a failover, a restarting server) is
// dao.ErrUnavailable, a unique violation dao.ErrDuplicate, a deadlock or
// serialization failure dao.ErrConflict, a lock wait past its limit
// dao.ErrBusy, by the rules of the backend packages linked in (import
// adapters/postgres and the others). The result wraps the sentinel and
// err; err comes back unchanged when it already carries a sentinel, is a
// context cancellation or deadline, or no rule covers it. nil stays nil.
func MapError(err error) error { return mapError(err) }

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
// The rules of each driver are its backend package's (see [Backend]);
// these hold for every driver: a *net.OpError, ECONNREFUSED, ECONNRESET,
// EPIPE, driver.ErrBadConn, sql.ErrConnDone, io.EOF and io.ErrUnexpectedEOF
// (a connection closed under the driver) -> ErrUnavailable;
// gorm.ErrDuplicatedKey -> ErrDuplicate; gorm.ErrRecordNotFound and
// sql.ErrNoRows -> ErrNotFound.
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

// classify returns the sentinel for err, or nil: the registered backends'
// rules first, then those that hold for every driver.
func classify(err error) error {
	for _, c := range classifiers() {
		if s := c(err); s != nil {
			return s
		}
	}
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return dao.ErrUnavailable
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return dao.ErrDuplicate
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, sql.ErrNoRows):
		return dao.ErrNotFound
	}
	return nil
}
