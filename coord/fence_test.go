package coord_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// register is a row that fenced writes change; LeaderTerm records the
// term of the last one.
type register struct {
	ID         int64  `gorm:"primaryKey;autoIncrement:false"`
	Value      string `gorm:"size:64;not null"`
	LeaderTerm *int64
}

const fenceCol = "leader_term"

// registerStores runs f on a fresh register store of every backend: the
// memory store and the real SQLite, PostgreSQL and MariaDB.
func registerStores(t *testing.T, f func(t *testing.T, s dao.Store[register])) {
	t.Run("memory", func(t *testing.T) {
		s, err := memstore.New[register]()
		if err != nil {
			t.Fatal(err)
		}
		f(t, s)
	})
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			s, err := sqlstore.New[register](db, sqlstore.WithTable(testdb.Table(t, db, "fence")))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			f(t, s)
		})
	}
}

func get(t *testing.T, s dao.Store[register], id int64) register {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return r
}

func termOf(r register) int64 {
	if r.LeaderTerm == nil {
		return 0
	}
	return *r.LeaderTerm
}

// TestFenceTravels: a term written into a message by the leader that won
// it fences a write made later from the message alone, with the guarantee
// of the leader's own fenced write: once a newer term has written the row,
// the write of the older term changes nothing and says so with ErrFenced.
func TestFenceTravels(t *testing.T) {
	ctx := context.Background()
	leases := memstore.NewLeases()
	e, err := coord.NewElector(leases, coord.ElectorConfig{Name: "billing", ID: "a", Lease: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(runCtx) }()
	defer func() { stop(); <-done }()
	var leader coord.Leader
	for deadline := time.Now().Add(5 * time.Second); ; {
		l, ok := e.Leader()
		if ok {
			leader = l
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not elected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The leader writes its fence into a message; another process reads it.
	msg, err := json.Marshal(struct {
		Fence coord.Fence `json:"fence"`
	}{leader.Token()})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Fence coord.Fence `json:"fence"`
	}
	if err := json.Unmarshal(msg, &got); err != nil {
		t.Fatal(err)
	}
	if got.Fence != (coord.Fence{Name: "billing", Term: leader.Term()}) {
		t.Fatalf("fence after the message: %+v, want billing term %d", got.Fence, leader.Term())
	}
	travelled := got.Fence

	registerStores(t, func(t *testing.T, s dao.Store[register]) {
		if err := s.Create(ctx, &register{ID: 1}); err != nil {
			t.Fatal(err)
		}
		n, err := coord.FencedUpdate(ctx, s, travelled, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "by-travelled"})
		if err != nil || n != 1 {
			t.Fatalf("write under the travelled fence: %d, %v; want 1 row", n, err)
		}
		newer, err := coord.NewFence("billing", travelled.Term+1)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := coord.FencedUpdate(ctx, s, newer, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "by-newer"}); err != nil || n != 1 {
			t.Fatalf("write under the newer term: %d, %v; want 1 row", n, err)
		}
		n, err = coord.FencedUpdate(ctx, s, travelled, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "late"})
		if n != 0 || !errors.Is(err, coord.ErrFenced) {
			t.Fatalf("late write under the older fence: %d, %v; want 0 rows and ErrFenced", n, err)
		}
		if r := get(t, s, 1); r.Value != "by-newer" || termOf(r) != newer.Term {
			t.Fatalf("row after the late write: %+v, want by-newer in term %d", r, newer.Term)
		}
	})
}

// TestFencedOffOneAnswer: both ways a fenced write is refused answer
// errors.Is(err, coord.ErrFenced): a leader whose leadership has ended
// locally (nothing sent; ErrNotLeader as well) and a term the database
// refused because a newer one has written the row. A write whose criteria
// match no row at all is not fenced off: 0 rows, no error.
func TestFencedOffOneAnswer(t *testing.T) {
	ctx := context.Background()
	registerStores(t, func(t *testing.T, s dao.Store[register]) {
		if err := s.Create(ctx, &register{ID: 1}); err != nil {
			t.Fatal(err)
		}
		ended := coord.Leader{} // a zero Leader has ended
		n, err := coord.FencedUpdate(ctx, s, ended, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "x"})
		if n != 0 || !errors.Is(err, coord.ErrFenced) || !errors.Is(err, coord.ErrNotLeader) {
			t.Errorf("ended leader: %d, %v; want 0 rows, ErrFenced and ErrNotLeader", n, err)
		}
		old, _ := coord.NewFence("e", 3)
		cur, _ := coord.NewFence("e", 4)
		if _, err := coord.FencedUpdate(ctx, s, cur, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "cur"}); err != nil {
			t.Fatal(err)
		}
		n, err = coord.FencedUpdate(ctx, s, old, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "old"})
		if n != 0 || !errors.Is(err, coord.ErrFenced) || errors.Is(err, coord.ErrNotLeader) {
			t.Errorf("refused by the database: %d, %v; want 0 rows and ErrFenced (not ErrNotLeader)", n, err)
		}
		n, err = coord.FencedUpdate(ctx, s, old, fenceCol, dao.Eq("id", int64(2)), dao.Set{"value": "old"})
		if n != 0 || err != nil {
			t.Errorf("no row matches: %d, %v; want 0 rows and no error", n, err)
		}
		n, err = coord.FencedUpdate(ctx, s, cur, fenceCol, dao.Eq("id", int64(1)), dao.Set{"value": "cur again"})
		if n != 1 || err != nil {
			t.Errorf("same term again: %d, %v; want 1 row", n, err)
		}
		if r := get(t, s, 1); r.Value != "cur again" || termOf(r) != 4 {
			t.Errorf("row: %+v, want cur again in term 4", r)
		}
	})
}

