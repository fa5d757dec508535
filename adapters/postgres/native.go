package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// native returns the pgx connection under dc when dc is a connection of
// pgx's database/sql driver (jackc/pgx/v5/stdlib, which
// gorm.io/driver/postgres opens), and nil for any other driver
// connection, such as one wrapped by a driver middleware: the store then
// runs its statements through database/sql.
func native(dc any) sqlstore.NativeConn {
	c, ok := dc.(*stdlib.Conn)
	if !ok {
		return nil
	}
	return nativeConn{c.Conn()}
}

// nativeConn runs statements with pgx on the connection database/sql
// holds, in the connection's configured query exec mode (by default
// pgx.QueryExecModeCacheStatement, the mode database/sql's statements run
// in on the same connection), so both share the connection's statement
// cache.
type nativeConn struct{ c *pgx.Conn }

// Query runs sql with args. As pgx's database/sql driver does, it answers
// driver.ErrBadConn on a closed connection and for an error pgx reports
// safe to retry (nothing was sent), so that database/sql discards the
// connection; the pgx error stays reachable with errors.As.
func (n nativeConn) Query(ctx context.Context, sql string, args []any) (sqlstore.NativeRows, error) {
	if n.c.IsClosed() {
		return nil, driver.ErrBadConn
	}
	rows, err := n.c.Query(ctx, sql, args...)
	if err != nil {
		if pgconn.SafeToRetry(err) {
			return nil, fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
		return nil, err
	}
	return nativeRows{rows}, nil
}

// nativeRows adapts pgx.Rows to sqlstore.NativeRows.
type nativeRows struct{ pgx.Rows }

// Columns returns the result columns' names.
func (r nativeRows) Columns() []string {
	fds := r.FieldDescriptions()
	cols := make([]string, len(fds))
	for i := range fds {
		cols[i] = fds[i].Name
	}
	return cols
}

// Null reports whether column col of the current row is NULL (pgx gives
// a NULL's raw value as nil).
func (r nativeRows) Null(col int) bool {
	raw := r.RawValues()
	return col < len(raw) && raw[col] == nil
}

// Close reads the rest of the result and returns the error that ended it.
func (r nativeRows) Close() error {
	r.Rows.Close()
	return r.Err()
}
