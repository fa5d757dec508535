package coord_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
)

// Retention is a row that leader-only work writes; LeaderTerm records the
// term of the last fenced write.
type Retention struct {
	ID         int64 `gorm:"primaryKey"`
	SweptUpTo  string
	LeaderTerm *int64
}

// Two candidates over one lease store: the first wins term 1 and writes
// with its term as a fencing token; when it resigns the second wins term
// 2, and a write fenced with the old term changes nothing. Over SQL, use
// sqlstore.NewLeases(db, "") and its Migrate instead of the memory store.
func Example_leaderElection() {
	ctx := context.Background()
	leases := memstore.NewLeases()
	rows, _ := memstore.New[Retention]()
	_ = rows.Create(ctx, &Retention{ID: 1})

	elected := make(chan coord.Leader)
	campaign := func(id string) (stop func()) {
		e, err := coord.NewElector(leases, coord.ElectorConfig{
			Name: "retention-sweeper", ID: id, Lease: time.Second, PollInterval: 50 * time.Millisecond, Logger: quiet,
			OnElected: func(ctx context.Context, l coord.Leader) {
				elected <- l
				<-ctx.Done() // leader-only work runs until leadership ends
			},
		})
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		return func() { cancel(); <-done }
	}

	stopA := campaign("server-a")
	a := <-elected
	n, _ := coord.FencedUpdate(ctx, rows, a, "leader_term", dao.Eq("id", int64(1)), dao.Set{"swept_up_to": "2026-01-01"})
	fmt.Printf("%s leads in term %d; its write changed %d row\n", a.ID(), a.Term(), n)

	stopB := campaign("server-b")
	defer stopB()
	stopA() // server-a resigns; server-b takes over at its next poll
	b := <-elected
	n, _ = coord.FencedUpdate(ctx, rows, b, "leader_term", dao.Eq("id", int64(1)), dao.Set{"swept_up_to": "2026-02-01"})
	fmt.Printf("%s leads in term %d; its write changed %d row\n", b.ID(), b.Term(), n)

	// A late write under term 1 that reaches the database, as a job
	// server-a enqueued with its term would send it: the database refuses
	// it.
	n, err := coord.FencedUpdate(ctx, rows, a.Token(), "leader_term", dao.Eq("id", int64(1)), dao.Set{"swept_up_to": "stale"})
	fmt.Printf("the write of term 1 changed %d rows; fenced off: %v\n", n, errors.Is(err, coord.ErrFenced))
	// server-a's own Leader refuses before sending anything.
	_, err = coord.FencedUpdate(ctx, rows, a, "leader_term", dao.Eq("id", int64(1)), dao.Set{"swept_up_to": "stale"})
	fmt.Printf("%v; fenced off: %v\n", err, errors.Is(err, coord.ErrFenced))
	// Output:
	// server-a leads in term 1; its write changed 1 row
	// server-b leads in term 2; its write changed 1 row
	// the write of term 1 changed 0 rows; fenced off: true
	// coord: fenced update of term 1: coord: not the leader; fenced off: true
}
