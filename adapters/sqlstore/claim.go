package sqlstore

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// ClaimBatch is the fast path, the driver's single-operation claim of a
// checked request; the store ([dao.Table.Claim]) runs it when the claim
// strategy is [dao.StrategyFastPath], and otherwise runs its portable
// default over ReadCandidates and ClaimRow. The contract of both, and the
// portable default's outcome at each edge, are dao.Table.Claim's; the fast
// path's outcomes at each edge (cancellation, lost connection, lock
// waits) are in the package documentation. What is this backend's own:
//
//   - PostgreSQL (on the fast-path allow-list by default): the one
//     statement of dialects.Renderer.Claim in autocommit, one round trip
//     in READ COMMITTED, run with pgx natively where the connection is
//     pgx's (queryNative). When New found a stricter default isolation,
//     the statement runs in a READ COMMITTED transaction (three round
//     trips): under REPEATABLE READ or SERIALIZABLE a row a concurrent
//     claimer updated raises a serialization failure instead of being
//     skipped (PostgreSQL manual, "Transaction Isolation").
//   - SQLite (on the allow-list by default): the one UPDATE … RETURNING;
//     the wait for the write lock ends when ctx does (the busy handler of
//     ncruces/go-sqlite3 checks it): no rows and an error wrapping
//     ctx.Err() and dao.ErrBusy.
//   - MySQL and MariaDB, on a library's table by default or opted in with
//     [WithStrategy]: claimLocked, a READ COMMITTED transaction with one
//     FOR UPDATE SKIP LOCKED read and one UPDATE, four round trips
//     whatever the number of rows (go-sql-driver sends the isolation
//     level as one more exchange inside BeginTx).
//
// In the portable default, a guarded update that lost its race is skipped
// without an error on PostgreSQL, MySQL, MariaDB and SQL Server (the guard
// no longer matches, or the update was a deadlock victim, which rolls back
// that update alone and is reported to dao.ClaimTrace.Conflict); on
// SQLite a writer that finds the write lock taken past the busy timeout
// fails with dao.ErrBusy, returned with the rows claimed before. A guarded
// update waiting for a lock when ctx ends is ended at once
// (execInterruptible): on PostgreSQL by the protocol's cancel request for
// its backend, on MySQL and MariaDB by KILL QUERY of its thread from
// another connection, on SQLite by its busy wait; its own answer says
// whether it committed. A caller whose ctx cannot end, or a connection the
// store cannot interrupt (a driver middleware), waits instead for the
// lock-wait limit ([WithLockWaitLimit], 5 s by default: PostgreSQL
// lock_timeout, MariaDB innodb_lock_wait_timeout; the session's
// innodb_lock_wait_timeout on MySQL 8, the busy timeout on SQLite) and
// the claim timeout ([WithClaimTimeout], 30 s by default).
func (s *sqlDriver[T]) ClaimBatch(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	var st dialects.Statement
	oneStatement := s.dialect != dialects.MySQL && s.dialect != dialects.MariaDB
	if oneStatement {
		var err error
		if st, err = s.r.Claim(s.table, req); err != nil {
			return nil, err
		}
	}
	// Nothing is sent once ctx has ended.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if oneStatement && s.stmts != nil {
		// Prepared, when not yet, before the claim takes a connection: a
		// prepare takes one of the pool's.
		if e := s.stmts.prepare(ctx, st.SQL); e != nil {
			e.release()
		}
	}
	// From here on the statements run detached from ctx's cancellation,
	// bounded by the claim timeout, so that their outcome is learned.
	run, cancel := s.claimContext(ctx)
	defer cancel()
	conn, err := s.claimConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var rows []T
	switch {
	case !oneStatement:
		rows, err = s.claimLockedRetrying(ctx, run, conn, req)
	case s.claimTx:
		rows, err = s.claimOwnTx(ctx, run, conn, st)
	case s.dialect == dialects.SQLServer:
		rows, err = s.claimStatementRetrying(ctx, run, conn, st)
		if err == nil {
			// OUTPUT returns the rows in no particular order.
			s.sortClaimed(rows, req.OrderBy)
		}
	case s.dialect == dialects.SQLite:
		// One statement; RETURNING gives each row's rank in the claim's
		// order. With a driver that ends its own busy wait, it runs in a
		// transaction, prepared once (the store's statement cache), also
		// for a caller whose ctx cannot end.
		if s.interrupter != nil {
			rows, err = s.claimSQLiteLocked(ctx, run, conn, st, req.Limit)
		} else {
			rows, err = s.queryRanked(run, conn, st, req.Limit)
		}
	default:
		// One statement in autocommit: query returns its rows only once
		// the server reported it complete and committed. It runs with the
		// backend's driver natively where the connection allows it.
		err = errNotNative
		if s.native != nil {
			rows, err = s.queryNative(run, conn, st, req.Limit)
		}
		if errors.Is(err, errNotNative) {
			rows, err = s.query(run, conn, st)
		}
	}
	return rows, s.claimErr(ctx, run, err)
}

