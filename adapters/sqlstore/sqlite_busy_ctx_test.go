package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// A SQLite write whose caller's context ends while it waits for the
// database write lock another connection holds returns an error that
// wraps both context.DeadlineExceeded (why it stopped) and dao.ErrBusy
// (what it waited for), and that dao.IsRetryable does not accept: the
// caller's context has ended, so the same call cannot succeed; a caller
// that retries with a new context tests errors.Is(err, dao.ErrBusy). The
// same holds for every backend's statement interrupted at its context's
// end.
func TestSQLiteWriteBehindLockContextEnds(t *testing.T) {
	db := testdb.SQLite(t)
	s := newStore(t, db)
	all := seedOrdered(t, s, 2)
	other, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = s.Update(ctx, dao.Eq("id", all[0]), dao.Set{"status": "done"})
	took := time.Since(began)
	t.Logf("update behind the write lock after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dao.ErrBusy) {
		t.Errorf("error = %v, want it to wrap context.DeadlineExceeded and dao.ErrBusy", err)
	}
	if dao.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true for a call whose context ended", err)
	}
	if took > 2*time.Second {
		t.Errorf("the update waited %v, well past its context's end (200 ms): the busy wait was not ended", took)
	}
}
