package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Claim atomically claims up to req.Limit rows matching req.Where, writes
// req.Set to them and returns them in their post-claim state, in
// req.OrderBy order (primary key last).
//
// On PostgreSQL, on the fast-path allow-list by default, it runs the one
// statement of dialects.Renderer.Claim in autocommit: one round trip, in
// READ COMMITTED, PostgreSQL's default isolation. When New found
// that the server's default isolation is stricter, the statement runs in a
// READ COMMITTED transaction instead (BEGIN, statement, COMMIT: three
// round trips), because under REPEATABLE READ or SERIALIZABLE a row
// updated by a concurrent claimer raises a serialization failure (PostgreSQL
// manual, "Transaction Isolation") rather than being skipped.
//
// On MySQL and MariaDB opted in with [WithFastPath] it runs claimLocked: a
// READ COMMITTED transaction with a FOR UPDATE SKIP LOCKED read and one
// UPDATE, four round trips whatever the number of rows (go-sql-driver
// sends the isolation level as one more exchange inside BeginTx).
//
// Every other store runs dao.PortableClaim: one candidate SELECT, then
// one guarded UPDATE ... WHERE pk = ? AND <where> per candidate, 1 + N
// round trips; a row is claimed when its guarded update affected one row.
// Its outcomes at the edges (a returned row is always a committed claim;
// every other row is left as it was):
//
//   - Success: the claimed rows, nil.
//   - Lost race: the row is skipped without an error on PostgreSQL,
//     MySQL, MariaDB and SQL Server (the guard no longer matches, or the
//     update was a deadlock victim, which rolls back that update alone);
//     on SQLite a writer that finds the write lock taken past the busy
//     timeout fails with dao.ErrBusy, returned with the rows claimed
//     before.
//   - ctx done before the first statement is sent: nothing is sent; no
//     rows and an error wrapping ctx.Err().
//   - ctx done after a statement is sent: each statement runs on a context
//     detached from ctx's cancellation, so its outcome is learned; then no
//     further statement is sent, and the rows whose update committed are
//     returned with an error wrapping ctx.Err(). The wait is bounded by
//     the lock-wait limit ([WithLockWaitLimit], 5 s by default) where the
//     server takes one per statement (PostgreSQL lock_timeout, MariaDB
//     innodb_lock_wait_timeout), by the busy timeout on SQLite, by the
//     session's innodb_lock_wait_timeout on MySQL 8, and by the claim
//     timeout ([WithClaimTimeout], 30 s by default) on every server.
//   - Lock wait past the limit: the rows claimed before are returned with
//     an error wrapping dao.ErrBusy (retryable; also wrapping ctx.Err()
//     when ctx is done); that row's update was rolled back.
//   - Connection lost, or no answer within the claim timeout: the rows
//     claimed before are returned with an error wrapping
//     dao.ErrUnavailable. The update under way may have committed with its
//     acknowledgement lost; that row then comes back when its lease
//     (locked_until) expires, so claim with a lease.
//   - Contention: many claimers racing for the same rows get fewer rows,
//     never an error, on PostgreSQL, MySQL and MariaDB.
//
// req.Limit <= 0 returns (nil, nil) without I/O. Invalid requests are
// [dao.ErrInvalidArgument]. A store bound to a transaction returns
// [dao.ErrInTransaction] and does nothing. When the portable default fails
// part-way, the rows already claimed are returned with the error.
func (s *Store[T]) Claim(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.inTx {
		return nil, fmt.Errorf("sqlstore: claim: %w", dao.ErrInTransaction)
	}
	if !s.fast {
		rows, err := dao.PortableClaim(ctx, s.model, portableOps[T]{s}, req)
		if err != nil {
			return rows, fmt.Errorf("sqlstore: %w", err)
		}
		return rows, nil
	}
	req, err := s.model.CheckClaim(req)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim: %w", err)
	}
	if req.Limit <= 0 {
		return nil, nil
	}
	if s.dialect != dialects.Postgres {
		rows, err := s.claimLocked(ctx, req)
		if err != nil {
			return rows, fmt.Errorf("sqlstore: claim: %w", err)
		}
		return rows, nil
	}
	st, err := s.r.Claim(s.table, req)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim: %w", err)
	}
	if !s.claimTx {
		// The statement commits on its own; rows scanned before an error
		// are claimed and are returned with it.
		rows, err := s.query(ctx, s.pool, st)
		if err != nil {
			return rows, fmt.Errorf("sqlstore: claim: %w", err)
		}
		return rows, nil
	}
	var rows []T
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		rows, err = s.query(ctx, connPool(tx), st)
		return err
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim: %w", mapError(err))
	}
	return rows, nil
}

// claimLocked is the opt-in fast path of MySQL and MariaDB: in one READ
// COMMITTED transaction, a locking read of up to req.Limit eligible rows
// with FOR UPDATE SKIP LOCKED, one UPDATE ... WHERE pk IN (...) of the rows
// it locked, and COMMIT. The rows stay locked from the read to the commit,
// so the update needs no guard and their post-claim state is computed from
// the locked read (Increment included) without a second read. Rows are
// returned in the read's order. Nothing is claimed unless the commit
// succeeds.
func (s *Store[T]) claimLocked(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	lock, err := s.r.LockCandidates(s.table, dao.Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		return nil, err
	}
	var rows []T
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		pool := connPool(tx)
		var err error
		if rows, err = s.query(ctx, pool, lock); err != nil || len(rows) == 0 {
			return err
		}
		ids := make([]any, len(rows))
		for i := range rows {
			ids[i] = s.model.ID(&rows[i])
		}
		up, err := s.r.UpdateByIDs(s.table, ids, req.Set)
		if err != nil {
			return err
		}
		_, err = s.exec(ctx, pool, up)
		return err
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, mapError(err)
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

// portableOps implements dao.PortableOps with the rendered candidate read
// and guarded update. Each statement runs on a claimContext: detached from
// the caller's cancellation, bounded by the claim timeout, and carrying
// the dialect's server-side limits (boundRead, boundWrite), so a statement
// once sent always has a known outcome unless the claim timeout itself
// expires.
type portableOps[T any] struct{ s *Store[T] }

// ReadCandidates runs the candidate SELECT. An error that ends it past a
// server-side limit wraps dao.ErrBusy; a read the claim timeout cut short
// is dao.ErrUnavailable.
func (o portableOps[T]) ReadCandidates(ctx context.Context, q dao.Query) ([]T, error) {
	s := o.s
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
	return rows, nil
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
// CLIENT_FOUND_ROWS flag (DSN clientFoundRows=true, which [Open] adds), the
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
func (o portableOps[T]) ClaimRow(ctx context.Context, row *T, where dao.Criteria, set dao.Set) (bool, error) {
	s := o.s
	id := s.model.ID(row)
	st, err := s.r.GuardedUpdate(s.table, id, where, set)
	if err != nil {
		return false, err
	}
	n, err := s.execClaim(ctx, s.boundWrite(st))
	if err != nil {
		if lost, err := classifyClaimWrite(err); lost || err != nil {
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
func certainlyChanges[T any](m *dao.Model[T], row *T, set dao.Set) bool {
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
