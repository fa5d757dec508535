package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/ncruces/go-sqlite3"
	"gorm.io/gorm"
)

// errNotNcruces is the error of interrupter for a connection that is not
// one of github.com/ncruces/go-sqlite3's driver.
var errNotNcruces = errors.New("sqlite: the connection is not a github.com/ncruces/go-sqlite3 connection; a claim waits for the write lock up to the busy timeout")

// interrupter readies conn for a claim statement whose caller's context
// may end while it waits for the write lock: with the
// github.com/ncruces/go-sqlite3 driver nothing is to be done, and it
// returns a nil [sqlstore.Interrupt]. That driver's busy handler (the
// DSN's busy_timeout) retries only while the statement's context reports
// no error, and its progress handler interrupts a running statement once
// the context does; SQLite rolls an interrupted write statement back
// whole (SQLite manual, sqlite3_interrupt), so the statement's answer is
// its outcome. Another driver's connection (wrapped by a driver
// middleware) is an error, and its claims wait up to the busy timeout.
func interrupter(_ context.Context, _ *gorm.DB, conn *sql.Conn) (sqlstore.Interrupt, error) {
	return nil, conn.Raw(func(dc any) error {
		if _, ok := dc.(interface{ Raw() *sqlite3.Conn }); !ok {
			return errNotNcruces
		}
		return nil
	})
}