// TestFencedUpsert: the first write of a register needs no unfenced
// create; a stale term can neither overwrite nor create the row once a
// newer term has created it.
func TestFencedUpsert(t *testing.T) {
	ctx := context.Background()
	registerStores(t, func(t *testing.T, s dao.Store[register]) {
		t1, _ := coord.NewFence("e", 1)
		t2, _ := coord.NewFence("e", 2)
		created, err := coord.FencedUpsert(ctx, s, t2, fenceCol, &register{ID: 7, Value: "first"}, dao.Set{"value": "first"})
		if err != nil || !created {
			t.Fatalf("first write: created %v, %v; want created", created, err)
		}
		if r := get(t, s, 7); r.Value != "first" || termOf(r) != 2 {
			t.Fatalf("created row %+v, want first in term 2", r)
		}
		// The stale term would create the row if it were missing, and
		// update it if it held an older term: both refused.
		created, err = coord.FencedUpsert(ctx, s, t1, fenceCol, &register{ID: 7, Value: "stale"}, dao.Set{"value": "stale"})
		if created || !errors.Is(err, coord.ErrFenced) {
			t.Fatalf("stale upsert: created %v, %v; want ErrFenced", created, err)
		}
		created, err = coord.FencedUpsert(ctx, s, t2, fenceCol, &register{ID: 7, Value: "second"}, dao.Set{"value": "second"})
		if err != nil || created {
			t.Fatalf("second write: created %v, %v; want an update", created, err)
		}
		if r := get(t, s, 7); r.Value != "second" || termOf(r) != 2 {
			t.Fatalf("row %+v, want second in term 2", r)
		}
		if _, err := coord.FencedUpsert(ctx, s, t2, fenceCol, &register{}, dao.Set{"value": "x"}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("zero key: %v, want ErrInvalidArgument", err)
		}
		if _, err := coord.FencedUpsert(ctx, s, t2, fenceCol, &register{ID: 8}, dao.Set{fenceCol: int64(9)}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("set writes the fence column: %v, want ErrInvalidArgument", err)
		}
		if _, err := coord.FencedUpsert(ctx, s, coord.Fence{}, fenceCol, &register{ID: 8}, dao.Set{"value": "x"}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("zero fence: %v, want ErrInvalidArgument", err)
		}
		if n, err := s.Count(ctx, dao.Eq("id", int64(8))); err != nil || n != 0 {
			t.Errorf("refused upserts created %d rows, %v", n, err)
		}
	})
}

// TestFencedUpsertRaceInTransaction: a FencedUpsert inside a caller's
// transaction, whose insert waits for another transaction that creates
// the same row and commits, takes the fenced update path and leaves the
// caller's transaction usable: its other writes commit with it. On
// PostgreSQL a failed INSERT would abort the whole transaction (SQLSTATE
// 25P02 for every statement after it).
func TestFencedUpsertRaceInTransaction(t *testing.T) {
	ctx := context.Background()
	for _, b := range testdb.SQLBackends {
		if b.Name == "sqlite" {
			continue // one writer at a time: the second transaction cannot start its write
		}
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			s, err := sqlstore.New[register](db, sqlstore.WithTable(testdb.Table(t, db, "fence_tx")))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			t1, _ := coord.NewFence("e", 1)
			t2, _ := coord.NewFence("e", 2)
			other := db.Begin()
			if other.Error != nil {
				t.Fatal(other.Error)
			}
			defer other.Rollback()
			mine := db.Begin()
			if mine.Error != nil {
				t.Fatal(mine.Error)
			}
			defer mine.Rollback()
			var myID int64
			idQuery := "SELECT pg_backend_pid()"
			if b.Name != "postgres" {
				idQuery = "SELECT CONNECTION_ID()"
			}
			if err := mine.Raw(idQuery).Scan(&myID).Error; err != nil {
				t.Fatal(err)
			}
			// The other writer creates row 9 (term 1) and holds it uncommitted.
			if created, err := coord.FencedUpsert(ctx, s.WithTx(other), t1, fenceCol, &register{ID: 9, Value: "other"}, dao.Set{"value": "other"}); err != nil || !created {
				t.Fatalf("other writer: created %v, %v", created, err)
			}
			type result struct {
				created bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				created, err := coord.FencedUpsert(ctx, s.WithTx(mine), t2, fenceCol, &register{ID: 9, Value: "mine"}, dao.Set{"value": "mine"})
				done <- result{created, err}
			}()
			// Wait until my insert waits for the other transaction's row.
			waitQuery := "SELECT count(*) FROM pg_locks WHERE pid = ? AND NOT granted"
			if b.Name != "postgres" {
				// The upsert's statement is under way on its connection
				// (PROCESSLIST; INNODB_TRX's LOCK WAIT was seen to lag
				// under load) while the other transaction holds the row.
				waitQuery = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE id = ? AND command = 'Query' AND info IS NOT NULL"
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				var waiting int64
				if err := db.Raw(waitQuery, myID).Scan(&waiting).Error; err != nil {
					t.Fatal(err)
				}
				if waiting > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the upsert never waited for the other transaction's row")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := other.Commit().Error; err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res.err != nil || res.created {
				t.Fatalf("upsert racing a create: created %v, %v; want the fenced update of the created row", res.created, res.err)
			}
			// The caller's transaction goes on and commits.
			if err := s.WithTx(mine).Create(ctx, &register{ID: 10, Value: "after"}); err != nil {
				t.Fatalf("a write after the upsert in the same transaction: %v", err)
			}
			if err := mine.Commit().Error; err != nil {
				t.Fatalf("commit: %v", err)
			}
			if r := get(t, s, 9); r.Value != "mine" || termOf(r) != 2 {
				t.Errorf("row 9 %+v, want mine in term 2", r)
			}
			get(t, s, 10)
		})
	}
}
