package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
)

// staleBusyTimeout is the busy timeout of the stale-schema tests' DSN.
const staleBusyTimeout = 300 * time.Millisecond

// staleSchemaSetup opens one SQLite file twice with a rollback journal
// and a short busy timeout: a claimer, a pool of one connection whose
// store is made before its table exists, and another handle that creates
// and fills the table. The claimer's connection reads the schema, waits
// once for a lock and gets it, and the busy timeout then passes: SQLite
// counts busy retries from a statement's start, not from a prepare's,
// and the driver's busy-timeout handler measures the wait from the first
// retry of that count, so a prepare on this connection that meets a lock
// is refused at once, without waiting. The table is created after that
// wait, by the other handle, so the claimer's copy of the schema does not
// have it. It returns the claimer's store and hold, which takes the write
// lock on the other handle (BEGIN EXCLUSIVE: readers wait too) and
// commits after d.
func staleSchemaSetup(t *testing.T) (claimer dao.Store[job], hold func(d time.Duration)) {
	t.Helper()
	ctx := context.Background()
	dsn := "file:" + filepath.Join(t.TempDir(), "stale.db") +
		"?_pragma=journal_mode(delete)&_pragma=busy_timeout(" + strconv.FormatInt(staleBusyTimeout.Milliseconds(), 10) + ")"
	open := func() (*gorm.DB, *sql.DB) {
		db, err := sqlstore.Open(ctx, "sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeDB(db) })
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		return db, sqlDB
	}
	cdb, csql := open()
	csql.SetMaxOpenConns(1)
	const table = "stale_jobs"
	s, err := sqlstore.New[job](cdb, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	odb, osql := open()
	other, err := osql.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	hold = func(d time.Duration) {
		t.Helper()
		if _, err := other.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(d, func() { _, _ = other.ExecContext(ctx, "COMMIT") })
	}

	// The claimer reads the schema, then waits once for a lock and gets
	// it: an INSERT (a CREATE would run a nested statement that resets
	// the count of busy retries).
	if _, err := csql.ExecContext(ctx, "CREATE TABLE stale_warmup (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	hold(50 * time.Millisecond)
	if _, err := csql.ExecContext(ctx, "INSERT INTO stale_warmup VALUES (1)"); err != nil {
		t.Fatalf("the claimer's write behind a 50 ms lock: %v", err)
	}
	time.Sleep(staleBusyTimeout + 100*time.Millisecond)

	// The other handle creates and fills the table.
	filler, err := sqlstore.New[job](odb, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := filler.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	seed(t, filler, 3)
	return s, hold
}

// TestSQLiteClaimStaleSchemaAfterAWait: with a rollback journal, a claim
// on a pooled connection whose copy of the schema predates the claim's
// table, made while another connection holds the lock, claims once the
// lock is released, within the busy timeout; it does not fail with "no
// such table". Both ways the SQLite claim runs: a caller's context that
// cannot end (the statement alone) and one that can (BEGIN IMMEDIATE
// first).
func TestSQLiteClaimStaleSchemaAfterAWait(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Minute)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, hold := staleSchemaSetup(t)
			ctx, cancel := c.ctx()
			defer cancel()
			hold(100 * time.Millisecond)
			got, err := s.Claim(ctx, claimReq("stale", 2))
			if err != nil || len(got) != 2 {
				t.Fatalf("claim behind a 100 ms lock (busy timeout %v): %d rows, %v; want 2 rows", staleBusyTimeout, len(got), err)
			}
		})
	}
}

// TestSQLiteClaimStaleSchemaBusy: when the lock outlasts the busy
// timeout, the claim on the stale connection fails as busy (retryable,
// nothing claimed), not with "no such table".
func TestSQLiteClaimStaleSchemaBusy(t *testing.T) {
	s, hold := staleSchemaSetup(t)
	hold(3 * staleBusyTimeout)
	got, err := s.Claim(context.Background(), claimReq("stale", 2))
	if len(got) != 0 || !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) {
		t.Fatalf("claim behind a lock held past the busy timeout: %d rows, %v; want none and a retryable ErrBusy", len(got), err)
	}
	time.Sleep(3 * staleBusyTimeout)
	if got, err := s.Claim(context.Background(), claimReq("stale", 2)); err != nil || len(got) != 2 {
		t.Fatalf("claim once the lock is free: %d rows, %v; want 2 rows", len(got), err)
	}
}

// TestSQLiteStaleSchemaReadsAndWrites: Find, Count and Update on the
// stale connection behind a lock shorter than the busy timeout wait for
// it and succeed, as the claim does; before, they failed at once with
// "no such table". Behind a lock held past the busy timeout they fail as
// busy (retryable), not with "no such table".
func TestSQLiteStaleSchemaReadsAndWrites(t *testing.T) {
	ops := []struct {
		name string
		run  func(ctx context.Context, s dao.Store[job]) error
	}{
		{"find", func(ctx context.Context, s dao.Store[job]) error {
			rows, err := s.Find(ctx, dao.Query{})
			if err == nil && len(rows) != 3 {
				err = fmt.Errorf("find returned %d rows, want 3", len(rows))
			}
			return err
		}},
		{"count", func(ctx context.Context, s dao.Store[job]) error {
			n, err := s.Count(ctx, dao.Eq("status", "pending"))
			if err == nil && n != 3 {
				err = fmt.Errorf("count = %d, want 3", n)
			}
			return err
		}},
		{"update", func(ctx context.Context, s dao.Store[job]) error {
			n, err := s.Update(ctx, dao.Eq("status", "pending"), dao.Set{"priority": int64(7)})
			if err == nil && n != 3 {
				err = fmt.Errorf("update matched %d rows, want 3", n)
			}
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name+"/after_a_wait", func(t *testing.T) {
			s, hold := staleSchemaSetup(t)
			hold(100 * time.Millisecond)
			if err := op.run(context.Background(), s); err != nil {
				t.Fatalf("%s behind a 100 ms lock (busy timeout %v): %v", op.name, staleBusyTimeout, err)
			}
		})
		t.Run(op.name+"/busy", func(t *testing.T) {
			s, hold := staleSchemaSetup(t)
			hold(3 * staleBusyTimeout)
			err := op.run(context.Background(), s)
			if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) {
				t.Fatalf("%s behind a lock held past the busy timeout: %v; want a retryable ErrBusy", op.name, err)
			}
			time.Sleep(3 * staleBusyTimeout)
			if err := op.run(context.Background(), s); err != nil {
				t.Fatalf("%s once the lock is free: %v", op.name, err)
			}
		})
	}
}
