package dialects

import (
	"strings"

	"github.com/claimstore/claimstore/dao/driver"
)

// dialect is everything that tells one SQL dialect from another, as data:
// how it quotes identifiers and spells bind parameters, how many values a
// statement may bind, how it sorts NULLs, and the skeleton of every
// statement. The renderer has one code path for every dialect; adding a
// dialect is adding its [Name] and a value to dialectTable.
type dialect struct {
	name Name
	// quoteOpen and quoteClose enclose an identifier; quoteClose is
	// doubled inside it.
	quoteOpen, quoteClose string
	// param is the text of a bind parameter. When numbered, the 1-based
	// position of the value follows it ($1, @p1).
	param    string
	numbered bool
	// maxParams is the most values one statement may bind
	// ([Renderer.MaxParams] says where each number comes from).
	maxParams int
	// utcTimes binds every time.Time in UTC.
	utcTimes bool
	// nullsAsc and nullsDesc are the ORDER BY terms of a nullable column,
	// ascending and descending, that place NULLs the way PostgreSQL does
	// by default (after every value ascending, first descending). {expr}
	// stands for the sorted expression.
	nullsAsc, nullsDesc string
	// now holds the expressions of the database's current time in each
	// driver.TimeForm, written for a driver.CurrentTime Set value; nil
	// when the dialect writes the application's clock instead (see
	// [Renderer.CurrentTime]).
	now   map[driver.TimeForm]string
	stmts statements
	// fanOut holds the fragments of [Renderer.FanOut]; nil where the
	// dialect has no fan-out statement.
	fanOut *fanOutSQL
}

// statements holds a dialect's statement skeletons (see skeleton for the
// holes they may use). A zero skeleton means the dialect has no such
// statement; the method rendering it then refuses. A new statement kind
// (a lease renewal, an advisory lock, a leader lease) is a field here, a
// skeleton per dialect that has it, and a method that gathers its
// request and renders the skeleton.
type statements struct {
	selectAll     skeleton // Select without a limit
	selectLimit   skeleton // Select with a limit
	count         skeleton
	lockingCount  skeleton
	update        skeleton
	guardedUpdate skeleton // portable claim's per-row write
	// guardedUpdatePK is guardedUpdate reading the row through the
	// primary-key index, for a table whose primary key is Table.PrimaryKey
	// (Table.PrimaryIndex); zero where the dialect needs no hint.
	guardedUpdatePK skeleton
	updateByIDs     skeleton
	updateKeys      skeleton // update reporting the keys it matched (RETURNING, OUTPUT)
	lockKeys        skeleton // locking read of the keys an updateByIDs then writes
	deleteLimit     skeleton // bounded delete, smallest keys first
	lockCandidates  skeleton // locking read of the MySQL/MariaDB fast path
	claim           skeleton // one-statement fast-path claim
}

// Skeletons several dialects share.
var (
	plainSelectAll   = mustParse("SELECT * FROM {table}{where} ORDER BY {order}")
	plainSelectLimit = mustParse("SELECT * FROM {table}{where} ORDER BY {order} LIMIT {limit}")
	plainCount       = mustParse("SELECT COUNT(*) FROM {table}{where}")
	plainUpdate      = mustParse("UPDATE {table} SET {set}{where}")
	plainGuarded     = mustParse("UPDATE {table} SET {set} WHERE {pk} = {id}{andWhere}")
	plainUpdateByIDs = mustParse("UPDATE {table} SET {set} WHERE {pk} IN ({ids})")
	// UPDATE ... RETURNING: PostgreSQL ("UPDATE": output_expression) and
	// SQLite 3.35.0 or later ("The RETURNING Clause").
	returningUpdate = mustParse("UPDATE {table} SET {set}{where} RETURNING {pk}")
	// PostgreSQL and SQLite (unless built with
	// SQLITE_ENABLE_UPDATE_DELETE_LIMIT) have no DELETE ... LIMIT, so a
	// subquery picks the victims.
	subqueryDelete = mustParse("DELETE FROM {table} WHERE {pk} IN (SELECT {pk} FROM {table}{where} ORDER BY {order} LIMIT {limit})")
)

