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

// All returns every dialect this package knows, in a fixed order.
func All() []Name {
	return []Name{Postgres, MySQL, MariaDB, SQLite, SQLServer, CockroachDB, YugabyteDB}
}

// Family returns the dialect whose wire protocol, GORM dialector and
// database driver n uses: [Postgres] for CockroachDB and YugabyteDB,
// [MySQL] for MariaDB, n itself otherwise. Code that depends on the driver
// rather than on the SQL text (scanning, error codes, session settings)
// asks for the family; the statements come from n's own data.
func Family(n Name) Name {
	switch n {
	case CockroachDB, YugabyteDB:
		return Postgres
	case MariaDB:
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
	if db == nil || db.Dialector == nil {
		return "", fmt.Errorf("dialects: detect: %w: nil *gorm.DB or dialector", dao.ErrInvalidArgument)
	}
	var family Name
	switch name := db.Dialector.Name(); name {
	case "sqlite", "sqlite3":
		return SQLite, nil
	case "sqlserver":
		return SQLServer, nil
	case "postgres":
		family = Postgres
	case "mysql":
		family = MySQL
	default:
		return "", fmt.Errorf("dialects: detect: %w: unsupported GORM dialector %q", dao.ErrInvalidArgument, name)
	}
	var version string
	if err := db.WithContext(ctx).Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
		return "", fmt.Errorf("dialects: detect: SELECT VERSION(): %w", err)
	}
	return FromVersion(family, version), nil
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
