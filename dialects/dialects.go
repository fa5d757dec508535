package dialects

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm"
)

// Name identifies an SQL dialect.
type Name string

// The dialects this package renders SQL for.
const (
	Postgres  Name = "postgres"
	MySQL     Name = "mysql"
	MariaDB   Name = "mariadb"
	SQLite    Name = "sqlite"
	SQLServer Name = "sqlserver"
	// CockroachDB and YugabyteDB speak the PostgreSQL wire protocol and
	// are reached through the PostgreSQL backend (pgx); [Detect] tells
	// them from PostgreSQL by the server's version string.
	CockroachDB Name = "cockroachdb"
	YugabyteDB  Name = "yugabytedb"
)

// Galera names MariaDB Galera Cluster: MariaDB servers that replicate
// synchronously, every node accepting writes. It stands beside [MariaDB]
// as [CockroachDB] and [YugabyteDB] stand beside [Postgres], with one
// difference: its SQL is MariaDB's statement for statement, so it is a
// variant, not a dialect of its own. It is not in [All] and [Parse] does
// not take it; [Detect] reports a node as [MariaDB], whose statements a
// store runs there; [DetectVariant] (or [DetectGalera]) tells a node from
// a lone server; [Family] returns [MySQL] for it; [Behaviours] lists how
// it differs from a lone MariaDB server and what claimstore does about
// each difference, with the sources.
const Galera Name = "galera"

// All returns every dialect this package knows, in a fixed order.
func All() []Name {
	return []Name{Postgres, MySQL, MariaDB, SQLite, SQLServer, CockroachDB, YugabyteDB}
}

// Family returns the dialect whose wire protocol, GORM dialector and
// database driver n uses: [Postgres] for CockroachDB and YugabyteDB,
// [MySQL] for MariaDB and [Galera], n itself otherwise. Code that depends on the driver
// rather than on the SQL text (scanning, error codes, session settings)
// asks for the family; the statements come from n's own data.
func Family(n Name) Name {
	switch n {
	case CockroachDB, YugabyteDB:
		return Postgres
	case MariaDB, Galera:
		return MySQL
	}
	return n
}

// String returns the dialect name.
func (n Name) String() string { return string(n) }

// Parse returns the dialect named s (case-insensitive; "postgresql" and
// "pg" are accepted for Postgres, "mssql" for SQL Server, "sqlite3" for
// SQLite, "cockroach" and "crdb" for CockroachDB, "yugabyte" and "ysql" for
// YugabyteDB). An unknown name is an error wrapping [dao.ErrInvalidArgument].
func Parse(s string) (Name, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "postgres", "postgresql", "pg", "pgx":
		return Postgres, nil
	case "mysql":
		return MySQL, nil
	case "mariadb":
		return MariaDB, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	case "sqlserver", "mssql":
		return SQLServer, nil
	case "cockroachdb", "cockroach", "crdb":
		return CockroachDB, nil
	case "yugabytedb", "yugabyte", "ysql":
		return YugabyteDB, nil
	}
	return "", fmt.Errorf("dialects: %w: unknown dialect %q (want one of %v)", dao.ErrInvalidArgument, s, All())
}

// Detect returns the dialect of db from its GORM dialector. For the MySQL
// and PostgreSQL dialectors it asks the server for its version string with
// SELECT VERSION() (one round trip, run with ctx) and reads the dialect
// from it ([FromVersion]): MariaDB from MySQL, CockroachDB and YugabyteDB
// from PostgreSQL. For the other dialectors it does no I/O. An unknown
// dialector is an error wrapping [dao.ErrInvalidArgument]; a failed version
// query returns the driver's error, wrapped.
func Detect(ctx context.Context, db *gorm.DB) (Name, error) {
	n, _, err := DetectVersion(ctx, db)
	return n, err
}

// DetectVersion is [Detect] that also returns the server's version string
// as SELECT VERSION() returned it ("" for SQLite and SQL Server, which
// Detect does not ask), for [SkipLocked]. Its errors are Detect's.
func DetectVersion(ctx context.Context, db *gorm.DB) (Name, string, error) {
	if db == nil || db.Dialector == nil {
		return "", "", fmt.Errorf("dialects: detect: %w: nil *gorm.DB or dialector", dao.ErrInvalidArgument)
	}
	var family Name
	switch name := db.Dialector.Name(); name {
	case "sqlite", "sqlite3":
		return SQLite, "", nil
	case "sqlserver":
		return SQLServer, "", nil
	case "postgres":
		family = Postgres
	case "mysql":
		family = MySQL
	default:
		return "", "", fmt.Errorf("dialects: detect: %w: unsupported GORM dialector %q", dao.ErrInvalidArgument, name)
	}
	var version string
	if err := db.WithContext(ctx).Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
		return "", "", fmt.Errorf("dialects: detect: SELECT VERSION(): %w", err)
	}
	return FromVersion(family, version), version, nil
}

