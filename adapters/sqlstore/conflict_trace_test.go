package sqlstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// statusJob is a row whose claim moves it between the entries of an index
// on its status.
type statusJob struct {
	ID     int64  `gorm:"primaryKey;autoIncrement"`
	Status string `gorm:"size:16;not null;index:status_only"`
	DoneBy string `gorm:"size:64;not null"`
}

// A guarded update that MariaDB ends as a deadlock victim (1213) is a lost
// race the portable claim absorbs: the claim returns no error, the row
// stays as it was, and dao.ClaimTrace.Conflict is called once for it.
//
// The deadlock is built in a fixed order. The holder, in a REPEATABLE READ
// transaction, updates three other rows (so that InnoDB, which rolls back
// the transaction that changed fewer rows, chooses the claim as the
// victim), and locks the status index where the claim's new entry goes
// (a locking read of status 'claimed' through that index: a next-key lock
// on the first 'queued' entry and the gap before it). The claim's guarded
// update of row 1 locks the row, then waits for that index lock. The
// holder then asks for row 1: a cycle, which InnoDB breaks at once.
func TestMariaDBClaimConflictTraced(t *testing.T) {
	h := queuedMariaDB(t, "conflict", func() *statusJob { return &statusJob{Status: "queued"} })
	s, db, table, quoted, tx, rows := h.store, h.db, h.name, h.quoted, h.tx, h.rows
	ctx := context.Background()
	first := rows[0].ID
	if _, err := tx.ExecContext(ctx, "UPDATE "+quoted+" SET done_by = 'holder' WHERE id IN (?, ?, ?)", rows[3].ID, rows[4].ID, rows[5].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+quoted+" FORCE INDEX (status_only) WHERE status = 'claimed' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	var conflicts atomic.Int64
	trace := &dao.ClaimTrace{Conflict: func(context.Context) { conflicts.Add(1) }}
	type result struct {
		rows []statusJob
		err  error
	}
	claimed := make(chan result, 1)
	go func() {
		got, err := s.Claim(dao.WithClaimTrace(ctx, trace), dao.ClaimRequest{
			Where: dao.Eq("status", "queued"), Set: dao.Set{"status": "claimed"},
			Limit: 1, OrderBy: []dao.Order{dao.Asc("id")},
		})
		claimed <- result{got, err}
	}()
	waitForLockWait(t, db, table, 5*time.Second)

	// The cycle: the claim holds row 1 and waits for the holder's index
	// lock; the holder asks for row 1. The claim is rolled back.
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+quoted+" WHERE id = ? FOR UPDATE", first); err != nil {
		t.Fatalf("the holder was chosen as the deadlock victim, not the claim: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-claimed
	if r.err != nil {
		t.Fatalf("claim: %v, want the deadlock absorbed as a lost race", r.err)
	}
	for _, j := range r.rows {
		if j.ID == first {
			t.Errorf("claim returned row %d, whose update was the deadlock victim", j.ID)
		}
	}
	if got := conflicts.Load(); got != 1 {
		t.Errorf("ClaimTrace.Conflict called %d times, want 1 (one deadlock victim)", got)
	}
	got, err := s.Get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "queued" {
		t.Errorf("row %d status %q after the claim's update was rolled back, want queued", first, got.Status)
	}
	t.Logf("claim returned %d rows after 1 absorbed conflict", len(r.rows))
}
