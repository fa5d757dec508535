package dialects

import (
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// DefaultLeaseTable is the name of the leader lease table when none is
// given.
const DefaultLeaseTable = "claimstore_leaders"

// leaseStatements are one dialect's statements of the leader lease table
// (driver.LeaseStore), as text with holes:
//
//	{table}     the quoted table name
//	{tableText} the quoted table name, bound as a string value
//	{name}, {holder}, {ttl}, {term}  the election name, the holder id, the
//	            TTL in whole milliseconds (int64) and the term (int64),
//	            bound
//
// Every statement that reads the lease returns five columns: leader_id,
// term, elected_at, expires_at and the database's current time, the three
// times as microseconds since the Unix epoch (int64), computed by the
// database so that no driver's time parsing or session time zone is
// involved. Expiry is decided by the database's clock alone.
type leaseStatements struct {
	create string
	// acquire inserts, takes over or renews the lease in one statement.
	acquire string
	// readBack is true when acquire returns no row (MySQL, MariaDB): the
	// store then runs acquire and get in one transaction.
	readBack bool
	release  string
	get      string
	// list reads every lease: name, then get's five columns.
	list string
}

// Helpers that spell a dialect's clock and time conversions.
func pgUS(x string) string    { return "CAST(EXTRACT(EPOCH FROM " + x + ") * 1000000 AS BIGINT)" }
func myUS(x string) string    { return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + x + ")" }
func mssqlUS(x string) string { return "DATEDIFF_BIG(MICROSECOND, '19700101', " + x + ")" }

const (
	// PostgreSQL manual, 9.9.5 "Current Date/Time": statement_timestamp()
	// is the start of the current statement, the same in every reference.
	pgNow = "statement_timestamp()"
	// MySQL manual, "Date and Time Functions": functions that return the
	// current date or time are evaluated once per statement; UTC_TIMESTAMP
	// does not depend on the session time zone.
	myNow = "UTC_TIMESTAMP(6)"
	// SQLite "Date And Time Functions": 'now' is the same within one
	// sqlite3_step(); times are kept as integer microseconds since the
	// epoch.
	sqliteNow = "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
	// SQL Server: SYSUTCDATETIME(), a runtime constant within a statement.
	mssqlNow = "SYSUTCDATETIME()"
)

var pgLeases = leaseStatements{
	create: "CREATE TABLE IF NOT EXISTS {table} (name VARCHAR(191) NOT NULL PRIMARY KEY, leader_id VARCHAR(191) NOT NULL, " +
		"term BIGINT NOT NULL, elected_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL)",
	// PostgreSQL manual, INSERT → ON CONFLICT Clause: DO UPDATE ... WHERE
	// locks the conflicting row and updates it only when the condition
	// holds; the SET expressions read the row as it was, so the order of
	// the assignments does not matter. No row is returned when the
	// condition fails.
	acquire: "INSERT INTO {table} AS l (name, leader_id, term, elected_at, expires_at) VALUES ({name}, {holder}, 1, " + pgNow + ", " +
		pgNow + " + CAST({ttl} AS BIGINT) * INTERVAL '1 millisecond') ON CONFLICT (name) DO UPDATE SET " +
		"term = CASE WHEN l.expires_at <= " + pgNow + " THEN l.term + 1 ELSE l.term END, " +
		"elected_at = CASE WHEN l.expires_at <= " + pgNow + " THEN " + pgNow + " ELSE l.elected_at END, " +
		"leader_id = EXCLUDED.leader_id, expires_at = EXCLUDED.expires_at " +
		"WHERE l.expires_at <= " + pgNow + " OR l.leader_id = EXCLUDED.leader_id " +
		"RETURNING l.leader_id, l.term, " + pgUS("l.elected_at") + ", " + pgUS("l.expires_at") + ", " + pgUS(pgNow),
	release: "UPDATE {table} SET expires_at = " + pgNow + " WHERE name = {name} AND leader_id = {holder} AND term = {term} AND expires_at > " + pgNow,
	get:     "SELECT leader_id, term, " + pgUS("elected_at") + ", " + pgUS("expires_at") + ", " + pgUS(pgNow) + " FROM {table} WHERE name = {name}",
	list:    "SELECT name, leader_id, term, " + pgUS("elected_at") + ", " + pgUS("expires_at") + ", " + pgUS(pgNow) + " FROM {table} ORDER BY name",
}

var mysqlLeases = leaseStatements{
	// Binary collation: holder ids that differ only in case or accents
	// are different holders.
	create: "CREATE TABLE IF NOT EXISTS {table} (name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, " +
		"leader_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, term BIGINT NOT NULL, " +
		"elected_at DATETIME(6) NOT NULL, expires_at DATETIME(6) NOT NULL)",
	// MySQL manual, "INSERT ... ON DUPLICATE KEY UPDATE Statement" and
	// "UPDATE Statement": the assignments run left to right and each sees
	// the values the earlier ones wrote. So term and elected_at, which
	// test the old expires_at, come first; leader_id changes only on a
	// takeover; expires_at comes last and tests the new leader_id, which
	// equals the candidate exactly when it took the lease over or already
	// held it. An unexpired lease of another holder is left as it was.
	acquire: "INSERT INTO {table} (name, leader_id, term, elected_at, expires_at) VALUES ({name}, {holder}, 1, " + myNow + ", " +
		myNow + " + INTERVAL ({ttl} * 1000) MICROSECOND) ON DUPLICATE KEY UPDATE " +
		"term = IF(expires_at <= " + myNow + ", term + 1, term), " +
		"elected_at = IF(expires_at <= " + myNow + ", " + myNow + ", elected_at), " +
		"leader_id = IF(expires_at <= " + myNow + ", {holder}, leader_id), " +
		"expires_at = IF(leader_id = {holder}, " + myNow + " + INTERVAL ({ttl} * 1000) MICROSECOND, expires_at)",
	readBack: true,
	release:  "UPDATE {table} SET expires_at = " + myNow + " WHERE name = {name} AND leader_id = {holder} AND term = {term} AND expires_at > " + myNow,
	get:      "SELECT leader_id, term, " + myUS("elected_at") + ", " + myUS("expires_at") + ", " + myUS(myNow) + " FROM {table} WHERE name = {name}",
	list:     "SELECT name, leader_id, term, " + myUS("elected_at") + ", " + myUS("expires_at") + ", " + myUS(myNow) + " FROM {table} ORDER BY name",
}

var sqliteLeases = leaseStatements{
	create: "CREATE TABLE IF NOT EXISTS {table} (name TEXT NOT NULL PRIMARY KEY, leader_id TEXT NOT NULL, term INTEGER NOT NULL, " +
		"elected_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)",
	// SQLite "UPSERT" (3.24.0) and "RETURNING" (3.35.0): the DO UPDATE
	// expressions read the existing row, excluded.* the proposed one;
	// RETURNING reports nothing when the WHERE fails.
	acquire: "INSERT INTO {table} (name, leader_id, term, elected_at, expires_at) VALUES ({name}, {holder}, 1, " + sqliteNow + ", " +
		sqliteNow + " + {ttl} * 1000) ON CONFLICT (name) DO UPDATE SET " +
		"term = CASE WHEN expires_at <= " + sqliteNow + " THEN term + 1 ELSE term END, " +
		"elected_at = CASE WHEN expires_at <= " + sqliteNow + " THEN " + sqliteNow + " ELSE elected_at END, " +
		"leader_id = excluded.leader_id, expires_at = excluded.expires_at " +
		"WHERE expires_at <= " + sqliteNow + " OR leader_id = excluded.leader_id " +
		"RETURNING leader_id, term, elected_at, expires_at, " + sqliteNow,
	release: "UPDATE {table} SET expires_at = " + sqliteNow + " WHERE name = {name} AND leader_id = {holder} AND term = {term} AND expires_at > " + sqliteNow,
	get:     "SELECT leader_id, term, elected_at, expires_at, " + sqliteNow + " FROM {table} WHERE name = {name}",
	list:    "SELECT name, leader_id, term, elected_at, expires_at, " + sqliteNow + " FROM {table} ORDER BY name",
}

var mssqlLeases = leaseStatements{
	create: "IF OBJECT_ID({tableText}, N'U') IS NULL CREATE TABLE {table} (name NVARCHAR(191) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY, " +
		"leader_id NVARCHAR(191) COLLATE Latin1_General_100_BIN2 NOT NULL, term BIGINT NOT NULL, " +
		"elected_at DATETIME2(6) NOT NULL, expires_at DATETIME2(6) NOT NULL)",
	// Transact-SQL reference, MERGE: HOLDLOCK (serializable) keeps the
	// key range locked from the match to the write, so two candidates
	// cannot both insert or both take over; OUTPUT reports the written
	// row, and nothing when the WHEN MATCHED condition fails.
	acquire: "MERGE {table} WITH (HOLDLOCK) AS l USING (SELECT {name} AS name, {holder} AS leader_id) AS s ON l.name = s.name " +
		"WHEN MATCHED AND (l.expires_at <= " + mssqlNow + " OR l.leader_id = s.leader_id) THEN UPDATE SET " +
		"term = CASE WHEN l.expires_at <= " + mssqlNow + " THEN l.term + 1 ELSE l.term END, " +
		"elected_at = CASE WHEN l.expires_at <= " + mssqlNow + " THEN " + mssqlNow + " ELSE l.elected_at END, " +
		"leader_id = s.leader_id, expires_at = DATEADD(MILLISECOND, CAST({ttl} AS INT), " + mssqlNow + ") " +
		"WHEN NOT MATCHED THEN INSERT (name, leader_id, term, elected_at, expires_at) VALUES (s.name, s.leader_id, 1, " + mssqlNow + ", " +
		"DATEADD(MILLISECOND, CAST({ttl} AS INT), " + mssqlNow + ")) " +
		"OUTPUT inserted.leader_id, inserted.term, " + mssqlUS("inserted.elected_at") + ", " + mssqlUS("inserted.expires_at") + ", " + mssqlUS(mssqlNow) + ";",
	release: "UPDATE {table} SET expires_at = " + mssqlNow + " WHERE name = {name} AND leader_id = {holder} AND term = {term} AND expires_at > " + mssqlNow,
	get:     "SELECT leader_id, term, " + mssqlUS("elected_at") + ", " + mssqlUS("expires_at") + ", " + mssqlUS(mssqlNow) + " FROM {table} WHERE name = {name}",
	list:    "SELECT name, leader_id, term, " + mssqlUS("elected_at") + ", " + mssqlUS("expires_at") + ", " + mssqlUS(mssqlNow) + " FROM {table} ORDER BY name",
}

// leaseTable maps each dialect to its lease statements.
var leaseTable = map[Name]*leaseStatements{
	Postgres: &pgLeases, MySQL: &mysqlLeases, MariaDB: &mysqlLeases, SQLite: &sqliteLeases, SQLServer: &mssqlLeases,
	// CockroachDB and YugabyteDB have INSERT ... ON CONFLICT DO UPDATE
	// ... WHERE ... RETURNING and statement_timestamp() as PostgreSQL does.
	CockroachDB: &pgLeases, YugabyteDB: &pgLeases,
}

// leaseArgs are the values the holes of a lease statement bind.
type leaseArgs struct {
	table, name, holder string
	ttl, term           int64
}

// renderLease fills the holes of src.
func (r Renderer) renderLease(src string, a leaseArgs) (Statement, error) {
	if r.d == nil {
		return Statement{}, fmt.Errorf("dialects: %w: zero Renderer (use NewRenderer)", dao.ErrInvalidArgument)
	}
	if a.table == "" {
		return Statement{}, fmt.Errorf("dialects: %w: empty lease table name", dao.ErrInvalidArgument)
	}
	return r.fillHoles(src, "lease", func(hole string, w func(string), bind func(any)) bool {
		switch hole {
		case "table":
			w(r.d.quoteTable(a.table))
		case "tableText":
			bind(r.d.quoteTable(a.table))
		case "name":
			bind(a.name)
		case "holder":
			bind(a.holder)
		case "ttl":
			bind(a.ttl)
		case "term":
			bind(a.term)
		default:
			return false
		}
		return true
	})
}

// leases returns the lease statements of r's dialect.
func (r Renderer) leases() (*leaseStatements, error) {
	if r.d == nil {
		return nil, fmt.Errorf("dialects: %w: zero Renderer (use NewRenderer)", dao.ErrInvalidArgument)
	}
	ls := leaseTable[r.d.name]
	if ls == nil {
		return nil, fmt.Errorf("dialects: %w: no lease statements for %s", dao.ErrInvalidArgument, r.d.name)
	}
	return ls, nil
}

// LeaseCreateTable renders the creation, if it does not exist, of the
// leader lease table named table (see [DefaultLeaseTable]): name (primary
// key) and leader_id of up to 191 characters compared byte for byte,
// term (64-bit integer), elected_at and expires_at (TIMESTAMPTZ on
// PostgreSQL, DATETIME(6) in UTC on MySQL and MariaDB, DATETIME2(6) in UTC
// on SQL Server, integer microseconds since the Unix epoch on SQLite).
// An empty table name or the zero Renderer is an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) LeaseCreateTable(table string) (Statement, error) {
	ls, err := r.leases()
	if err != nil {
		return Statement{}, err
	}
	return r.renderLease(ls.create, leaseArgs{table: table})
}