// claimSQLiteLocked runs the SQLite claim statement st (queryRanked) with
// a driver that ends its own busy wait (interruptible): it first takes
// the database write lock with BEGIN IMMEDIATE on errOf(run, ctx), whose
// busy wait gives up when ctx ends (SQLITE_BUSY, or SQLITE_INTERRUPT
// before it starts: nothing changed, no rows, an error wrapping ctx.Err()
// and, for the busy wait, dao.ErrBusy). Holding the lock, it runs st on
// run, which never ends, so that no interrupt can come between the
// statement's changes and its last row, as the statement the store's
// cache keeps prepared on the connection (stmtCache), and commits. Rows
// are returned only once COMMIT succeeded; a statement that fails is
// rolled back, and a connection whose rollback or COMMIT failed is
// discarded. The caller, ClaimBatch, adds ctx's error when ctx ended
// meanwhile. Two extra in-process statements, no extra wait.
func (s *sqlDriver[T]) claimSQLiteLocked(ctx, run context.Context, conn *sql.Conn, st dialects.Statement, limit int) ([]T, error) {
	lockCtx, stop, trusted := s.interruptible(ctx, run, conn)
	defer stop()
	if !trusted {
		return s.queryRanked(run, conn, st, limit)
	}
	// The driver begins a transaction of LevelSerializable with BEGIN
	// IMMEDIATE (github.com/ncruces/go-sqlite3/driver, Conn.BeginTx),
	// whatever the DSN's _txlock; the transaction runs the statement
	// prepared in the store's cache.
	tx, err := conn.BeginTx(lockCtx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		return nil, mapCtxError(lockCtx, err)
	}
	badConn := func() {
		// A connection that may be left in a transaction must not go
		// back to the pool: database/sql closes one released as bad.
		_ = conn.Raw(func(any) error { return driverBadConn })
	}
	rows, err := s.queryRanked(run, s.stmts.pool(tx), st, limit)
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			badConn()
		}
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		// The driver rolls a failed COMMIT back; whether it could is not
		// told.
		badConn()
		return nil, mapError(err)
	}
	return rows, nil
}

// queryRanked runs the SQLite claim statement st (dialects.Renderer.Claim)
// on pool and returns its rows sorted by the rank column
// (dialects.RankColumn) it returns beside each row; limit is the claim's
// Limit, the most rows it returns. The rows are scanned with scanSQLite,
// as query scans them, or, for a model scanSQLite does not scan, with
// GORM's scanner into a struct type that embeds T and adds the rank
// (rankedType), so every field of T is read as GORM reads it. Rows are
// returned only when the whole result was read and the statement
// completed, as with query; the statement runs with queryRows, again on
// a fresh schema when SQLite's copy is stale.
func (s *sqlDriver[T]) queryRanked(ctx context.Context, pool gorm.ConnPool, st dialects.Statement, limit int) ([]T, error) {
	rows, release, err := s.queryRows(ctx, pool, st)
	if err != nil {
		return nil, err
	}
	defer release()
	var out []T
	var ranks []int64
	if s.direct {
		out, ranks, err = s.scanSQLite(ctx, rows, limit)
		if err == nil && len(out) > 0 && len(ranks) != len(out) {
			err = fmt.Errorf("claim statement returned no %s column", dialects.RankColumn)
		}
	} else {
		out, ranks, err = s.scanRanked(ctx, rows)
	}
	if err := finishRows(ctx, rows, err); err != nil {
		return nil, err
	}
	sortByRank(out, ranks)
	return out, nil
}

