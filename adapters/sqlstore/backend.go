package sqlstore

import (
	"context"
	"database/sql"
	"sync"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Backend is what a backend package (adapters/postgres, adapters/mysql,
// adapters/sqlite, adapters/sqlserver) plugs into this shared SQL core,
// which imports GORM but no database driver. It is for adapter authors;
// programs import the backend packages.
type Backend struct {
	// Dialector returns the GORM dialector that opens dsn, after adding
	// the DSN settings the backend needs. An error wraps
	// dao.ErrInvalidArgument.
	Dialector func(dsn string) (gorm.Dialector, error)
	// Classify returns the dao sentinel for a native error of the
	// backend's driver, or nil when the error is not one of its own.
	Classify func(err error) error
	// MatchedRows reports whether an UPDATE's affected-row count on db is
	// the number of rows it matched; nil means it always is.
	MatchedRows func(db *gorm.DB) bool
	// Native returns a [NativeConn] over dc, a driver connection as
	// (*sql.Conn).Raw hands it, when dc is a connection of the backend's
	// own driver; nil otherwise (another driver, or the backend's wrapped
	// by a driver hook such as a tracing or counting middleware), and then
	// the store runs its statements through database/sql. A nil Native
	// means the backend has no native path.
	Native func(dc any) NativeConn
	// Interrupter, optional, readies conn, a connection of db's pool that
	// one claim statement is about to run on, for the caller's context
	// ending while that statement waits for a lock another transaction
	// holds, and returns the [Interrupt] that asks the server to end the
	// statement then running on conn. A nil Interrupt with a nil error
	// means that the driver ends such a wait by itself once the
	// statement's context reports an error, and answers for the
	// statement's outcome all the same (SQLite with ncruces/go-sqlite3:
	// its busy handler stops waiting, a statement it interrupts is rolled
	// back whole); the store then gives the statement a context whose Err
	// is the caller's and whose Done channel is nil (so that database/sql
	// never closes the statement's rows under it). ctx is the claim's
	// statement context: detached from the caller's cancellation and
	// bounded by the claim timeout. An error means conn cannot be
	// interrupted; the claim then runs as without an Interrupter: a
	// statement behind a lock waits for the store's lock-wait limit.
	Interrupter func(ctx context.Context, db *gorm.DB, conn *sql.Conn) (Interrupt, error)
	// Listen, optional, subscribes conn, a connection taken from the pool
	// for it alone, to the notifications of channel (a name already
	// checked: letters, digits, underscores) and calls fn with each
	// payload until ctx ends or the connection fails, returning the error
	// that ended it. The store closes conn afterwards, so it never returns
	// to the pool subscribed. nil means the backend has no notifications.
	Listen func(ctx context.Context, conn *sql.Conn, channel string, fn func(payload string)) error
}

// Interrupt asks the server, from outside the connection, to end the
// statement that runs on one connection: PostgreSQL's cancel request,
// MySQL and MariaDB's KILL QUERY. The statement then fails with its own
// error and is rolled back, or completes if the request came too late;
// either way its answer on the connection says which. An error means the
// request could not be delivered within ctx; the statement then runs to
// its end or to its lock-wait limit.
type Interrupt func(ctx context.Context) error

var (
	backendsMu sync.RWMutex
	backends   = map[dialects.Name]Backend{}
)

// Register makes b the backend of the dialects names, as database/sql's
// Register makes a driver available by name. Backend packages call it
// from init; a later call for the same name replaces the earlier one.
func Register(b Backend, names ...dialects.Name) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	for _, n := range names {
		backends[n] = b
	}
}

// backendOf returns the backend registered for name.
func backendOf(name dialects.Name) (Backend, bool) {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	b, ok := backends[name]
	return b, ok
}

// classifiers returns the Classify functions of every registered backend.
func classifiers() []func(error) error {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	out := make([]func(error) error, 0, len(backends))
	for _, b := range backends {
		if b.Classify != nil {
			out = append(out, b.Classify)
		}
	}
	return out
}

// backendPackage names the package that registers the backend of name:
// that of its family (dialects.Family), whose driver it runs on.
func backendPackage(name dialects.Name) string {
	return "github.com/claimstore/claimstore/adapters/" + string(dialects.Family(name))
}

// NativeConn runs a statement with a backend's own driver on a connection
// that database/sql holds, without database/sql's per-value conversions:
// the rows are scanned straight into their destinations with the driver's
// own scanning. A backend returns one from [Backend.Native].
type NativeConn interface {
	// Query sends sql with args bound (the driver's own binding, as
	// through database/sql) and returns the rows. An error means the
	// statement's result is not known to have been read; it is the
	// driver's native error, which the store maps like every database
	// error.
	Query(ctx context.Context, sql string, args []any) (NativeRows, error)
}

// NativeRows is the result of [NativeConn.Query].
type NativeRows interface {
	// Columns returns the result column names in order.
	Columns() []string
	// Next advances to the next row and reports whether there is one.
	Next() bool
	// Scan copies the current row's columns into dest, one pointer per
	// column, with the driver's conversions; a nil entry skips its column.
	Scan(dest ...any) error
	// Null reports whether column col (from 0) of the current row is
	// NULL.
	Null(col int) bool
	// Close releases the rows, reading what is left of the result, and
	// returns the error that ended the result, if any (as Err).
	Close() error
}