// mysqlStatements serve MySQL and MariaDB alike.
var mysqlStatements = statements{
	selectAll:     plainSelectAll,
	selectLimit:   plainSelectLimit,
	count:         plainCount,
	lockingCount:  mustParse("SELECT COUNT(*) FROM {table}{where} FOR UPDATE"),
	update:        plainUpdate,
	guardedUpdate: plainGuarded,
	// FORCE INDEX (PRIMARY) in a single-table UPDATE (MySQL manual,
	// "Index Hints": they apply to SELECT and UPDATE; MariaDB, "FORCE
	// INDEX"): the row is found and locked through the primary key alone.
	// Left to itself the optimizer may read it through a secondary index
	// the guard's columns lead (status, id), and a waiting update then
	// holds that index entry while it waits for the row: the transaction
	// holding the row cannot move the entry (its outcome write changes
	// status) and InnoDB ends the deadlock by rolling one of them back.
	guardedUpdatePK: mustParse("UPDATE {table} FORCE INDEX (PRIMARY) SET {set} WHERE {pk} = {id}{andWhere}"),
	updateByIDs:     plainUpdateByIDs,
	// MySQL has no UPDATE ... RETURNING, nor MariaDB before 13: the keys
	// are read with a locking read ("Locking Reads") in the transaction
	// whose updateByIDs writes them.
	lockKeys:    mustParse("SELECT {pk} FROM {table}{where} FOR UPDATE"),
	deleteLimit: mustParse("DELETE FROM {table}{where} ORDER BY {order} LIMIT {limit}"),
	// MySQL 8.0.1+, MariaDB 10.6+.
	lockCandidates: mustParse("SELECT * FROM {table}{where} ORDER BY {order} LIMIT {limit} FOR UPDATE SKIP LOCKED"),
}

// PostgreSQL's NULL ordering: ASC NULLS LAST and DESC NULLS FIRST are
// its defaults.
const (
	pgNullsAsc  = "{expr}"
	pgNullsDesc = "{expr} DESC"
)

// pgNowForms: statement_timestamp() is the time the statement began, one value
// for every row it writes (PostgreSQL manual, 9.9.5 "Current Date/Time");
// a timestamptz, stored without regard to the session time zone.
// EXTRACT(EPOCH …) of it is zone-independent (9.9.1); FLOOR truncates as
// Go's Unix, UnixMilli and UnixNano do.
var pgNowForms = map[driver.TimeForm]string{
	driver.TimeValue:   "statement_timestamp()",
	driver.UnixSeconds: "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp())) AS BIGINT)",
	driver.UnixMillis:  "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)",
	driver.UnixNanos:   "CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000) AS BIGINT) * 1000",
}

// pgClaim is the PostgreSQL fast-path claim with its common table
// expression's materialization written in {materialized} (see
// Renderer.Claim).
const pgClaim = "WITH claim_ids AS {materialized}(SELECT {pk}{orderAliases} FROM {table}{where} ORDER BY {order} LIMIT {limit} FOR UPDATE SKIP LOCKED), " +
	"claimed AS (UPDATE {table} AS t SET {set:t} FROM claim_ids WHERE t.{pk} = claim_ids.{pk} RETURNING t.*{orderCopies:claim_ids}) " +
	"SELECT * FROM claimed ORDER BY {orderByCopies:claimed}"

// pgStatements serve PostgreSQL and CockroachDB; ybStatements YugabyteDB.
var (
	pgStatements = statements{
		selectAll:   plainSelectAll,
		selectLimit: plainSelectLimit,
		count:       plainCount,
		// PostgreSQL refuses FOR UPDATE with an aggregate.
		lockingCount:  mustParse("SELECT COUNT(*) FROM (SELECT 1 FROM {table}{where} FOR UPDATE) AS locked"),
		update:        plainUpdate,
		guardedUpdate: plainGuarded,
		updateByIDs:   plainUpdateByIDs,
		updateKeys:    returningUpdate,
		deleteLimit:   subqueryDelete,
		claim:         mustParse(strings.Replace(pgClaim, "{materialized}", "MATERIALIZED ", 1)),
	}
	ybStatements = func() statements {
		s := pgStatements
		s.claim = mustParse(strings.Replace(pgClaim, "{materialized}", "", 1))
		return s
	}()
)

