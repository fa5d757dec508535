package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"

	"github.com/claimstore/claimstore/dao"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// Drivers report a cancelled context in their own words; once the call's
// context has ended, mapCtxError keeps that context's error reachable next
// to the sentinel and the native error, and leaves errors of a live
// context as mapError makes them.
func TestMapCtxErrorKeepsContextErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	words := []struct {
		err      error
		sentinel error
	}{
		{sql.ErrTxDone, nil}, // database/sql rolled the transaction back on the cancellation
		{gomysql.ErrInvalidConn, dao.ErrUnavailable},
		{driver.ErrBadConn, dao.ErrUnavailable},
		{&pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"}, dao.ErrBusy},
		{errors.New("interrupted (9)"), nil}, // SQLite's SQLITE_INTERRUPT
	}
	for _, w := range words {
		for _, c := range []struct {
			ctx  context.Context
			want error
		}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
			got := sqlstore.MapCtxError(c.ctx, w.err)
			if !errors.Is(got, c.want) {
				t.Errorf("sqlstore.MapCtxError(%v, %v) = %v: does not wrap %v", c.want, w.err, got, c.want)
			}
			if !errors.Is(got, w.err) {
				t.Errorf("sqlstore.MapCtxError(%v) = %v: native error not reachable", w.err, got)
			}
			if w.sentinel != nil && !errors.Is(got, w.sentinel) {
				t.Errorf("sqlstore.MapCtxError(%v) = %v: sentinel %v not reachable", w.err, got, w.sentinel)
			}
			if dao.IsRetryable(got) {
				t.Errorf("sqlstore.MapCtxError(%v) = %v: retryable after the context ended", w.err, got)
			}
		}
		live := sqlstore.MapCtxError(context.Background(), w.err)
		if errors.Is(live, context.Canceled) || errors.Is(live, context.DeadlineExceeded) {
			t.Errorf("sqlstore.MapCtxError(live ctx, %v) = %v: a context error", w.err, live)
		}
		if live.Error() != sqlstore.MapError(w.err).Error() {
			t.Errorf("sqlstore.MapCtxError(live ctx, %v) = %v, mapError = %v", w.err, live, sqlstore.MapError(w.err))
		}
	}
	if err := sqlstore.MapCtxError(cancelled, nil); err != nil {
		t.Errorf("sqlstore.MapCtxError(nil) = %v", err)
	}
	// An error that already is the context's error is not wrapped twice.
	if got := sqlstore.MapCtxError(cancelled, context.Canceled); got != context.Canceled {
		t.Errorf("sqlstore.MapCtxError(context.Canceled) = %v", got)
	}
}