// LeaseAcquire renders the one statement that inserts name's lease for
// holder with term 1, takes over a lease that has expired by the
// database's clock (term + 1, elected_at now), renews holder's unexpired
// lease (term kept) or leaves another holder's unexpired lease alone; the
// new expiry is the database's now plus ttl. PostgreSQL and SQLite: INSERT
// … ON CONFLICT (name) DO UPDATE … WHERE … RETURNING; SQL Server: MERGE …
// WITH (HOLDLOCK) … OUTPUT; each returns the lease's five columns (see
// [Renderer.LeaseGet]) when holder holds it afterwards and no row
// otherwise. MySQL and MariaDB: INSERT … ON DUPLICATE KEY UPDATE with
// conditional assignments ordered for their left-to-right evaluation; it
// returns nothing, and [Renderer.LeaseReadBack] reports whether the
// statement must be followed by LeaseGet in the same transaction. Bad
// arguments (see driver.CheckAcquire) are an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) LeaseAcquire(table, name, holder string, ttl time.Duration) (Statement, error) {
	ls, err := r.leases()
	if err != nil {
		return Statement{}, err
	}
	if err := driver.CheckAcquire(name, holder, ttl); err != nil {
		return Statement{}, fmt.Errorf("dialects: %w", err)
	}
	return r.renderLease(ls.acquire, leaseArgs{table: table, name: name, holder: holder, ttl: ttl.Milliseconds()})
}

