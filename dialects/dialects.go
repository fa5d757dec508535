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
)

// All returns every dialect this package knows, in a fixed order.
func All() []Name { return []Name{Postgres, MySQL, MariaDB, SQLite, SQLServer} }

// String returns the dialect name.
func (n Name) String() string { return string(n) }

// Parse returns the dialect named s (case-insensitive; "postgresql" and
// "pg" are accepted for Postgres, "mssql" for SQL Server, "sqlite3" for
// SQLite). An unknown name is an error wrapping [dao.ErrInvalidArgument].
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
	}
	return "", fmt.Errorf("dialects: %w: unknown dialect %q (want one of %v)", dao.ErrInvalidArgument, s, All())
}

// Detect returns the dialect of db from its GORM dialector. For the MySQL
// dialector it asks the server with SELECT VERSION() (one round trip, run
// with ctx) and returns [MariaDB] when the version string contains
// "MariaDB", [MySQL] otherwise; for the other dialectors it does no I/O.
// An unknown dialector is an error wrapping [dao.ErrInvalidArgument]; a
// failed version query returns the driver's error, wrapped.
func Detect(ctx context.Context, db *gorm.DB) (Name, error) {
	if db == nil || db.Dialector == nil {
		return "", fmt.Errorf("dialects: detect: %w: nil *gorm.DB or dialector", dao.ErrInvalidArgument)
	}
	switch name := db.Dialector.Name(); name {
	case "postgres":
		return Postgres, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	case "sqlserver":
		return SQLServer, nil
	case "mysql":
		var version string
		if err := db.WithContext(ctx).Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
			return "", fmt.Errorf("dialects: detect: SELECT VERSION(): %w", err)
		}
		if strings.Contains(version, "MariaDB") {
			return MariaDB, nil
		}
		return MySQL, nil
	default:
		return "", fmt.Errorf("dialects: detect: %w: unsupported GORM dialector %q", dao.ErrInvalidArgument, name)
	}
}

// DefaultFastPath returns the dialects whose claim runs the one-statement
// fast path unless a store is configured otherwise: PostgreSQL alone. Every
// other dialect runs the portable default of package dao until measurement
// shows that its fast path is worth opting into. The slice is a fresh copy.
func DefaultFastPath() []Name { return []Name{Postgres} }

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