// scanRanked scans the rows of the SQLite claim with GORM's ScanRows into
// rankedType, and returns them with their ranks.
func (s *sqlDriver[T]) scanRanked(ctx context.Context, rows *sql.Rows) ([]T, []int64, error) {
	ranked := reflect.New(reflect.SliceOf(s.ranked))
	if !rows.Next() {
		return nil, nil, nil
	}
	// ScanRows expects the cursor on the first row and scans the rest.
	if err := s.db.WithContext(ctx).ScanRows(rows, ranked.Interface()); err != nil {
		return nil, nil, err
	}
	list := ranked.Elem()
	out := make([]T, list.Len())
	ranks := make([]int64, list.Len())
	for i := range out {
		out[i] = list.Index(i).Field(0).Interface().(T)
		ranks[i] = list.Index(i).Field(1).Int()
	}
	return out, ranks, nil
}

// sortByRank sorts rows by ascending ranks[i], the rank of rows[i] (ties
// keep their order); ranks is left as it is. The statement usually
// returns the rows in that order already.
func sortByRank[T any](rows []T, ranks []int64) {
	if slices.IsSorted(ranks) {
		return
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ranks[a], ranks[b]) })
	sorted := make([]T, len(rows))
	for i, j := range idx {
		sorted[i] = rows[j]
	}
	copy(rows, sorted)
}

// rankedType returns struct { Row T `gorm:"embedded"`; Rank int64
// `gorm:"column:claimstore_rank"` }, the row type queryRanked scans into:
// GORM reads the fields of the embedded T as it reads them in T (GORM
// guide, "Declaring Models": embedded struct), and the rank column into
// Rank. Row is a named field rather than an anonymous one, so that no
// method of T is promoted (reflect.StructOf does not build those).
func rankedType[T any]() reflect.Type {
	return reflect.StructOf([]reflect.StructField{
		{Name: "Row", Type: reflect.TypeFor[T](), Tag: `gorm:"embedded"`},
		{Name: "Rank", Type: reflect.TypeFor[int64](), Tag: reflect.StructTag(`gorm:"column:` + dialects.RankColumn + `"`)},
	})
}

// sortClaimed sorts the rows a SQL Server claim statement returned, in
// their post-claim state, by order with the primary key as the final tie
// breaker, as [driver.Model.Less] compares values: NULL after every value
// ascending and first descending (as the rendered ORDER BY places NULLs),
// numbers by value, times as instants, strings and bytes bytewise. Two
// differences from the order in which the statement chose the rows
// remain: when Set writes a plain value to an order column, that column
// is equal on every returned row and the rows follow the remaining order
// columns (an Increment keeps the order); and the server compares strings
// by the column's collation (by default case-insensitive), which may make
// strings equal, or order them, where this bytewise sort does not.
func (s *sqlDriver[T]) sortClaimed(rows []T, order []dao.Order) {
	if len(rows) < 2 {
		return
	}
	pk := s.table.PrimaryKey
	if !slices.ContainsFunc(order, func(o dao.Order) bool { return o.Field == pk }) {
		order = append(slices.Clip(order), dao.Asc(pk))
	}
	slices.SortStableFunc(rows, func(a, b T) int {
		switch {
		case s.model.Less(&a, &b, order):
			return -1
		case s.model.Less(&b, &a, order):
			return 1
		}
		return 0
	})
}

// claimStatementRetrying runs the SQL Server claim statement st in
// autocommit, and runs it again when the server chose it as a deadlock
// victim (error 1205, which rolls the statement back whole, so nothing
// was claimed; "Deadlocks guide"), up to deadlockAttempts times and only
// while ctx has not ended. A statement that still loses is a lost race
// for all its rows: no rows and no error, as the other lost races of the
// fast path. A lock wait past the session's LOCK_TIMEOUT (error 1222) is
// an error wrapping dao.ErrBusy, with no rows: the statement was rolled
// back.
func (s *sqlDriver[T]) claimStatementRetrying(ctx, run context.Context, conn *sql.Conn, st dialects.Statement) ([]T, error) {
	for attempt := 1; ; attempt++ {
		rows, err := s.query(run, conn, st)
		if err == nil || !errors.Is(err, dao.ErrConflict) {
			return rows, err
		}
		traceConflict(ctx)
		if attempt == deadlockAttempts || ctx.Err() != nil {
			return nil, nil
		}
	}
}

