package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// dueJob is a table as dispatch workers keep it: a (status, id) index
// their claims read candidates through, a lease, and an outcome column.
type dueJob struct {
	ID         int64      `gorm:"primaryKey;autoIncrement;index:,composite:due,priority:2"`
	Status     string     `gorm:"size:16;not null;index:,composite:due,priority:1"`
	LeaseOwner string     `gorm:"size:64;not null"`
	LeaseUntil *time.Time `gorm:"precision:6"`
	DoneBy     string     `gorm:"size:64;not null"`
}

// A MariaDB guarded update waiting for a row another transaction holds
// takes no lock that holds up that transaction's own outcome write: the
// holder (a worker whose lease the claim's candidate read saw expire)
// marks the row done and commits promptly, and the claim then finds the
// row no longer eligible. The update reads the row through the primary
// key. Before, it read it through the (status, id) index and held that
// index entry while it waited for the row: the holder's UPDATE, which
// moves the entry, waited for the claim, and InnoDB chose the holder as
// the deadlock victim (1213), rolling its outcome back; the claim then
// took the row.
func TestMariaDBGuardedUpdateWaitingHoldsUpNoOutcome(t *testing.T) {
	h := queuedMariaDB(t, "guarded", func() *dueJob { return &dueJob{Status: "queued"} })
	s, db, table, quoted, tx := h.store, h.db, h.name, h.quoted, h.tx
	ctx := context.Background()
	first, other := h.rows[0].ID, h.rows[3].ID
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+quoted+" WHERE id = ? FOR UPDATE", first); err != nil {
		t.Fatal(err)
	}

	type result struct {
		rows []dueJob
		err  error
	}
	claimed := make(chan result, 1)
	go func() {
		now := time.Now()
		got, err := s.Claim(ctx, dao.ClaimRequest{
			Where:   dao.And(dao.Eq("status", "queued"), dao.Or(dao.IsNull("lease_until"), dao.Le("lease_until", now))),
			Set:     dao.Set{"lease_owner": "claimer", "lease_until": now.Add(time.Minute)},
			Limit:   1,
			OrderBy: []dao.Order{dao.Asc("id")},
		})
		claimed <- result{got, err}
	}()
	// Let the claim's guarded update reach the held row and wait.
	waitForLockWait(t, db, table, 5*time.Second)
	t.Logf("claim waits")

	began := time.Now()
	for _, id := range []int64{first, other} {
		if _, err := tx.ExecContext(ctx, "UPDATE "+quoted+" SET status = 'done', done_by = 'holder' WHERE id = ?", id); err != nil {
			t.Fatalf("the holder's outcome write of row %d, behind the waiting claim: %v", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the holder's commit: %v", err)
	}
	took := time.Since(began)
	t.Logf("the holder's outcome writes and commit took %v", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("the holder's outcome writes took %v behind a waiting claim, want them prompt", took)
	}
	r := <-claimed
	t.Logf("claim returned %d rows, %v, %v after the holder's commit", len(r.rows), r.err, time.Since(began).Round(time.Millisecond))
	if r.err != nil {
		t.Fatalf("claim: %v", r.err)
	}
	for _, j := range r.rows {
		if j.ID == first || j.ID == other {
			t.Errorf("claim returned row %d, which the holder marked done", j.ID)
		}
	}
	if done, err := s.Find(ctx, dao.Query{Where: dao.Eq("status", "done")}); err != nil || len(done) != 2 {
		t.Fatalf("%d rows done (%v), want the holder's 2", len(done), err)
	}
}

// waitForLockWait waits until db's server runs an UPDATE of table (its
// PROCESSLIST shows it, MariaDB manual "Information Schema PROCESSLIST
// Table"; the caller holds the row it is for, so it waits for that lock),
// and fails t when none runs within limit: the test would not exercise
// the wait it is about.
func waitForLockWait(t *testing.T, db *gorm.DB, table string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var n int64
		// Not this session: with interpolated parameters its own query
		// text holds the pattern.
		err := db.Raw("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE command = 'Query' AND id <> CONNECTION_ID() AND info LIKE ?",
			"%UPDATE `"+table+"`%").Scan(&n).Error
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no UPDATE of %s seen waiting within %v", table, limit)
}

// heldTable is a table of the MariaDB lock tests: its store, its rows, the
// handle and name of the table, its name quoted for SQL, and a
// transaction on a connection of its own in which the test holds locks.
type heldTable[T any] struct {
	store        *dao.Table[T]
	rows         []*T
	db           *gorm.DB
	name, quoted string
	tx           *sql.Tx
}

// queuedMariaDB creates table name on the MariaDB test server for rows
// of T, as a portable store (lock waits bounded at 10 s), inserts six
// rows of status "queued" (made by queued) and opens the holder's
// transaction, rolled back at the test's end.
func queuedMariaDB[T any](t *testing.T, name string, queued func() *T) heldTable[T] {
	t.Helper()
	db := testdb.MySQL(t)
	table := testdb.Table(t, db, name)
	s, err := sqlstore.New[T](db, sqlstore.WithTable(table), sqlstore.WithStrategy(dao.StrategyPortable),
		sqlstore.WithLockWaitLimit(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows := make([]*T, 6)
	for i := range rows {
		rows[i] = queued()
	}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	holderDB, err := testdb.MySQL(t).DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := holderDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return heldTable[T]{store: s, rows: rows, db: db, name: table, quoted: "`" + table + "`", tx: tx}
}
