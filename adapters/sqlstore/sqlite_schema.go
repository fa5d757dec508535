package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// staleSchema reports whether err is SQLite's "no such table" for the
// store's own table, which a statement can get on a pooled connection
// whose copy of the schema predates the table (another connection
// created it). SQLite compares a connection's copy of the schema with the
// database's schema version when a statement runs, or when a prepare
// fails on a name it does not know; that second check needs a read lock,
// and when it does not get one SQLite reports the original error instead
// of reloading ("no such table", although the table exists). With a
// rollback journal a writer's lock blocks that read lock, and the check
// does not wait for it under the busy timeout on a connection that has
// waited for a lock before: SQLite resets its count of busy retries when
// a statement starts running, not when one is prepared, and the driver's
// busy-timeout handler measures a wait from the first retry of that
// count, so a prepare that meets a lock more than the busy timeout after
// the connection's last wait is refused at once. In WAL mode readers take
// no lock that a writer holds, and the error does not occur.
func (s *sqlDriver[T]) staleSchema(err error) bool {
	return s.dialect == dialects.SQLite && strings.Contains(err.Error(), "no such table: "+s.table.Name)
}

// refreshSchema makes the SQLite connection conn read the database's
// schema again if its copy is stale: a read of sqlite_schema is a
// statement that runs (so its busy wait starts afresh and lasts the busy
// timeout) and begins a read transaction, which compares the schema
// version with the connection's copy and reloads the copy when they
// differ (SQLite, "The Schema Table" and SQLITE_SCHEMA). Nothing is
// written. A lock held past the busy timeout fails it with SQLITE_BUSY.
func refreshSchema(ctx context.Context, conn gorm.ConnPool) error {
	var n int64
	return conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n)
}

// freshSchema runs op, one statement, on pool. On SQLite, when the
// statement fails with "no such table" for the store's table because the
// connection's copy of the schema is stale (see staleSchema: a prepare
// refused, so nothing ran), it makes a connection read the schema again
// (refreshSchema, which waits for a writer's lock up to the busy timeout)
// and runs op once more on that connection: pool itself when it is a
// transaction or a single connection, else a connection taken from the
// pool for the two statements. A lock held past the busy timeout then
// fails with SQLITE_BUSY ([dao.ErrBusy], retryable) rather than "no such
// table". Errors are returned unmapped. The caller calls done once it has
// finished with what op left open (a result's rows): it gives back the
// connection taken from the pool.
func (s *sqlDriver[T]) freshSchema(ctx context.Context, pool gorm.ConnPool, op func(pool gorm.ConnPool) error) (done func(), err error) {
	done = func() {}
	err = op(pool)
	if err == nil || !s.staleSchema(err) {
		return done, err
	}
	if db, ok := pool.(*sql.DB); ok {
		conn, cerr := db.Conn(ctx)
		if cerr != nil {
			return done, err
		}
		done = func() { conn.Close() }
		pool = conn
	}
	if rerr := refreshSchema(ctx, pool); rerr != nil {
		return done, rerr
	}
	return done, op(pool)
}
