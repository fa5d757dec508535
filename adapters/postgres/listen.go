package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// listen subscribes conn to channel with LISTEN, calls fn with the empty
// payload once the subscription is in place, and then with the payload
// of each notification pgx receives on it (PostgreSQL manual,
// "SQL Commands: LISTEN" and "NOTIFY"), until ctx ends or the connection
// fails. The channel is quoted as an identifier. It ends by answering
// driver.ErrBadConn to database/sql, which then discards the connection,
// so a subscribed session never goes back to the pool; the error it
// returns is the one that ended the wait.
func listen(ctx context.Context, conn *sql.Conn, channel string, fn func(payload string)) error {
	var ended error
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		pc := c.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			ended = err
			return driver.ErrBadConn
		}
		fn("") // subscribed: what was sent before is the listener's to look for
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				ended = err
				return driver.ErrBadConn
			}
			fn(n.Payload)
		}
	})
	if ended != nil {
		return ended
	}
	if errors.Is(err, errNotPgx) {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	return err
}