// SkipLocked reports whether a server of dialect n whose SELECT VERSION()
// returned version runs SELECT ... FOR UPDATE SKIP LOCKED, the locking
// read of the MySQL and MariaDB fast path ([Renderer.LockCandidates]):
// MySQL 8.0.1 and later (MySQL manual, "Locking Reads": "Locking Read
// Concurrency with NOWAIT and SKIP LOCKED"), MariaDB 10.6 and later
// (MariaDB Knowledge Base, "SELECT ... SKIP LOCKED"). A version string it
// cannot read is reported false. For every other dialect it returns
// [HasFastPath](n): their fast paths do not depend on the version this
// package accepts.
func SkipLocked(n Name, version string) bool {
	var least [3]int
	switch n {
	case MySQL:
		least = [3]int{8, 0, 1}
	case MariaDB:
		least = [3]int{10, 6, 0}
	default:
		return HasFastPath(n)
	}
	v, ok := parseVersion(version)
	if !ok {
		return false
	}
	for i := range v {
		if v[i] != least[i] {
			return v[i] > least[i]
		}
	}
	return true
}

// parseVersion reads the leading major.minor.patch numbers of a MySQL or
// MariaDB version string such as "8.0.36", "5.7.44-log" or
// "10.11.6-MariaDB-0+deb12u1". A missing patch number reads as 0; a
// string without major and minor numbers is not read (false).
func parseVersion(version string) ([3]int, bool) {
	var v [3]int
	number, _, _ := strings.Cut(strings.TrimSpace(version), "-")
	parts := strings.SplitN(number, ".", 4)
	if len(parts) < 2 {
		return v, false
	}
	for i := 0; i < len(v) && i < len(parts); i++ {
		digits := 0
		for digits < len(parts[i]) && digits < 6 && parts[i][digits] >= '0' && parts[i][digits] <= '9' {
			v[i] = v[i]*10 + int(parts[i][digits]-'0')
			digits++
		}
		if digits == 0 {
			return v, false
		}
	}
	return v, true
}

// FromVersion returns the dialect of a server of the given family
// ([Postgres] or [MySQL]) whose SELECT VERSION() returned version:
//
//   - MySQL family: [MariaDB] when version contains "MariaDB" (MariaDB
//     reports for example "11.4.2-MariaDB-ubu2404"), [MySQL] otherwise.
//   - PostgreSQL family: [CockroachDB] when version starts with
//     "CockroachDB" (CockroachDB reports "CockroachDB CCL v24.1.0
//     (x86_64-pc-linux-gnu, built …)", or "CockroachDB OSS v…");
//     [YugabyteDB] when the PostgreSQL version number carries the "-YB-"
//     suffix of YugabyteDB builds ("PostgreSQL 11.2-YB-2.20.2.0-b0 on
//     x86_64-pc-linux-gnu, …", "PostgreSQL 15.2-YB-2.25.0.0-b0 on …");
//     [Postgres] otherwise.
//
// Any other family is returned unchanged.
func FromVersion(family Name, version string) Name {
	v := strings.TrimSpace(version)
	switch family {
	case MySQL:
		if strings.Contains(v, "MariaDB") {
			return MariaDB
		}
		return MySQL
	case Postgres:
		if strings.HasPrefix(v, "CockroachDB ") {
			return CockroachDB
		}
		if rest, ok := strings.CutPrefix(v, "PostgreSQL "); ok {
			number, _, _ := strings.Cut(rest, " ")
			if strings.Contains(number, "-YB-") {
				return YugabyteDB
			}
		}
		return Postgres
	}
	return family
}

// DefaultFastPath returns the dialects whose claim runs the one-statement
// fast path unless a store is configured otherwise: PostgreSQL and SQLite.
// On SQLite, whose writers serialize, the one UPDATE … RETURNING keeps the
// whole claim contract and measured at least 0.8× the raw driver running
// the same statement and 3× the portable default (docs/benchmarks.md).
// Every other dialect runs the portable default of package dao until
// measurement shows that its fast path is worth turning on. The slice is a
// fresh copy.
func DefaultFastPath() []Name { return []Name{Postgres, SQLite} }

// LibraryTableFastPath returns the dialects whose claim runs the fast path
// by default on a table a library owns (a model implementing
// dao.LibraryTable, such as the job table of package jobs): those of
// [DefaultFastPath], and MySQL 8.0.1+ and MariaDB 10.6+ ([SkipLocked]).
// There the library creates the table and the index its claim reads in
// order (jobs.Migrate's fetch index), so the locking read of the fast path
// ([Renderer.LockCandidates], in a READ COMMITTED transaction) scans the
// eligible rows of one queue in claim order and locks no gap; a user's
// table, whose indexes the library cannot vouch for, keeps the portable
// default unless its store opts in. The slice is a fresh copy.
func LibraryTableFastPath() []Name { return append(DefaultFastPath(), MySQL, MariaDB) }

// HasFastPath reports whether a fast-path claim exists for n: the one
// statement of [Renderer.Claim] on PostgreSQL, SQLite and SQL Server, the
// locking read of
// [Renderer.LockCandidates] plus [Renderer.UpdateByIDs] in one transaction
// on MySQL and MariaDB. It reads the dialect table: a dialect has a fast
// path when it defines either statement.
func HasFastPath(n Name) bool {
	d := lookup(n)
	return d != nil && (d.stmts.claim.defined() || d.stmts.lockCandidates.defined())
}

// FastPathAllowed is the explicit allow-list check: it reports whether a
// claim on dialect n takes the fast path given the allow-list allow (for
// example [DefaultFastPath] plus a store's opt-ins). n must be on the list
// and [HasFastPath] must hold for it.
func FastPathAllowed(n Name, allow []Name) bool {
	return HasFastPath(n) && slices.Contains(allow, n)
}
