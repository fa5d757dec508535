package sqlstore

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/dialects"
)

// nowQueries return the database server's current time as microseconds
// since the Unix epoch, independent of any session time zone (SQLite
// needs none: see Now).
var nowQueries = map[dialects.Name]string{
	// PostgreSQL manual, 9.9.5 "Current Date/Time": clock_timestamp() is
	// the time at the call; EXTRACT(EPOCH …) of a timestamptz is
	// zone-independent (9.9.1).
	dialects.Postgres: "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
	// MySQL and MariaDB: UNIX_TIMESTAMP(NOW(6)) converts the session-time
	// NOW to seconds since the epoch with microseconds (MySQL manual,
	// "Date and Time Functions").
	dialects.MySQL:   "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)",
	dialects.MariaDB: "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)",
	// SQL Server: SYSUTCDATETIME() is the server's UTC time (Transact-SQL
	// reference, "SYSUTCDATETIME").
	dialects.SQLServer: "SELECT DATEDIFF_BIG(MICROSECOND, '19700101', SYSUTCDATETIME())",
}

// Now returns the database's current time in UTC, with microsecond
// precision: one query (see nowQueries for each dialect's). On SQLite it
// returns the host's time without a query: the database runs in the
// process, and julianday('now') reads the process's clock (SQLite "Date
// And Time Functions"; the VFS's xCurrentTimeInt64); every process of a
// file in WAL mode runs on one host (SQLite "Write-Ahead Logging": WAL
// does not work over a network filesystem). So the time is the same,
// and reading it takes no connection, which a small pool may have none
// of while a transaction holds the write lock.
func (s *sqlDriver[T]) Now(ctx context.Context) (time.Time, error) {
	if s.dialect == dialects.SQLite {
		return time.Now().UTC().Truncate(time.Microsecond), nil
	}
	var us int64
	q, ok := nowQueries[s.dialect]
	if !ok {
		q = nowQueries[dialects.Family(s.dialect)] // CockroachDB and YugabyteDB: PostgreSQL's
	}
	if err := s.pool.QueryRowContext(ctx, q).Scan(&us); err != nil {
		return time.Time{}, mapError(err)
	}
	return time.UnixMicro(us).UTC(), nil
}
