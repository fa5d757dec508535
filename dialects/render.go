package dialects

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// Table describes the table a statement is rendered for. Every identifier
// comes from the model schema (dao.Model), never from request data, and is
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
	orderAlias  = "claimstore_order_"
	claimAlias  = "t"
)

// ReservedTableName reports whether name collides with the name of a
// common table expression in the rendered statements (compared
// case-insensitively), which would make those statements refer to the
// expression instead of the table.
func ReservedTableName(name string) bool {
	switch strings.ToLower(name) {
	case cteClaimIDs, cteClaimed, cteDelete:
		return true
	}
	return false
}

// Renderer turns checked criteria, orderings and sets (see dao.Model's
// Check methods) into SQL text for one dialect: identifiers quoted the
// dialect's way ("x" for PostgreSQL and SQLite, `x` for MySQL and MariaDB,
// [x] for SQL Server), values bound through native placeholders ($1 for
// PostgreSQL, ? for MySQL, MariaDB and SQLite, @p1 for SQL Server). It does
// no I/O and is safe for concurrent use.
type Renderer struct {
	dialect Name
}

// NewRenderer returns the renderer for dialect n, or an error wrapping
// [dao.ErrInvalidArgument] for an unknown dialect.
func NewRenderer(n Name) (Renderer, error) {
	switch n {
	case Postgres, MySQL, MariaDB, SQLite, SQLServer:
		return Renderer{dialect: n}, nil
	}
	return Renderer{}, fmt.Errorf("dialects: %w: unknown dialect %q", dao.ErrInvalidArgument, n)
}

// Dialect returns the renderer's dialect.
func (r Renderer) Dialect() Name { return r.dialect }

// Quote returns ident as one quoted identifier, doubling any closing quote
// character inside it.
func (r Renderer) Quote(ident string) string {
	switch r.dialect {
	case MySQL, MariaDB:
		return "`" + strings.ReplaceAll(ident, "`", "``") + "`"
	case SQLServer:
		return "[" + strings.ReplaceAll(ident, "]", "]]") + "]"
	}
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}

// QuoteTable quotes a possibly schema-qualified table name part by part.
func (r Renderer) QuoteTable(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = r.Quote(p)
	}
	return strings.Join(parts, ".")
}

// Placeholder returns the text of the i-th (1-based) bind parameter.
func (r Renderer) Placeholder(i int) string {
	switch r.dialect {
	case Postgres:
		return "$" + strconv.Itoa(i)
	case SQLServer:
		return "@p" + strconv.Itoa(i)
	}
	return "?"
}

// builder accumulates statement text and bound arguments.
type builder struct {
	r    Renderer
	t    Table
	sb   strings.Builder
	args []any
}

func (r Renderer) builder(t Table) (*builder, error) {
	if t.Name == "" || t.PrimaryKey == "" {
		return nil, fmt.Errorf("dialects: %w: table needs a name and a primary key", dao.ErrInvalidArgument)
	}
	return &builder{r: r, t: t}, nil
}

func (b *builder) w(s ...string) {
	for _, x := range s {
		b.sb.WriteString(x)
	}
}

func (b *builder) col(name string) { b.sb.WriteString(b.r.Quote(name)) }

func (b *builder) table() { b.sb.WriteString(b.r.QuoteTable(b.t.Name)) }

// param binds v and writes its placeholder. On SQLite a time.Time is bound
// in UTC: SQLite has no time type, the driver writes times as text with
// their zone offset, and comparisons of that text follow time order only
// when every value carries the same offset (SQLite manual, "Date And Time
// Functions": time values are strings).
func (b *builder) param(v any) {
	if t, ok := v.(time.Time); ok && b.r.dialect == SQLite {
		v = t.UTC()
	}
	b.args = append(b.args, v)
	b.sb.WriteString(b.r.Placeholder(len(b.args)))
}

