package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// errNotPgx is the error of interrupter for a connection that is not
// pgx's own (a driver middleware wraps it): its backend cannot be named.
var errNotPgx = errors.New("postgres: the connection is not a pgx connection; a claim behind a lock waits for its lock-wait limit")

// interrupter returns the [sqlstore.Interrupt] of conn: pgconn's
// CancelRequest, the protocol's cancel request for the backend process
// that serves conn (PostgreSQL manual, "Frontend/Backend Protocol",
// "Canceling Requests in Progress"), sent on a connection of its own with
// the backend's process id and secret key. The statement then running on
// conn fails with SQLSTATE 57014 query_canceled and is rolled back, or
// completes if the request came too late; a request that finds the
// backend idle is ignored by the server. It sends nothing itself. An
// error means conn is not a pgx connection.
func interrupter(_ context.Context, _ *gorm.DB, conn *sql.Conn) (sqlstore.Interrupt, error) {
	var pc *pgconn.PgConn
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		pc = c.Conn().PgConn()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pc.CancelRequest, nil
}