// dialectTable lists every dialect the renderer knows.
var dialectTable = []*dialect{
	{
		name: Postgres, quoteOpen: `"`, quoteClose: `"`, param: "$", numbered: true, maxParams: 65535,
		nullsAsc: pgNullsAsc, nullsDesc: pgNullsDesc, now: pgNowForms, stmts: pgStatements, fanOut: pgFanOut,
	},
	{
		// CockroachDB: the PostgreSQL statements. FOR UPDATE SKIP LOCKED
		// since 22.2 ("SELECT FOR UPDATE": wait policies), AS MATERIALIZED
		// common table expressions ("Common Table Expressions":
		// MATERIALIZED / NOT MATERIALIZED), UPDATE ... FROM ... RETURNING
		// inside WITH (data-modifying CTEs), statement_timestamp(), and
		// NULLs first ascending as in PostgreSQL ("ORDER BY": NULLS
		// FIRST/LAST). The claim needs READ COMMITTED: see isolationTable.
		name: CockroachDB, quoteOpen: `"`, quoteClose: `"`, param: "$", numbered: true, maxParams: 65535,
		nullsAsc: pgNullsAsc, nullsDesc: pgNullsDesc, now: pgNowForms, stmts: pgStatements,
	},
	{
		// YugabyteDB's YSQL is the PostgreSQL query layer (PostgreSQL 11.2
		// up to the 2.20 and 2024.x series, 15 from 2.25 on), so it takes
		// the PostgreSQL statements, except that the claim's common table
		// expression is not marked MATERIALIZED: PostgreSQL 11 has no such
		// keyword and evaluates every WITH query exactly once ("WITH
		// Queries (Common Table Expressions)", PostgreSQL 11 manual); from
		// PostgreSQL 12 on only a side-effect-free SELECT may be folded
		// into the outer query, and one with a locking clause is not.
		// SKIP LOCKED needs READ COMMITTED or REPEATABLE READ, not
		// SERIALIZABLE: see isolationTable.
		name: YugabyteDB, quoteOpen: `"`, quoteClose: `"`, param: "$", numbered: true, maxParams: 65535,
		nullsAsc: pgNullsAsc, nullsDesc: pgNullsDesc, now: pgNowForms, stmts: ybStatements, fanOut: pgFanOut,
	},
	{
		name: MySQL, quoteOpen: "`", quoteClose: "`", param: "?", maxParams: 65535,
		// NULLs sort first ascending and there is no NULLS LAST: sort on
		// "expr IS NULL" (0 or 1) first.
		nullsAsc: "{expr} IS NULL, {expr}", nullsDesc: "{expr} IS NULL DESC, {expr} DESC",
		stmts: mysqlStatements,
	},
	{
		name: MariaDB, quoteOpen: "`", quoteClose: "`", param: "?", maxParams: 65535,
		nullsAsc: "{expr} IS NULL, {expr}", nullsDesc: "{expr} IS NULL DESC, {expr} DESC",
		stmts: mysqlStatements,
	},
	{
		// SQLite has no time type and compares the driver's time text,
		// which follows time order only when every value has the same
		// offset, hence utcTimes.
		name: SQLite, quoteOpen: `"`, quoteClose: `"`, param: "?", maxParams: 32766, utcTimes: true,
		// NULLs sort first ascending; NULLS FIRST/LAST exist since 3.30.0.
		nullsAsc: "{expr} NULLS LAST", nullsDesc: "{expr} DESC NULLS FIRST",
		stmts: statements{
			selectAll:   plainSelectAll,
			selectLimit: plainSelectLimit,
			count:       plainCount,
			// A write transaction (BEGIN IMMEDIATE) already excludes every
			// other writer.
			lockingCount:  plainCount,
			update:        plainUpdate,
			guardedUpdate: plainGuarded,
			updateByIDs:   plainUpdateByIDs,
			updateKeys:    returningUpdate,
			deleteLimit:   subqueryDelete,
			// RETURNING and MATERIALIZED need SQLite 3.35.0 or later,
			// row_number() 3.25.0 (see Renderer.Claim). The claim's size
			// is bound inside a CAST: SQLite reads a LIMIT that is a bare
			// parameter as the integer bound to it when it prepares the
			// statement, and marks the statement to be prepared again
			// whenever that parameter is bound anew or the bindings are
			// cleared (as database/sql drivers do after each query), so a
			// statement kept prepared would be parsed and planned again
			// at each claim. Without the size, the plan reads the same
			// index in the same order.
			claim: mustParse("WITH claim_ids AS MATERIALIZED (SELECT {pk}, row_number() OVER (ORDER BY {order}) AS claimstore_rank " +
				"FROM (SELECT * FROM {table}{where} ORDER BY {order} LIMIT CAST({limit} AS INTEGER))) " +
				"UPDATE {table} SET {set} WHERE {pk} IN (SELECT {pk} FROM claim_ids) " +
				"RETURNING *, (SELECT claimstore_rank FROM claim_ids WHERE claim_ids.{pk} = {table}.{pk}) AS claimstore_rank"),
		},
	},
	{
		name: SQLServer, quoteOpen: "[", quoteClose: "]", param: "@p", numbered: true, maxParams: 2100,
		nullsAsc:  "CASE WHEN {expr} IS NULL THEN 1 ELSE 0 END, {expr}",
		nullsDesc: "CASE WHEN {expr} IS NULL THEN 1 ELSE 0 END DESC, {expr} DESC",
		// SYSUTCDATETIME() is the server's UTC time as datetime2(7), which
		// a datetimeoffset column stores with offset +00:00; DATEDIFF_BIG
		// counts the unit boundaries since the epoch (Transact-SQL
		// reference, "SYSUTCDATETIME", "DATEDIFF_BIG").
		now: map[driver.TimeForm]string{
			driver.TimeValue:   "SYSUTCDATETIME()",
			driver.UnixSeconds: "DATEDIFF_BIG(SECOND, '19700101', SYSUTCDATETIME())",
			driver.UnixMillis:  "DATEDIFF_BIG(MILLISECOND, '19700101', SYSUTCDATETIME())",
			driver.UnixNanos:   "DATEDIFF_BIG(NANOSECOND, '19700101', SYSUTCDATETIME())",
		},
		stmts: statements{
			selectAll: plainSelectAll,
			// TOP (n) with ORDER BY returns the first n rows of that order.
			selectLimit:   mustParse("SELECT TOP ({limit}) * FROM {table}{where} ORDER BY {order}"),
			count:         plainCount,
			lockingCount:  mustParse("SELECT COUNT(*) FROM {table} WITH (UPDLOCK, HOLDLOCK){where}"),
			update:        plainUpdate,
			guardedUpdate: plainGuarded,
			updateByIDs:   plainUpdateByIDs,
			// The OUTPUT clause stands between SET and WHERE (Transact-SQL
			// reference, "OUTPUT Clause").
			updateKeys: mustParse("UPDATE {table} SET {set} OUTPUT INSERTED.{pk}{where}"),
			// DELETE TOP (n) takes no ORDER BY: delete through an ordered
			// common table expression.
			deleteLimit: mustParse("WITH delete_batch AS (SELECT TOP ({limit}) * FROM {table}{where} ORDER BY {order}) DELETE FROM delete_batch"),
			// An UPDATE through an ordered common table expression, as
			// deleteLimit; the hints lock the rows it reads and pass over
			// rows other transactions hold.
			claim: mustParse("WITH claimed AS (SELECT TOP ({limit}) * FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK){where} ORDER BY {order}) UPDATE claimed SET {set} OUTPUT INSERTED.*"),
		},
	},
}

// lookup returns the data of dialect n, or nil for an unknown dialect.
func lookup(n Name) *dialect {
	for _, d := range dialectTable {
		if d.name == n {
			return d
		}
	}
	return nil
}