// stmt returns the statement, or an error wrapping dao.ErrInvalidArgument
// when it binds more values than the dialect accepts.
func (b *builder) stmt() (Statement, error) {
	if max := b.r.MaxParams(); len(b.args) > max {
		return Statement{}, fmt.Errorf("dialects: %w: statement binds %d values, more than the %d %s accepts", dao.ErrInvalidArgument, len(b.args), max, b.r.dialect)
	}
	return Statement{SQL: b.sb.String(), Args: b.args}, nil
}

// MaxParams returns the largest number of bound values one statement may
// carry on the renderer's dialect: 65535 on PostgreSQL (the Bind message
// counts parameters in an Int16, "Frontend/Backend Protocol: Message
// Formats"), 65535 on MySQL and MariaDB (the prepared-statement limit,
// error ER_PS_MANY_PARAM), 32766 on SQLite (SQLITE_MAX_VARIABLE_NUMBER's
// default since 3.32.0, "Limits In SQLite"), 2100 on SQL Server ("Maximum
// capacity specifications for SQL Server": parameters per user-defined
// function or procedure, which is how the driver sends a statement). A
// statement that would bind more is refused with an error wrapping
// [dao.ErrInvalidArgument] instead of failing in the driver.
func (r Renderer) MaxParams() int {
	switch r.dialect {
	case SQLite:
		return 32766
	case SQLServer:
		return 2100
	}
	return 65535
}

var cmpOps = map[dao.Op]string{
	dao.OpEq: "=", dao.OpNe: "<>", dao.OpLt: "<", dao.OpLe: "<=", dao.OpGt: ">", dao.OpGe: ">=",
}

// where writes " WHERE <c>" unless c matches every row.
func (b *builder) where(c dao.Criteria) error {
	if c.IsAll() {
		return nil
	}
	b.w(" WHERE ")
	return b.cond(c)
}

// unwrap returns c without its single-operand And and Or wrappers: an And
// or Or of one operand means that operand.
func unwrap(c dao.Criteria) dao.Criteria {
	for (c.Op() == dao.OpAnd || c.Op() == dao.OpOr) && len(c.Children()) == 1 {
		c = c.Children()[0]
	}
	return c
}

// compound reports whether c, unwrapped, renders as more than one term
// joined by AND or OR.
func compound(c dao.Criteria) bool {
	c = unwrap(c)
	return (c.Op() == dao.OpAnd || c.Op() == dao.OpOr) && len(c.Children()) > 1
}

// cond writes c. Single-operand And and Or nodes are written as their
// operand, and every operand that is itself an And or an Or of several
// operands is parenthesized, whatever the operators: the text never relies
// on AND binding tighter than OR. Callers that join c to other terms
// parenthesize it the same way ([Renderer.GuardedUpdate] makes it an
// operand of an And).
func (b *builder) cond(c dao.Criteria) error {
	c = unwrap(c)
	switch op := c.Op(); op {
	case dao.OpAll:
		b.w("1 = 1")
		return nil
	case dao.OpAnd, dao.OpOr:
		kids := c.Children()
		if len(kids) == 0 {
			if op == dao.OpOr {
				return fmt.Errorf("dialects: %w: Or with no operands", dao.ErrInvalidArgument)
			}
			b.w("1 = 1")
			return nil
		}
		sep := " AND "
		if op == dao.OpOr {
			sep = " OR "
		}
		for i, k := range kids {
			if i > 0 {
				b.w(sep)
			}
			paren := compound(k)
			if paren {
				b.w("(")
			}
			if err := b.cond(k); err != nil {
				return err
			}
			if paren {
				b.w(")")
			}
		}
		return nil
	case dao.OpIsNull:
		b.col(c.Field())
		b.w(" IS NULL")
		return nil
	case dao.OpNotNull:
		b.col(c.Field())
		b.w(" IS NOT NULL")
		return nil
	case dao.OpIn:
		vs := c.Values()
		if len(vs) == 0 {
			return fmt.Errorf("dialects: %w: In(%q) with no values", dao.ErrInvalidArgument, c.Field())
		}
		b.col(c.Field())
		b.w(" IN (")
		for i, v := range vs {
			if i > 0 {
				b.w(", ")
			}
			b.param(v)
		}
		b.w(")")
		return nil
	default:
		sym, ok := cmpOps[op]
		if !ok {
			return fmt.Errorf("dialects: %w: unknown operator %v", dao.ErrInvalidArgument, op)
		}
		b.col(c.Field())
		b.w(" ", sym, " ")
		if ref := c.RefField(); ref != "" {
			b.col(ref)
		} else {
			if c.Value() == nil {
				return fmt.Errorf("dialects: %w: %v with a nil value", dao.ErrInvalidArgument, c)
			}
			b.param(c.Value())
		}
		return nil
	}
}

