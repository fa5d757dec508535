package sqlstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// claimContext returns the context a claim statement runs on from the
// moment it is sent: it carries ctx's values but not its cancellation or
// deadline, so that the statement's outcome is learned however the
// caller's context ends, and it ends after the store's claim timeout
// ([WithClaimTimeout]). On SQLite it never ends: SQLite runs in-process, so
// a statement cannot hang on a network, and the busy timeout bounds its
// wait for the write lock; a context that never ends also leaves no
// driver a reason to skip or interrupt a statement, which would leave its
// outcome unknown (see errOf for the one exception). The caller must call
// the returned cancel function.
func (s *sqlDriver[T]) claimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithoutCancel(ctx)
	if s.dialect == dialects.SQLite {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.claimTimeout)
}

// lockWaitLimit is the server-side limit on a guarded update's wait for a
// row lock: the store's [WithLockWaitLimit], and no more than
// statementLimit.
func (s *sqlDriver[T]) lockWaitLimit() time.Duration {
	return min(s.lockWait, s.statementLimit())
}

// boundRead returns the candidate read st with the server-side limits the
// dialect can attach to one statement:
//
//   - MariaDB: SET STATEMENT max_statement_time=<statementLimit, in
//     seconds> FOR SELECT … (MariaDB manual, "SET STATEMENT" and
//     "max_statement_time"); no extra round trip.
//   - Elsewhere st is unchanged: a plain SELECT takes no row locks
//     (PostgreSQL, MySQL and MariaDB read a snapshot, SQLite in WAL mode
//     is not blocked by the writer), and the claim timeout bounds it.
func (s *sqlDriver[T]) boundRead(st dialects.Statement) dialects.Statement {
	if s.dialect == dialects.MariaDB {
		st.SQL = "SET STATEMENT max_statement_time=" + seconds(s.statementLimit()) + " FOR " + st.SQL
	}
	return st
}

// boundWrite returns the claim write st (the portable default's guarded
// update; on MariaDB also the fast path's locking read and UPDATE) with a
// server-side limit on its lock wait, set for that statement alone, with
// no extra round trip:
//
//   - PostgreSQL: the WHERE clause gains AND (SELECT set_config(
//     'lock_timeout', $n, true)) IS NOT NULL, $n being lockWaitLimit in
//     milliseconds. The uncorrelated subquery is an InitPlan that the
//     planner tests as a one-time filter before the scan, so the setting
//     is in force before the update waits for any row lock; is_local true
//     confines it to the statement's own transaction (PostgreSQL manual,
//     "Configuration Settings Functions", set_config). lock_timeout
//     covers waits for row locks and is read when a wait begins ("Client
//     Connection Defaults", lock_timeout); past it the statement fails
//     with SQLSTATE 55P03 and is rolled back. SET LOCAL would need a
//     transaction of its own (BEGIN, SET, UPDATE, COMMIT: three more round
//     trips per row). statement_timeout cannot be set this way: its timer
//     starts with the statement, before set_config runs; the claim
//     timeout bounds what is left, and the guarded update by primary key
//     does nothing slow but wait for locks.
//   - MariaDB: SET STATEMENT innodb_lock_wait_timeout=<lockWaitLimit,
//     rounded up to whole seconds>, max_statement_time=<statementLimit>
//     FOR UPDATE … (MariaDB manual, "SET STATEMENT",
//     "innodb_lock_wait_timeout", "max_statement_time"). Past either the
//     statement fails (1205, 1969) and only it is rolled back.
//   - MySQL 8: unchanged. innodb_lock_wait_timeout cannot be set by the
//     SET_VAR optimizer hint (MySQL manual, "InnoDB Startup Options and
//     System Variables": SET_VAR Hint Applies: No), so the session's
//     value applies (50 s by default): set it below the claim timeout in
//     the DSN (go-sql-driver passes DSN parameters such as
//     innodb_lock_wait_timeout=5 as session variables).
//   - SQLite: unchanged. Writers wait for the database write lock for the
//     connection's busy timeout (the DSN's busy_timeout, 5 s with
//     [SQLiteDSN]), then fail with SQLITE_BUSY.
//   - SQL Server: unchanged; the session's LOCK_TIMEOUT applies.
//
// The values are numbers the store computes from its options, never
// caller input; on PostgreSQL the value is a bound parameter.
func (s *sqlDriver[T]) boundWrite(st dialects.Statement) dialects.Statement {
	switch {
	case dialects.Family(s.dialect) == dialects.Postgres:
		ms := max(1, (s.lockWaitLimit()+time.Millisecond-1)/time.Millisecond)
		st.SQL += " AND (SELECT set_config('lock_timeout', $" + strconv.Itoa(len(st.Args)+1) + ", true)) IS NOT NULL"
		st.Args = append(slices.Clip(st.Args), strconv.FormatInt(int64(ms), 10))
	case s.dialect == dialects.MariaDB:
		secs := max(1, (s.lockWaitLimit()+time.Second-1)/time.Second)
		st.SQL = "SET STATEMENT innodb_lock_wait_timeout=" + strconv.FormatInt(int64(secs), 10) +
			", max_statement_time=" + seconds(s.statementLimit()) + " FOR " + st.SQL
	}
	return st
}