// claimConn takes a connection of the store's pool for a fast-path claim,
// waiting with ctx: a caller whose context ends while it waits for a
// connection (or while one is opened) sends nothing and gets an error
// wrapping ctx.Err(). The claim's statements then run on the connection
// with the detached context.
func (s *sqlDriver[T]) claimConn(ctx context.Context) (*sql.Conn, error) {
	db, err := s.db.DB()
	if err != nil {
		return nil, mapError(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, mapCtxError(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// claimErr returns the error of a fast-path claim whose statements ran on
// run, detached from ctx: nil on success; an error wrapping ctx.Err() when
// ctx ended meanwhile (also on success: the committed rows come with it);
// [dao.ErrUnavailable] when the claim timeout passed before the outcome
// was learned (the driver gave the connection up); else err.
func (s *sqlDriver[T]) claimErr(ctx, run context.Context, err error) error {
	cerr := ctxErr(ctx)
	if err != nil && run.Err() != nil && (cerr == nil || !errors.Is(err, cerr)) {
		// The run context's deadline is not the caller's: report the
		// unknown outcome, not a deadline the caller did not set.
		err = s.noOutcome("claim", err)
	}
	switch {
	case err == nil && cerr == nil:
		return nil
	case err == nil:
		return fmt.Errorf("%w (the rows returned were claimed)", cerr)
	case cerr != nil && !errors.Is(err, cerr):
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// statementLimit returns the server-side limit on the run time of one
// claim statement: a third of the claim timeout, so that the statements of
// a claim transaction and its COMMIT end before the claim stops waiting,
// and a server ends a statement, with a known outcome (rolled back),
// before the client stops waiting for it.
func (s *sqlDriver[T]) statementLimit() time.Duration {
	return max(s.claimTimeout/3, time.Millisecond)
}

// claimOwnTx runs the PostgreSQL claim statement st in a READ COMMITTED
// transaction, for servers whose default isolation is stricter. BEGIN and
// the transaction's limits go in one simple-protocol exchange (BEGIN
// ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout ...; SET LOCAL
// statement_timeout ...), then the statement, then COMMIT: three round
// trips. The limits (PostgreSQL manual, "Client Connection Defaults":
// lock_timeout, the store's lock-wait limit; statement_timeout,
// statementLimit) end with the transaction and make a wait fail with
// SQLSTATE 55P03 or 57014, [dao.ErrBusy]. When ctx has ended by the time
// the statement's result is read, the transaction is rolled back instead
// of committed. Rows are returned only when COMMIT succeeded. conn is the
// claim's connection (claimConn).
func (s *sqlDriver[T]) claimOwnTx(ctx, run context.Context, conn *sql.Conn, st dialects.Statement) ([]T, error) {
	begin := "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = " + millis(s.lockWaitLimit()) +
		"; SET LOCAL statement_timeout = " + millis(s.statementLimit())
	if _, err := conn.ExecContext(run, begin); err != nil {
		return nil, mapCtxError(run, err)
	}
	rows, err := s.query(run, conn, st)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// A failed ROLLBACK leaves the connection in a transaction; pgx's
		// database/sql driver then discards it instead of reusing it.
		_, _ = conn.ExecContext(run, "ROLLBACK")
		return nil, err
	}
	if _, err := conn.ExecContext(run, "COMMIT"); err != nil {
		return nil, mapCtxError(run, err)
	}
	return rows, nil
}

// millis formats d as a whole number of milliseconds, at least 1, the
// unit of PostgreSQL's timeout settings.
func millis(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// deadlockAttempts is how many times the MySQL and MariaDB fast path runs
// its transaction when the server keeps choosing it as a deadlock victim.
const deadlockAttempts = 3

// traceConflict reports to the [dao.ClaimTrace] of ctx, if any, one
// conflict (dao.ErrConflict: a deadlock victim, a serialization failure,
// a Galera certification failure) that the claim absorbs.
func traceConflict(ctx context.Context) {
	if tr := dao.ContextClaimTrace(ctx); tr != nil && tr.Conflict != nil {
		tr.Conflict(ctx)
	}
}

// claimLockedRetrying runs claimLocked, and runs it again when InnoDB chose
// its transaction as a deadlock victim (1213 ER_LOCK_DEADLOCK: the whole
// transaction was rolled back, so nothing was claimed; InnoDB manual,
// "Deadlocks in InnoDB"), up to deadlockAttempts times and only while ctx
// has not ended. Concurrent claims deadlock on the gap locks their UPDATEs
// take in the claim's secondary index even though SKIP LOCKED keeps their
// row sets apart. A transaction that still loses is a lost race for all
// its rows: no rows and no error, as the other lost races of this path.
func (s *sqlDriver[T]) claimLockedRetrying(ctx, run context.Context, conn *sql.Conn, req dao.ClaimRequest) ([]T, error) {
	for attempt := 1; ; attempt++ {
		rows, err := s.claimLocked(ctx, run, conn, req)
		if err == nil {
			return rows, nil
		}
		if lost, _ := classifyClaimWrite(err); !lost {
			return rows, err
		}
		traceConflict(ctx)
		if attempt == deadlockAttempts || ctx.Err() != nil {
			return nil, nil
		}
	}
}

// claimLocked is the opt-in fast path of MySQL and MariaDB: in one READ
// COMMITTED transaction, a locking read of up to req.Limit eligible rows
// with FOR UPDATE SKIP LOCKED, one UPDATE ... WHERE pk IN (...) of the rows
// it locked, and COMMIT. The rows stay locked from the read to the commit,
// so the update needs no guard and their post-claim state is computed from
// the locked read (Increment included) without a second read. Rows are
// returned in the read's order, and only when COMMIT succeeded.
//
// The statements run on run, detached from ctx's cancellation. ctx is
// checked before the locking read, before the UPDATE and before COMMIT:
// once it has ended no further claim statement is sent, the transaction is
// rolled back and nothing is claimed. On MariaDB each statement carries
// SET STATEMENT max_statement_time = statementLimit,
// innodb_lock_wait_timeout = the lock-wait limit (whole seconds, at least
// 1) FOR ... (MariaDB Knowledge Base, "SET STATEMENT"): a wait past it
// fails with error 1205 or 1969, [dao.ErrBusy], and the transaction is
// rolled back. Such a wait happens behind a REPEATABLE READ transaction
// that holds next-key locks on the claim's index: SKIP LOCKED passes over
// locked records, but the UPDATE's new index entries wait for the gap
// locks. On MySQL the statements run under the session's
// innodb_lock_wait_timeout (default 50 s): set it below the claim timeout
// (the go-sql-driver DSN takes innodb_lock_wait_timeout=5). When ctx can
// end, its end also interrupts the statement then running (KILL QUERY
// from the store's kept connection, see [Backend].Interrupter): the claim
// returns shortly after ctx ends, rolled back, without waiting for the
// lock-wait limit.
func (s *sqlDriver[T]) claimLocked(ctx, run context.Context, conn *sql.Conn, req dao.ClaimRequest) ([]T, error) {
	lock, err := s.r.LockCandidates(s.table, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		return nil, err
	}
	// While the locking read and the UPDATE run, ctx's end interrupts the
	// statement then waiting (KILL QUERY): the UPDATE can wait for a
	// REPEATABLE READ transaction's gap locks, which SKIP LOCKED does not
	// pass over. The interrupt stops before COMMIT, which is never
	// interrupted; lockAndUpdate checks ctx once more before it.
	stop := func() {}
	if s.interrupter != nil && ctx.Done() != nil {
		run, stop, _ = s.interruptible(ctx, run, conn)
	}
	tx, err := conn.BeginTx(run, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		stop()
		return nil, mapCtxError(run, err)
	}
	rows, err := s.lockAndUpdate(ctx, run, tx, lock, req.Set)
	stop()
	if err == nil {
		err = ctx.Err() // ended while the interrupt stopped: roll back
	}
	if err != nil {
		// A failed ROLLBACK means a lost connection: the server rolls the
		// transaction back when it sees the connection closed.
		_ = tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, mapCtxError(run, err)
	}
	// Committed: the rows are claimed, and are returned even if computing
	// a post-claim value fails.
	for i := range rows {
		if err := s.model.Apply(&rows[i], req.Set); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// lockAndUpdate runs the statements of claimLocked inside tx, on run,
// checking ctx before each and before the caller commits: it returns
// ctx.Err() once ctx has ended, and the locked rows (in their pre-claim
// state) otherwise.
func (s *sqlDriver[T]) lockAndUpdate(ctx, run context.Context, tx gorm.ConnPool, lock dialects.Statement, set dao.Set) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := s.query(run, tx, s.boundWrite(lock))
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids := make([]any, len(rows))
	for i := range rows {
		ids[i] = s.model.ID(&rows[i])
	}
	up, err := s.r.UpdateByIDs(s.table, ids, set)
	if err != nil {
		return nil, err
	}
	if _, err := s.exec(run, tx, s.boundWrite(up)); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// The portable default's statements, ReadCandidates and ClaimRow, each run
// on a claimContext: detached from the caller's cancellation, bounded by
// the claim timeout, and carrying the dialect's server-side limits
// (boundRead, boundWrite), so a statement once sent always has a known
// outcome unless the claim timeout itself expires.

// ReadCandidates runs the candidate SELECT. An error that ends it past a
// server-side limit wraps dao.ErrBusy; a read the claim timeout cut short
// is dao.ErrUnavailable.
func (s *sqlDriver[T]) ReadCandidates(ctx context.Context, q dao.Query) ([]driver.Candidate[T], error) {
	st, err := s.r.Select(s.table, q)
	if err != nil {
		return nil, err
	}
	dctx, cancel := s.claimContext(ctx)
	defer cancel()
	rows, err := s.query(dctx, s.pool, s.boundRead(st))
	if dctx.Err() != nil {
		return nil, s.noOutcome("candidate read", err)
	}
	if err != nil {
		_, err = classifyClaimWrite(err)
		return nil, err
	}
	return driver.Candidates(rows), nil
}

// ClaimRow runs the guarded update of row (with boundWrite's lock-wait
// limit) and reports whether it claimed the row (one affected row). The
// outcomes:
//
//   - One affected row: claimed, (true, nil).
//   - The guard no longer matched (another claimer took the row): (false,
//     nil).
//   - The statement was a deadlock victim, or a serialization failure on
//     PostgreSQL: only it was rolled back, so the row is not claimed and
//     is treated as a lost race, (false, nil); see classifyClaimWrite.
//   - A lock wait past the limit: (false, error wrapping dao.ErrBusy); the
//     update was rolled back.
//   - The connection was lost: (false, error wrapping dao.ErrUnavailable).
//     The update may have committed with its acknowledgement lost; the
//     row then comes back when its lease (locked_until) expires.
//   - The claim timeout expired before the outcome was known: (false,
//     error wrapping dao.ErrUnavailable), as for a lost connection.
//
// MySQL and MariaDB report, unless the connection sets the
// CLIENT_FOUND_ROWS flag (DSN clientFoundRows=true, which the mysql backend adds), the
// number of rows the UPDATE changed, not the number it matched (MySQL
// manual, "mysql_affected_rows()"). A claim Set normally changes the row (it writes
// a new owner, lease or status), so one changed row means the guard
// matched. When the Set cannot be shown to change the row as it was read
// (every value equal to the current one, an Increment of zero or of a NULL
// column, or a value of a type this package cannot compare), zero affected
// rows is ambiguous: the guard may have matched a row the Set left as it
// was. Only then ClaimRow asks once more with SELECT COUNT(*) ... WHERE pk =
// ? AND <where> and claims the row if it still matches; that costs one
// extra round trip in this degenerate case and none otherwise. When ctx is
// done by then, it sends nothing more and reports the row as not claimed:
// its stored values are those the candidate read saw, so it stays
// claimable.
func (s *sqlDriver[T]) ClaimRow(ctx context.Context, cand *driver.Candidate[T], where dao.Criteria, set dao.Set) (bool, error) {
	row := &cand.Row
	id := s.model.ID(row)
	table := s.table
	table.PrimaryIndex = s.readPrimaryIndex(ctx)
	st, err := s.r.GuardedUpdate(table, id, where, set)
	if err != nil {
		return false, err
	}
	n, err := s.execClaim(ctx, s.boundWrite(st))
	if err != nil {
		lost, err := classifyClaimWrite(err)
		if lost {
			traceConflict(ctx)
		}
		if lost || err != nil {
			return false, err
		}
	}
	if n > 0 {
		return true, nil
	}
	if s.foundRows || certainlyChanges(s.model, row, set) || ctx.Err() != nil {
		return false, nil
	}
	cst, err := s.r.Count(s.table, dao.And(dao.Eq(s.table.PrimaryKey, id), where))
	if err != nil {
		return false, err
	}
	dctx, cancel := s.claimContext(ctx)
	defer cancel()
	var c int64
	if err := s.pool.QueryRowContext(dctx, cst.SQL, cst.Args...).Scan(&c); err != nil {
		if dctx.Err() != nil {
			return false, s.noOutcome("guard check", err)
		}
		return false, mapError(err)
	}
	return c > 0, nil
}

// certainlyChanges reports whether writing set (checked) to row, as read,
// changes at least one stored value on MySQL or MariaDB. It errs towards
// false: a false answer costs one extra query, a wrong true answer would
// report a matched row as lost.
func certainlyChanges[T any](m *driver.Model[T], row *T, set dao.Set) bool {
	for col, v := range set {
		cur, ok := m.Value(row, col)
		if !ok {
			continue
		}
		if inc, ok := v.(dao.Increment); ok {
			if inc.N != 0 && cur != nil {
				return true
			}
			continue
		}
		if differs(cur, v) {
			return true
		}
	}
	return false
}

// differs reports whether the plain values a and b are certainly stored
// differently. Times within a second of each other may round to the same
// DATETIME, and floats within a relative 1e-6 to the same FLOAT; trailing
// spaces vanish in a CHAR column; values of other types are not compared.
func differs(a, b any) bool {
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	switch x := a.(type) {
	case int64:
		y, ok := b.(int64)
		return ok && x != y
	case uint64:
		y, ok := b.(uint64)
		return ok && x != y
	case bool:
		y, ok := b.(bool)
		return ok && x != y
	case string:
		y, ok := b.(string)
		return ok && strings.TrimRight(x, " ") != strings.TrimRight(y, " ")
	case []byte:
		y, ok := b.([]byte)
		return ok && !bytes.Equal(x, y)
	case float64:
		y, ok := b.(float64)
		return ok && math.Abs(x-y) > 1e-6*math.Max(math.Abs(x), math.Abs(y))
	case time.Time:
		y, ok := b.(time.Time)
		d := x.Sub(y)
		return ok && (d >= time.Second || d <= -time.Second)
	}
	return false
}

// readPrimaryIndex reports whether the MySQL or MariaDB table's primary
// key is the model's primary-key column alone, so that the guarded update
// may read its row through the PRIMARY index
// (dialects.Table.PrimaryIndex). It asks the server once, on the first
// claim that finds the table (information_schema.KEY_COLUMN_USAGE, the
// columns of the constraint PRIMARY; MySQL manual, "The INFORMATION_SCHEMA
// KEY_COLUMN_USAGE Table"), and keeps the answer; until then, and when the
// question fails, it reports false and the update goes without the hint.
// Other dialects: false.
func (s *sqlDriver[T]) readPrimaryIndex(ctx context.Context) bool {
	if s.primaryIndex == nil {
		return false
	}
	if v := s.primaryIndex.Load(); v != 0 {
		return v == 1
	}
	schemaName, tableName, dotted := strings.Cut(s.table.Name, ".")
	if !dotted {
		schemaName, tableName = "", s.table.Name
	}
	dctx, cancel := s.claimContext(ctx)
	defer cancel()
	var (
		n   int64
		col string
	)
	err := s.pool.QueryRowContext(dctx, `SELECT COUNT(*), COALESCE(MAX(COLUMN_NAME), '') FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY'`,
		schemaName, tableName).Scan(&n, &col)
	if err != nil || n == 0 {
		return false
	}
	yes := n == 1 && strings.EqualFold(col, s.table.PrimaryKey)
	if yes {
		s.primaryIndex.Store(1)
	} else {
		s.primaryIndex.Store(2)
	}
	return yes
}