// withPK returns order with the primary key appended unless present.
func (b *builder) withPK(order []dao.Order) []dao.Order {
	for _, o := range order {
		if o.Field == b.t.PrimaryKey {
			return order
		}
	}
	return append(append(make([]dao.Order, 0, len(order)+1), order...), dao.Asc(b.t.PrimaryKey))
}

// orderTerm writes one ORDER BY term for expression expr (already quoted)
// of column col, placing NULLs as PostgreSQL does by default when the
// column is nullable.
func (b *builder) orderTerm(expr, col string, desc bool) {
	dir := ""
	if desc {
		dir = " DESC"
	}
	if !b.t.Nullable[col] {
		b.w(expr, dir)
		return
	}
	switch b.r.dialect {
	case Postgres:
		// ASC NULLS LAST and DESC NULLS FIRST are PostgreSQL's defaults.
		b.w(expr, dir)
	case SQLite:
		// SQLite sorts NULLs first in ascending order; NULLS FIRST/LAST
		// exists since SQLite 3.30.0 ("ORDER BY", lang_select.html).
		if desc {
			b.w(expr, " DESC NULLS FIRST")
		} else {
			b.w(expr, " NULLS LAST")
		}
	case MySQL, MariaDB:
		// MySQL and MariaDB sort NULLs first ascending and have no NULLS
		// LAST; sort on "expr IS NULL" (0 or 1) first.
		b.w(expr, " IS NULL", dir, ", ", expr, dir)
	case SQLServer:
		b.w("CASE WHEN ", expr, " IS NULL THEN 1 ELSE 0 END", dir, ", ", expr, dir)
	}
}

// orderBy writes " ORDER BY ..." for order (primary key appended).
func (b *builder) orderBy(order []dao.Order) {
	b.w(" ORDER BY ")
	for i, o := range b.withPK(order) {
		if i > 0 {
			b.w(", ")
		}
		b.orderTerm(b.r.Quote(o.Field), o.Field, o.Desc)
	}
}

// set writes the SET list of set in sorted column order. qual, when not
// empty, qualifies the column read by an Increment.
func (b *builder) set(set dao.Set, qual string) error {
	if len(set) == 0 {
		return fmt.Errorf("dialects: %w: empty Set", dao.ErrInvalidArgument)
	}
	for i, name := range driver.SetColumns(set) {
		if name == b.t.PrimaryKey {
			return fmt.Errorf("dialects: %w: Set may not write the primary key %q", dao.ErrInvalidArgument, name)
		}
		if i > 0 {
			b.w(", ")
		}
		b.col(name)
		b.w(" = ")
		if inc, ok := set[name].(dao.Increment); ok {
			if qual != "" {
				b.w(qual, ".")
			}
			b.col(name)
			b.w(" + ")
			b.param(inc.N)
			continue
		}
		b.param(set[name])
	}
	return nil
}

func limitErr(what string, n int) error {
	return fmt.Errorf("dialects: %w: %s limit must be > 0, got %d", dao.ErrInvalidArgument, what, n)
}

