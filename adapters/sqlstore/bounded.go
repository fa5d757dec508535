package sqlstore

import (
	"context"
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
// outcome unknown. The caller must call the returned cancel function.
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
// its affected-row count; see execOutcome. Errors are returned as the
// driver gave them, for [classifyClaimWrite].
func (s *sqlDriver[T]) execClaim(ctx context.Context, st dialects.Statement) (int64, error) {
	dctx, cancel := s.claimContext(ctx)
	defer cancel()
	n, known, err := execOutcome(dctx, s.pool, st)
	if !known {
		return 0, s.noOutcome("guarded update", err)
	}
	return n, err
}

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
//   - Any other error is mapped as usual.
//
// The codes are those the backend packages map to dao.ErrConflict and
// dao.ErrBusy (see [Backend]).
func classifyClaimWrite(err error) (lost bool, out error) {
	mapped := mapError(err)
	switch {
	case errors.Is(mapped, dao.ErrConflict):
		return true, nil
	case errors.Is(mapped, dao.ErrBusy):
		return false, fmt.Errorf("lock wait past the limit: %w", mapped)
	}
	return false, mapped
}