// LeaseReadBack reports whether [Renderer.LeaseAcquire]'s statement
// returns no row on r's dialect (MySQL, MariaDB), so that the lease must
// be read with [Renderer.LeaseGet] in the same transaction; holder holds
// the lease exactly when the row read names it.
func (r Renderer) LeaseReadBack() bool {
	ls, err := r.leases()
	return err == nil && ls.readBack
}

// LeaseRelease renders the release of holder's unexpired lease on name in
// term: its expires_at becomes the database's now, so the next
// acquisition takes it over. It affects one row when it released the
// lease and none otherwise. Bad arguments are an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) LeaseRelease(table, name, holder string, term int64) (Statement, error) {
	ls, err := r.leases()
	if err != nil {
		return Statement{}, err
	}
	if err := driver.CheckLeaseID("name", name); err != nil {
		return Statement{}, fmt.Errorf("dialects: %w", err)
	}
	if err := driver.CheckLeaseID("holder", holder); err != nil {
		return Statement{}, fmt.Errorf("dialects: %w", err)
	}
	return r.renderLease(ls.release, leaseArgs{table: table, name: name, holder: holder, term: term})
}

// LeaseGet renders the read of name's lease: leader_id, term, elected_at,
// expires_at and the database's now, the three times as int64
// microseconds since the Unix epoch. A bad name is an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) LeaseGet(table, name string) (Statement, error) {
	ls, err := r.leases()
	if err != nil {
		return Statement{}, err
	}
	if err := driver.CheckLeaseID("name", name); err != nil {
		return Statement{}, fmt.Errorf("dialects: %w", err)
	}
	return r.renderLease(ls.get, leaseArgs{table: table, name: name})
}

// LeaseList renders the read of every lease of the table, ordered by
// name: name, then the five columns of [Renderer.LeaseGet].
func (r Renderer) LeaseList(table string) (Statement, error) {
	ls, err := r.leases()
	if err != nil {
		return Statement{}, err
	}
	return r.renderLease(ls.list, leaseArgs{table: table})
}