// Select renders the read of [dao.Store.Find] (and of the portable
// default's candidate read): the rows matching q.Where in q.OrderBy order,
// the primary key appended as the final tie breaker, at most q.Limit rows
// when q.Limit > 0. PostgreSQL, MySQL, MariaDB and SQLite use LIMIT; SQL
// Server uses TOP (n), which with ORDER BY returns the first n rows of that
// order. q must have been checked by the portable store (dao.Table); a negative limit
// or a malformed criterion is an error wrapping [dao.ErrInvalidArgument].
func (r Renderer) Select(t Table, q dao.Query) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if q.Limit < 0 {
		return Statement{}, limitErr("select", q.Limit)
	}
	b.w("SELECT ")
	if r.dialect == SQLServer && q.Limit > 0 {
		b.w("TOP (")
		b.param(int64(q.Limit))
		b.w(") ")
	}
	b.w("* FROM ")
	b.table()
	if err := b.where(q.Where); err != nil {
		return Statement{}, err
	}
	b.orderBy(q.OrderBy)
	if r.dialect != SQLServer && q.Limit > 0 {
		b.w(" LIMIT ")
		b.param(int64(q.Limit))
	}
	return b.stmt()
}

// Count renders SELECT COUNT(*) over the rows matching where.
func (r Renderer) Count(t Table, where dao.Criteria) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	b.w("SELECT COUNT(*) FROM ")
	b.table()
	if err := b.where(where); err != nil {
		return Statement{}, err
	}
	return b.stmt()
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
	switch r.dialect {
	case Postgres:
		b.w("SELECT COUNT(*) FROM (SELECT 1 FROM ")
		b.table()
		if err := b.where(where); err != nil {
			return Statement{}, err
		}
		b.w(" FOR UPDATE) AS locked")
	case SQLServer:
		b.w("SELECT COUNT(*) FROM ")
		b.table()
		b.w(" WITH (UPDLOCK, HOLDLOCK)")
		if err := b.where(where); err != nil {
			return Statement{}, err
		}
	default:
		b.w("SELECT COUNT(*) FROM ")
		b.table()
		if err := b.where(where); err != nil {
			return Statement{}, err
		}
		if r.dialect != SQLite {
			b.w(" FOR UPDATE")
		}
	}
	return b.stmt()
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
	b.w("UPDATE ")
	b.table()
	b.w(" SET ")
	if err := b.set(set, ""); err != nil {
		return Statement{}, err
	}
	if err := b.where(where); err != nil {
		return Statement{}, err
	}
	return b.stmt()
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
func (r Renderer) GuardedUpdate(t Table, id any, where dao.Criteria, set dao.Set) (Statement, error) {
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if id == nil {
		return Statement{}, fmt.Errorf("dialects: %w: guarded update with a nil primary key", dao.ErrInvalidArgument)
	}
	b.w("UPDATE ")
	b.table()
	b.w(" SET ")
	if err := b.set(set, ""); err != nil {
		return Statement{}, err
	}
	if err := b.where(dao.And(dao.Eq(t.PrimaryKey, id), where)); err != nil {
		return Statement{}, err
	}
	return b.stmt()
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
	pkOrder := []dao.Order{dao.Asc(t.PrimaryKey)}
	switch r.dialect {
	case MySQL, MariaDB:
		b.w("DELETE FROM ")
		b.table()
		if err := b.where(where); err != nil {
			return Statement{}, err
		}
		b.orderBy(pkOrder)
		b.w(" LIMIT ")
		b.param(int64(limit))
	case SQLServer:
		b.w("WITH ", cteDelete, " AS (SELECT TOP (")
		b.param(int64(limit))
		b.w(") * FROM ")
		b.table()
		if err := b.where(where); err != nil {
			return Statement{}, err
		}
		b.orderBy(pkOrder)
		b.w(") DELETE FROM ", cteDelete)
	default:
		b.w("DELETE FROM ")
		b.table()
		b.w(" WHERE ")
		b.col(t.PrimaryKey)
		b.w(" IN (SELECT ")
		b.col(t.PrimaryKey)
		b.w(" FROM ")
		b.table()
		if err := b.where(where); err != nil {
			return Statement{}, err
		}
		b.orderBy(pkOrder)
		b.w(" LIMIT ")
		b.param(int64(limit))
		b.w(")")
	}
	return b.stmt()
}

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
	if r.dialect != MySQL && r.dialect != MariaDB {
		return Statement{}, fmt.Errorf("dialects: %w: no locking candidate read for %s", dao.ErrInvalidArgument, r.dialect)
	}
	if q.Limit <= 0 {
		return Statement{}, limitErr("claim", q.Limit)
	}
	st, err := r.Select(t, q)
	if err != nil {
		return Statement{}, err
	}
	st.SQL += " FOR UPDATE SKIP LOCKED"
	return st, nil
}

