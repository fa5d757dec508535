package dialects

import (
	"fmt"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// Table describes the table a statement is rendered for. Every identifier
// comes from the model schema (driver.Model), never from request data, and is
// quoted by the renderer anyway, so a name cannot end a quoted identifier.
type Table struct {
	// Name is the table name. A dotted name ("schema.table") is quoted part
	// by part.
	Name string
	// PrimaryKey is the primary-key column.
	PrimaryKey string
	// Nullable names the columns that may hold NULL. ORDER BY places NULLs
	// of these columns the way PostgreSQL does by default (after every
	// value in ascending order, first in descending order) on every
	// dialect, so one OrderBy sorts alike everywhere. Columns not listed
	// get a bare ORDER BY term, which keeps an index on them usable.
	Nullable map[string]bool
	// PrimaryIndex reports that the table's primary key is PrimaryKey
	// alone, so that its index (MySQL and MariaDB: PRIMARY) finds a row by
	// PrimaryKey. [Renderer.GuardedUpdate] then reads the row through it
	// on MySQL and MariaDB. Leave it false when unsure: a table whose
	// primary key is another column would be scanned whole.
	PrimaryIndex bool
}

// Statement is rendered SQL: the text with the dialect's native
// placeholders, and the values bound to them, in order.
type Statement struct {
	SQL  string
	Args []any
}

// Names of the common table expressions the rendered statements use. A
// table with one of these names would be shadowed inside the statement;
// [ReservedTableName] reports them so callers can refuse such a table.
const (
	cteClaimIDs = "claim_ids"
	cteClaimed  = "claimed"
	cteDelete   = "delete_batch"
)

// ReservedTableName reports whether name collides with the name of a
// common table expression in the rendered statements (compared
// case-insensitively), which would make those statements refer to the
// expression instead of the table.
func ReservedTableName(name string) bool {
	switch strings.ToLower(name) {
	case cteClaimIDs, cteClaimed, cteDelete, eachRows, cteFanAcked, cteFanMessages, cteFanCopies, cteFanInserted:
		return true
	}
	return false
}

func limitErr(what string, n int) error {
	return fmt.Errorf("dialects: %w: %s limit must be > 0, got %d", dao.ErrInvalidArgument, what, n)
}

// Select renders the read of [dao.Store.Find] (and of the portable
// default's candidate read): the rows matching q.Where in q.OrderBy order,
// the primary key appended as the final tie breaker, at most q.Limit rows
// when q.Limit > 0. PostgreSQL, MySQL, MariaDB and SQLite use LIMIT; SQL
// Server uses TOP (n), which with ORDER BY returns the first n rows of that
// order. q must have been checked by the portable store (dao.Table); a
// negative limit or a malformed criterion is an error wrapping [dao.ErrInvalidArgument].
func (r Renderer) Select(t Table, q dao.Query) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if q.Limit < 0 {
		return Statement{}, limitErr("select", q.Limit)
	}
	s := r.d.stmts.selectAll
	if q.Limit > 0 {
		s = r.d.stmts.selectLimit
	}
	return b.render(s, request{where: q.Where, order: q.OrderBy, limit: q.Limit})
}

// Count renders SELECT COUNT(*) over the rows matching where.
func (r Renderer) Count(t Table, where dao.Criteria) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	return b.render(r.d.stmts.count, request{where: where})
}

// LockingCount renders a count of the rows matching where that also locks
// them for the rest of the caller's transaction, so that an UPDATE with the
// same where in that transaction matches exactly the counted rows:
// SELECT COUNT(*) ... FOR UPDATE on PostgreSQL, MySQL and MariaDB ("Locking
// Reads"; under REPEATABLE READ InnoDB's next-key locks also keep new
// matching rows out), WITH (UPDLOCK, HOLDLOCK) on SQL Server ("Table
// Hints"), and a plain count on SQLite, whose write transaction (BEGIN
// IMMEDIATE) already excludes every other writer. PostgreSQL refuses FOR
// UPDATE with an aggregate, so it counts a locking subquery.
func (r Renderer) LockingCount(t Table, where dao.Criteria) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	return b.render(r.d.stmts.lockingCount, request{where: where})
}

// Update renders UPDATE ... SET <set> WHERE <where>. A [dao.Increment]
// value renders col = col + ?. Set columns are written in sorted order so
// the text is deterministic. An empty set, or one writing the primary key,
// is an error wrapping [dao.ErrInvalidArgument].
func (r Renderer) Update(t Table, where dao.Criteria, set dao.Set) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	return b.render(r.d.stmts.update, request{where: where, set: set})
}

