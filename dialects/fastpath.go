package dialects

import (
	"fmt"
	"strconv"

	"github.com/claimstore/claimstore/dao"
)

// LockCandidates renders the locking candidate read of the MySQL and
// MariaDB fast path: SELECT * ... WHERE <where> ORDER BY <order> LIMIT n
// FOR UPDATE SKIP LOCKED (MySQL manual, "Locking Reads": "Locking Read
// Concurrency with NOWAIT and SKIP LOCKED", MySQL 8.0.1 and later; MariaDB
// "SELECT ... SKIP LOCKED", 10.6 and later). Run in a READ COMMITTED
// transaction, it locks up to n eligible rows that no other transaction
// holds, reading their latest committed versions, and passes over locked
// rows without waiting, so concurrent claimers take disjoint rows; the
// rows stay locked until the transaction ends, so the [Renderer.UpdateByIDs]
// that follows in it needs no guard. The other dialects have no such
// statement here (PostgreSQL claims with [Renderer.Claim]); they and
// q.Limit <= 0 are errors wrapping [dao.ErrInvalidArgument].
func (r Renderer) LockCandidates(t Table, q dao.Query) (Statement, error) {
	if r.d == nil || !r.d.stmts.lockCandidates.defined() {
		return Statement{}, fmt.Errorf("dialects: %w: no locking candidate read for %s", dao.ErrInvalidArgument, r.Dialect())
	}
	if q.Limit <= 0 {
		return Statement{}, limitErr("claim", q.Limit)
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	return b.render(r.d.stmts.lockCandidates, request{where: q.Where, order: q.OrderBy, limit: q.Limit})
}

// UpdateByIDs renders UPDATE ... SET <set> WHERE pk IN (<ids>), the write
// of the MySQL and MariaDB fast path over rows its locking read holds. No
// ids, an empty set, or a set writing the primary key is an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) UpdateByIDs(t Table, ids []any, set dao.Set) (Statement, error) {
	if len(ids) == 0 {
		return Statement{}, fmt.Errorf("dialects: %w: update by ids with no ids", dao.ErrInvalidArgument)
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	return b.render(r.d.stmts.updateByIDs, request{set: set, ids: ids})
}

// Claim renders the one-statement fast-path claim of PostgreSQL, SQLite
// and SQL Server; for MySQL and MariaDB it returns an error wrapping
// [dao.ErrInvalidArgument] (they claim with [Renderer.LockCandidates] and
// [Renderer.UpdateByIDs]). req must have been checked by the portable
// store (dao.Table.CheckClaim) and req.Limit must be > 0.
//
// The PostgreSQL statement is
//
//	WITH claim_ids AS MATERIALIZED (
//	    SELECT pk, <order columns> FROM t WHERE <where> ORDER BY <order>
//	    LIMIT $n FOR UPDATE SKIP LOCKED),
//	  claimed AS (
//	    UPDATE t AS t SET <set> FROM claim_ids WHERE t.pk = claim_ids.pk
//	    RETURNING t.*, <claim_ids' copies of the order columns>)
//	SELECT * FROM claimed ORDER BY <the copies of the order columns>
//
// Why each part:
//
//   - FOR UPDATE SKIP LOCKED (PostgreSQL manual, "SELECT: The Locking
//     Clause") locks the chosen rows and passes over rows another claimer
//     has locked, so concurrent claimers take disjoint rows without
//     waiting. Under READ COMMITTED a row updated by a committed claimer is
//     re-checked against WHERE before it is locked ("Transaction
//     Isolation: Read Committed Isolation Level"), so a row that stopped
//     being eligible is skipped: the lost race is silent. Under REPEATABLE
//     READ or SERIALIZABLE the same situation is a serialization failure
//     (SQLSTATE 40001) instead, so the statement must run in READ
//     COMMITTED.
//   - AS MATERIALIZED ("WITH Queries (Common Table Expressions):
//     MATERIALIZED", PostgreSQL 12 and later) makes the locking SELECT run
//     exactly once. With a bare UPDATE ... WHERE pk IN (SELECT ... LIMIT n
//     FOR UPDATE SKIP LOCKED) the planner may evaluate the subquery more
//     than once and claim more than n rows.
//   - RETURNING t.* gives the rows in their post-claim state without
//     another read, but in no particular order. The outer SELECT orders
//     them in the same statement, by the values that chose them (copied
//     out of claim_ids before the update and returned beside the row under
//     the aliases claimstore_order_N, which scanning into T ignores), with
//     the database's own collation and NULL ordering. Returning the copies
//     from the UPDATE, rather than joining claimed back to claim_ids,
//     leaves the planner no join to misjudge when statistics are stale. Sorting in the application instead would
//     need a Go comparison that matches the column collation; ordering in
//     SQL keeps one definition of the order, costs no extra round trip and
//     returns the rows in the order in which they were claimed even when
//     Set changes an ordering column.
//
// Arguments bind in text order: the WHERE values, the limit, the SET
// values.
//
// The SQLite statement is
//
//	WITH claim_ids AS MATERIALIZED (
//	    SELECT pk, row_number() OVER (ORDER BY <order>) AS claimstore_rank
//	    FROM (SELECT * FROM t WHERE <where> ORDER BY <order> LIMIT ?))
//	UPDATE t SET <set> WHERE pk IN (SELECT pk FROM claim_ids)
//	RETURNING *, (SELECT claimstore_rank FROM claim_ids
//	              WHERE claim_ids.pk = t.pk) AS claimstore_rank
//
// Why each part:
//
//   - SQLite has one writer at a time (manual, "File Locking And
//     Concurrency In SQLite Version 3"): the statement takes the database
//     write lock before it reads, so no other claim can change a row
//     between the choice of the rows and their update, and a claim that
//     cannot get the lock within the busy timeout fails with SQLITE_BUSY
//     having changed nothing.
//   - AS MATERIALIZED ("The WITH Clause": materialization hints, SQLite
//     3.35.0 and later) computes claim_ids once, before the first row is
//     changed, and every reference reads that result: the LIMIT bounds
//     the claim, and the ranks are those of the rows as they were chosen.
//   - RETURNING ("The RETURNING Clause", SQLite 3.35.0 and later) gives the
//     rows in their post-claim state in an order the manual leaves
//     unspecified, and a statement with RETURNING cannot be the subquery
//     of an outer SELECT that would order it. So each row carries its
//     rank, its 1-based position in the claim's order (row_number(),
//     "Window Functions", SQLite 3.25.0 and later, numbering only the n
//     rows the inner LIMIT chose, so a claim never sorts every eligible
//     row), under the alias
//     claimstore_rank, and the caller sorts by it: the rows come back in
//     the order in which they were claimed, by SQLite's own collation and
//     NULL ordering, also when Set changes an ordering column.
//
// Arguments bind in text order: the WHERE values, the limit, the SET
// values.
//
// The SQL Server statement is
//
//	WITH claimed AS (
//	    SELECT TOP (@p1) * FROM t WITH (ROWLOCK, READPAST, UPDLOCK)
//	    WHERE <where> ORDER BY <order>)
//	UPDATE claimed SET <set> OUTPUT INSERTED.*
//
// ("Table Hints (Transact-SQL)"): UPDLOCK takes update locks on the rows
// read, held to the end of the statement's transaction, so no other claim
// can take them between the read and the update; READPAST passes over rows
// other transactions hold locked instead of waiting for them, so
// concurrent claimers take disjoint rows (the lost race is silent, as with
// SKIP LOCKED); ROWLOCK asks for row locks rather than page locks, so that
// READPAST skips single rows. TOP (n) with ORDER BY in the common table
// expression chooses the first n rows of that order, and the UPDATE goes
// through it ("WITH common_table_expression": an updatable CTE). OUTPUT
// INSERTED.* ("OUTPUT Clause (Transact-SQL)") returns the rows in their
// post-claim state, in no guaranteed order: the caller sorts them. READPAST
// needs READ COMMITTED or REPEATABLE READ isolation (under SNAPSHOT it is
// an error), and OUTPUT without INTO is refused on a table with enabled
// triggers. Arguments bind in text order: the limit, the WHERE values, the
// SET values.
func (r Renderer) Claim(t Table, req dao.ClaimRequest) (Statement, error) {
	if r.d == nil || !r.d.stmts.claim.defined() {
		return Statement{}, fmt.Errorf("dialects: %w: no fast-path claim for %s", dao.ErrInvalidArgument, r.Dialect())
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if req.Limit <= 0 {
		return Statement{}, limitErr("claim", req.Limit)
	}
	return b.render(r.d.stmts.claim, request{where: req.Where, order: req.OrderBy, set: req.Set, limit: req.Limit})
}

// orderAlias is the prefix of the aliases under which the claim carries
// copies of the order columns out of claim_ids.
const orderAlias = "claimstore_order_"

// RankColumn is the result column of the SQLite claim ([Renderer.Claim])
// that holds each row's 1-based position in the claim's order.
const RankColumn = "claimstore_rank"

// copyAlias returns the alias of the copy of the i-th order term o: the
// quoted primary key for the key itself, orderAlias and i+1 otherwise.
func (b *builder) copyAlias(i int, o dao.Order) string {
	if o.Field == b.t.PrimaryKey {
		return b.d.quote(o.Field)
	}
	return orderAlias + strconv.Itoa(i+1)
}

// orderAliases writes ", <col> AS <alias>" for every order column but the
// primary key.
func (b *builder) orderAliases() {
	for i, o := range b.req.order {
		if o.Field != b.t.PrimaryKey {
			b.w(", ", b.d.quote(o.Field), " AS ", b.copyAlias(i, o))
		}
	}
}

// orderCopies writes ", <qual>.<alias>" for every order column but the
// primary key.
func (b *builder) orderCopies(qual string) {
	for i, o := range b.req.order {
		if o.Field != b.t.PrimaryKey {
			b.w(", ", qual, ".", b.copyAlias(i, o))
		}
	}
}

// orderByCopies writes the ORDER BY terms of the request's order over
// qual's copies of the order columns.
func (b *builder) orderByCopies(qual string) {
	for i, o := range b.req.order {
		if i > 0 {
			b.w(", ")
		}
		b.orderTerm(qual+"."+b.copyAlias(i, o), o.Field, o.Desc)
	}
}