// seconds formats d as a decimal number of seconds with millisecond
// precision, at least 0.001.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(max(d, time.Millisecond).Seconds(), 'f', 3, 64)
}

// noOutcome is the error of a claim statement whose outcome the claim
// timeout cut short: the statement may or may not have committed. err is
// what the driver returned, kept as text only: it may wrap the timeout's
// context.DeadlineExceeded, which is no error of the caller's context.
func (s *sqlDriver[T]) noOutcome(what string, err error) error {
	if err == nil {
		err = errors.New("driver returned no error")
	}
	return fmt.Errorf("%w: %s: no outcome within the claim timeout of %v (%v)", dao.ErrUnavailable, what, s.claimTimeout, err)
}

// execClaim runs the claim write st on a claimContext of ctx and returns
// its affected-row count; see execOutcome. When ctx can end and the
// backend can stop a statement behind a lock, it runs st with
// execInterruptible. Errors are returned as the driver gave them, for
// [classifyClaimWrite], or wrapping ctx.Err() when ctx ended first.
func (s *sqlDriver[T]) execClaim(ctx context.Context, st dialects.Statement) (int64, error) {
	dctx, cancel := s.claimContext(ctx)
	defer cancel()
	if s.interrupter != nil && ctx.Done() != nil {
		return s.execInterruptible(ctx, dctx, st)
	}
	n, known, err := execOutcome(dctx, s.pool, st)
	if !known {
		return 0, s.noOutcome("guarded update", err)
	}
	return n, err
}

// interruptTimeout bounds the delivery of an [Interrupt] (a connection to
// the server and one request). interruptRepeat is the time after which an
// interrupt is sent again while the statement has not answered: a request
// that reached the server before the statement did found the session idle
// and was ignored (PostgreSQL ignores a cancel request for an idle
// backend, MariaDB a KILL QUERY of an idle thread), and a repeated
// request is harmless.
const (
	interruptTimeout = 5 * time.Second
	interruptRepeat  = 100 * time.Millisecond
)

// execInterruptible runs the claim write st on run (a claimContext of
// ctx) on a connection of its own (claimConn: nothing is sent once ctx
// has ended) that the backend's Interrupter readied, and returns its
// affected-row count. Should ctx end while the statement runs, the
// backend's [Interrupt] asks the server, from outside the connection, to
// end it (PostgreSQL's cancel request, MySQL and MariaDB's KILL QUERY;
// again every interruptRepeat until the statement answers);
// on SQLite the statement runs on errOf(run, ctx), so the driver's busy
// wait for the write lock ends by itself. The statement's own answer then
// tells its outcome: completed (committed, its count returned) or failed
// (rolled back, an error wrapping ctx.Err() and the mapped native error).
// The connection goes back to the pool only once the interrupt request
// is done, so that it cannot reach a later statement. A connection the
// backend cannot interrupt runs st as without an Interrupter, up to the
// lock-wait limit.
func (s *sqlDriver[T]) execInterruptible(ctx, run context.Context, st dialects.Statement) (int64, error) {
	conn, err := s.claimConn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	run, stop, trusted := s.interruptible(ctx, run, conn)
	var n int64
	known := true
	if trusted {
		var res sql.Result
		if res, err = conn.ExecContext(run, st.SQL, st.Args...); err == nil {
			n, err = res.RowsAffected()
		}
	} else {
		n, known, err = execOutcome(run, conn, st)
	}
	stop()
	if !known {
		return 0, s.noOutcome("guarded update", err)
	}
	if cerr := ctxErr(ctx); err != nil && cerr != nil {
		return 0, fmt.Errorf("%w: the guarded update ended when the caller's context did: %w", cerr, mapError(err))
	}
	return n, err
}