// UpdateKeys renders an UPDATE ... SET <set> WHERE <where> that returns
// the primary key of every row it matched: RETURNING pk on PostgreSQL
// (manual, "UPDATE": output_expression; every row the statement updated)
// and SQLite 3.35.0 or later ("The RETURNING Clause"), OUTPUT INSERTED.pk
// on SQL Server (Transact-SQL reference, "OUTPUT Clause"). MySQL and
// MariaDB have no such statement (ok false): they read the keys with
// [Renderer.LockKeys] and write them with [Renderer.UpdateByIDs] in one
// transaction. An empty set is an error wrapping [dao.ErrInvalidArgument].
func (r Renderer) UpdateKeys(t Table, where dao.Criteria, set dao.Set) (st Statement, ok bool, err error) {
	if r.d == nil || !r.d.stmts.updateKeys.defined() {
		return Statement{}, false, nil
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, false, err
	}
	st, err = b.render(r.d.stmts.updateKeys, request{where: where, set: set})
	return st, err == nil, err
}

// LockKeys renders the locking read of the keys of the rows matching where
// that MySQL and MariaDB run before an [Renderer.UpdateByIDs] of those
// keys in the same transaction: SELECT pk ... FOR UPDATE (MySQL manual,
// "Locking Reads"): the rows stay locked, so still match, until the
// transaction ends. Other dialects are an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) LockKeys(t Table, where dao.Criteria) (Statement, error) {
	if r.d == nil || !r.d.stmts.lockKeys.defined() {
		return Statement{}, fmt.Errorf("dialects: %w: no locking key read for %s", dao.ErrInvalidArgument, r.Dialect())
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	return b.render(r.d.stmts.lockKeys, request{where: where})
}

// GuardedUpdate renders the per-row write of the portable default:
// UPDATE ... SET <set> WHERE pk = ? AND (<where>), the criteria
// parenthesized as a whole when they are an And or Or of several operands.
// Because it re-asserts where, a row another claimer took after the candidate read no longer
// matches and the statement affects zero rows. On PostgreSQL (READ
// COMMITTED: "Transaction Isolation", the re-check of an updated row),
// MySQL and MariaDB (an UPDATE reads the latest committed version under
// the row lock, "Locking Reads" / "Consistent Nonlocking Reads") and SQL
// Server (the update lock is taken before the predicate is evaluated) the
// guard is evaluated against the row as the winner left it.
//
// On MySQL and MariaDB, for a table whose t.PrimaryIndex is set, the
// statement is UPDATE <table> FORCE INDEX (PRIMARY) SET …: the row is
// found and locked through the primary key, so an update that waits for
// the row holds no entry of a secondary index (such as (status, id)) that
// the row's holder needs to write its outcome.
func (r Renderer) GuardedUpdate(t Table, id any, where dao.Criteria, set dao.Set) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if id == nil {
		return Statement{}, fmt.Errorf("dialects: %w: guarded update with a nil primary key", dao.ErrInvalidArgument)
	}
	sk := r.d.stmts.guardedUpdate
	if t.PrimaryIndex && r.d.stmts.guardedUpdatePK.defined() {
		sk = r.d.stmts.guardedUpdatePK
	}
	return b.render(sk, request{where: where, set: set, id: id})
}

// Delete renders the bounded delete of a retention sweep: at most limit
// rows matching where, smallest primary keys first.
//
//   - PostgreSQL and SQLite have no DELETE ... LIMIT (SQLite only when built
//     with SQLITE_ENABLE_UPDATE_DELETE_LIMIT), so the victims are chosen by
//     a subquery: DELETE ... WHERE pk IN (SELECT pk ... ORDER BY pk LIMIT n).
//   - MySQL and MariaDB: DELETE ... WHERE ... ORDER BY pk LIMIT n
//     (MySQL manual "DELETE Statement").
//   - SQL Server: DELETE TOP (n) takes no ORDER BY, so a common table
//     expression picks the rows in order and the DELETE goes through it:
//     WITH delete_batch AS (SELECT TOP (n) * ... ORDER BY pk) DELETE FROM
//     delete_batch.
//
// limit <= 0 is an error wrapping [dao.ErrInvalidArgument].
func (r Renderer) Delete(t Table, where dao.Criteria, limit int) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if limit <= 0 {
		return Statement{}, limitErr("delete", limit)
	}
	return b.render(r.d.stmts.deleteLimit, request{where: where, limit: limit})
}

// CurrentTime reports whether the dialect writes a [driver.CurrentTime]
// Set value as the database's clock in the statement itself: PostgreSQL
// (statement_timestamp()) and SQL Server (SYSUTCDATETIME()), whose time
// columns store an instant whatever the session's zone. MySQL and
// MariaDB do not: a DATETIME holds no zone, and the driver writes and
// reads times in the DSN's loc, which a server expression cannot follow;
// nor does SQLite, whose times are text in the Go driver's format, which
// its date functions do not produce. There the portable layer writes the
// application's clock.
func (r Renderer) CurrentTime() bool { return r.d != nil && len(r.d.now) > 0 }