// UpdateByIDs renders UPDATE ... SET <set> WHERE pk IN (<ids>), the write
// of the MySQL and MariaDB fast path over rows its locking read holds. No
// ids, an empty set, or a set writing the primary key is an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) UpdateByIDs(t Table, ids []any, set dao.Set) (Statement, error) {
	if len(ids) == 0 {
		return Statement{}, fmt.Errorf("dialects: %w: update by ids with no ids", dao.ErrInvalidArgument)
	}
	return r.Update(t, dao.In(t.PrimaryKey, ids...), set)
}

// Claim renders the one-statement fast-path claim of PostgreSQL; for the
// other dialects it returns an error wrapping [dao.ErrInvalidArgument]
// (MySQL and MariaDB claim with [Renderer.LockCandidates] and
// [Renderer.UpdateByIDs]). req must have been checked by
// the portable store (dao.Table.CheckClaim) and req.Limit must be > 0.
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
func (r Renderer) Claim(t Table, req dao.ClaimRequest) (Statement, error) {
	if r.dialect != Postgres {
		return Statement{}, fmt.Errorf("dialects: %w: no fast-path claim for %s", dao.ErrInvalidArgument, r.dialect)
	}
	b, err := r.builder(t)
	if err != nil {
		return Statement{}, err
	}
	if req.Limit <= 0 {
		return Statement{}, limitErr("claim", req.Limit)
	}
	order := b.withPK(req.OrderBy)
	pk := r.Quote(t.PrimaryKey)
	// Copies of the ordering columns, carried out of claim_ids under
	// aliases, so the final ORDER BY sees the pre-claim values.
	alias := make([]string, len(order))
	b.w("WITH ", cteClaimIDs, " AS MATERIALIZED (SELECT ", pk)
	for i, o := range order {
		if o.Field == t.PrimaryKey {
			alias[i] = pk
			continue
		}
		alias[i] = orderAlias + strconv.Itoa(i+1)
		b.w(", ", r.Quote(o.Field), " AS ", alias[i])
	}
	b.w(" FROM ")
	b.table()
	if err := b.where(req.Where); err != nil {
		return Statement{}, err
	}
	b.orderBy(order)
	b.w(" LIMIT ")
	b.param(int64(req.Limit))
	b.w(" FOR UPDATE SKIP LOCKED), ", cteClaimed, " AS (UPDATE ")
	b.table()
	b.w(" AS ", claimAlias, " SET ")
	if err := b.set(req.Set, claimAlias); err != nil {
		return Statement{}, err
	}
	b.w(" FROM ", cteClaimIDs, " WHERE ", claimAlias, ".", pk, " = ", cteClaimIDs, ".", pk,
		" RETURNING ", claimAlias, ".*")
	for _, a := range alias {
		if a != pk {
			b.w(", ", cteClaimIDs, ".", a)
		}
	}
	b.w(") SELECT * FROM ", cteClaimed, " ORDER BY ")
	for i, o := range order {
		if i > 0 {
			b.w(", ")
		}
		b.orderTerm(cteClaimed+"."+alias[i], o.Field, o.Desc)
	}
	return b.stmt()
}