// interruptible readies conn, the connection of a claim statement about
// to run on run (a claimContext of ctx), with the backend's Interrupter
// (s.interrupter is not nil). It returns the context to run the statement
// on and stop, which the caller calls once the statement's answer is read
// and which returns once an interrupt under way is done. With an
// [Interrupt], the statement context is run, and ctx's end sends the
// interrupt. A backend whose driver ends its waits by itself (SQLite)
// gets errOf(run, ctx), and trusted is true: the driver's answer on that
// context is the statement's outcome, even once ctx has ended.
func (s *sqlDriver[T]) interruptible(ctx, run context.Context, conn *sql.Conn) (_ context.Context, stop func(), trusted bool) {
	stop = func() {}
	interrupt, err := s.interrupter(run, s.db, conn)
	switch {
	case err != nil:
		return run, stop, false
	case interrupt == nil:
		return errOf{run, ctx}, stop, true
	}
	done, finished := make(chan struct{}), make(chan struct{})
	after := context.AfterFunc(ctx, func() {
		defer close(done)
		for {
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptTimeout)
			_ = interrupt(ictx)
			cancel()
			select {
			case <-finished:
				return
			case <-time.After(interruptRepeat):
			}
		}
	})
	return run, func() {
		close(finished)
		if !after() {
			<-done
		}
	}, false
}

// errOf is the statement context that a driver which ends its own lock
// waits (SQLite's busy handler, [Backend].Interrupter) runs a claim
// statement on: run's values, no deadline, a nil Done channel, and the
// Err of the caller's context. The driver polls Err while it waits for
// the write lock and while the statement runs, and stops (SQLITE_BUSY,
// or SQLITE_INTERRUPT, which rolls the statement back whole; SQLite
// manual, sqlite3_interrupt), so its answer stays the statement's
// outcome; database/sql, which watches Done alone, never closes the
// statement's rows under it (closing a claim statement's rows part-way
// resets it, which commits its changes).
type errOf struct {
	context.Context // run
	caller          context.Context
}

func (c errOf) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c errOf) Done() <-chan struct{}       { return nil }
func (c errOf) Err() error                  { return c.caller.Err() }

// execOutcome runs st on pool with ctx and returns its affected-row count.
// known is false when ctx was done by the time the driver returned: the
// count and the error are then not trusted, whatever the driver, since a
// driver may skip a statement whose context is done and report an earlier
// statement's count (glebarez go-sqlite v1.21 does), or may have run the
// statement and lost the race with the context. The error is the driver's,
// unmapped.
func execOutcome(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) (n int64, known bool, err error) {
	res, err := pool.ExecContext(ctx, st.SQL, st.Args...)
	if ctx.Err() != nil {
		return 0, false, err
	}
	if err != nil {
		return 0, true, err
	}
	n, err = res.RowsAffected()
	if ctx.Err() != nil {
		return 0, false, err
	}
	return n, true, err
}

// classifyClaimWrite sorts the error of a guarded update, a statement that
// runs alone in its own transaction:
//
//   - lost is true when the database chose the statement as a deadlock
//     victim (MySQL and MariaDB 1213 ER_LOCK_DEADLOCK, PostgreSQL 40P01
//     deadlock_detected, SQL Server 1205) or, on PostgreSQL under a
//     REPEATABLE READ or SERIALIZABLE default, failed it because another
//     transaction changed the row (40001 serialization_failure). The
//     server rolled back that statement alone, so the row is not claimed
//     and stays as the other transaction left it: a lost race.
//   - Otherwise a lock wait past the server-side limit (MySQL and MariaDB
//     1205 ER_LOCK_WAIT_TIMEOUT, MariaDB 1969 max_statement_time, MySQL
//     3024, PostgreSQL 55P03 lock_not_available and 57014 query_canceled
//     by a statement timeout, SQL Server 1222) is an error wrapping
//     dao.ErrBusy and the native error; the statement was rolled back.
//   - An error wrapping context.Canceled or context.DeadlineExceeded
//     (the caller's context ended; see execInterruptible) is returned as
//     it is.
//   - Any other error is mapped as usual.
//
// The codes are those the backend packages map to dao.ErrConflict and
// dao.ErrBusy (see [Backend]).
func classifyClaimWrite(err error) (lost bool, out error) {
	mapped := mapError(err)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's context ended: that is what the error reports.
		return false, err
	case errors.Is(mapped, dao.ErrConflict):
		return true, nil
	case errors.Is(mapped, dao.ErrBusy):
		return false, fmt.Errorf("lock wait past the limit: %w", mapped)
	}
	return false, mapped
}

// driverBadConn is database/sql/driver's ErrBadConn: a connection released
// with it is closed rather than reused.
var driverBadConn = sqldriver.ErrBadConn
