package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestLimitSlots checks, on the memory store, SQLite, PostgreSQL and
// MariaDB, how a limited claim counts a queue's running jobs through the
// slot table, with the claim's time set by the test:
//
//   - the slot row of a job that finished does not hold its slot, and is
//     deleted once jobs.StaleSlots of them wait; a job still running
//     holds its slot;
//   - the slot of a job whose lease ended (its client died) comes back
//     when the lease ends, not before;
//   - a job whose lease ended and that its slow client renews with the
//     same owner token, after a claim saw the lease ended, holds its slot
//     again;
//   - a leased job without a slot row (claimed by a client of a release
//     before the slot table) holds its slot from the limiter's first
//     claim, and from its next reconcile for one leased later.
func TestLimitSlots(t *testing.T) { eachLimitStore(t, "slot_jobs", testLimitSlots) }

func testLimitSlots(t *testing.T, js dao.Store[jobs.Row]) {
	ctx := context.Background()
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	// Queue names of their own: the memory store's limit state is kept
	// per process, by table and queue.
	suffix := "_" + t.Name()[len("TestLimitSlots/"):]
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	insert := func(queue string, prio, n int) []int64 {
		t.Helper()
		var ids []int64
		for i := range n {
			res, err := c.Insert(ctx, benchArgs{Seq: int64(i)}, &jobs.InsertOpts{Queue: queue, Priority: prio})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Job.ID)
		}
		return ids
	}
	limiterOf := func(queue string, max, limit int) func(at time.Duration, owner string) []int64 {
		claim, err := jobs.NewLimiter(c, queue, jobs.Limit{Max: max})
		if err != nil {
			t.Fatal(err)
		}
		return func(at time.Duration, owner string) []int64 {
			t.Helper()
			now := t0.Add(at)
			rows, err := claim(ctx, now, limitedReq(queue, owner, now, limit))
			if err != nil {
				t.Fatalf("claim at t0+%v: %v", at, err)
			}
			ids := make([]int64, len(rows))
			for i := range rows {
				ids[i] = rows[i].ID
			}
			slices.Sort(ids)
			t.Logf("%s: claim at t0+%v as %s: %v", queue, at, owner, ids)
			return ids
		}
	}
	limiter := func(queue string, max int) func(at time.Duration, owner string) []int64 {
		return limiterOf(queue, max, 10)
	}
	set := func(where dao.Criteria, s dao.Set) {
		t.Helper()
		if n, err := js.Update(ctx, where, s); err != nil || n != 1 {
			t.Fatalf("update: %d rows, %v; want 1", n, err)
		}
	}
	finish := func(id int64) {
		t.Helper()
		set(dao.Eq(jobs.ColID, id), dao.Set{jobs.ColState: string(jobs.StateCompleted), jobs.ColLeaseOwner: "", jobs.ColLeaseUntil: nil, jobs.ColFinalizedAt: t0})
	}
	want := func(what string, got []int64, ids ...int64) {
		t.Helper()
		ids = slices.Sorted(slices.Values(ids))
		if !slices.Equal(got, ids) {
			t.Errorf("%s: %v, want %v", what, got, ids)
		}
	}
	slots := func(queue string) []int64 {
		t.Helper()
		ids, err := jobs.LimitSlots(ctx, c, queue)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}

	// A finished job's slot row holds nothing; a running job's and a
	// dead client's until its lease ends hold their slots.
	q := "ended" + suffix
	j := insert(q, 1, 5)
	claim := limiter(q, 2)
	want("first claim", claim(0, "a"), j[0], j[1])
	want("slot rows after the first claim", slots(q), j[0], j[1])
	want("claim with both slots held", claim(time.Second, "a"))
	finish(j[0])
	want("claim after a job finished", claim(2*time.Second, "b"), j[2])
	want("slot rows after a job finished (kept, not counted)", slots(q), j[0], j[1], j[2])
	// j[1]'s lease ends at t0+60s: its client died.
	want("claim before the dead client's lease ends", claim(59*time.Second, "c"))
	want("claim after the dead client's lease ended", claim(61*time.Second, "d"), j[1])
	// That claim, a minute after the first, reconciled: the finished
	// job's row is gone.
	want("slot rows after the dead client's job was claimed again", slots(q), j[1], j[2])

	// A lease renewed after it ended, by its owner, holds its slot again.
	q = "renewed" + suffix
	claim = limiter(q, 1)
	r1 := insert(q, 2, 1)[0]
	want("first claim", claim(0, "a"), r1)
	renew := func(until time.Duration) {
		set(dao.And(dao.Eq(jobs.ColID, r1), dao.Eq(jobs.ColLeaseOwner, "a")), dao.Set{jobs.ColLeaseUntil: t0.Add(until)})
	}
	renew(5 * time.Second)
	r := insert(q, 1, 2)
	// Within a minute of the first claim: no reconcile, the slot rows
	// alone count.
	want("claim after the lease ended", claim(6*time.Second, "b"), r[0])
	want("slot rows: the ended lease's kept", slots(q), r1, r[0])
	renew(200 * time.Second)
	finish(r[0])
	want("claim with the renewed lease running", claim(7*time.Second, "c"))

	// Leases taken without a slot row are counted from the next
	// reconcile: the limiter's first claim, then once a minute.
	q = "reconciled" + suffix
	o := insert(q, 1, 3)
	old := func(id int64) {
		set(dao.Eq(jobs.ColID, id), dao.Set{jobs.ColLeaseOwner: "old", jobs.ColLeaseUntil: t0.Add(120 * time.Second), jobs.ColAttempt: 1})
	}
	old(o[0])
	claim = limiter(q, 2)
	want("first claim with a lease taken without a slot row", claim(0, "a"), o[1])
	want("slot rows after the first claim", slots(q), o[0], o[1])
	old(o[2])
	finish(o[1])
	o = append(o, insert(q, 1, 1)...)
	want("claim at the next reconcile", claim(61*time.Second, "b"))
	want("slot rows after the reconcile", slots(q), o[0], o[2])
	want("claim after the leases ended", claim(121*time.Second, "c"), o[0], o[2])

	// The slot rows of finished jobs go once jobs.StaleSlots of them
	// wait, at the claim that finds them; those of running jobs stay.
	q = "swept" + suffix
	n := jobs.StaleSlots
	params := make([]jobs.InsertParams, n+1)
	for i := range params {
		params[i] = jobs.InsertParams{Args: benchArgs{Seq: int64(i)}, Opts: &jobs.InsertOpts{Queue: q}}
	}
	res, err := c.InsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	claim = limiterOf(q, n+2, n)
	if got := claim(0, "a"); len(got) != n {
		t.Fatalf("first claim: %d jobs, want %d", len(got), n)
	}
	for _, r := range res[:n-1] {
		finish(r.Job.ID)
	}
	running := res[n-1].Job.ID
	want("claim with one stale slot row fewer than the sweep", claim(time.Second, "b"), res[n].Job.ID)
	if got := len(slots(q)); got != n+1 {
		t.Errorf("slot rows with %d finished jobs: %d, want %d (kept)", n-1, got, n+1)
	}
	finish(res[n].Job.ID)
	last := insert(q, 1, 1)[0]
	want("claim at the sweep", claim(2*time.Second, "c"), last)
	want("slot rows after the sweep", slots(q), running, last)
}

// limitedReq is the claim request of a limited claim in the tests: up to
// limit available jobs of queue whose lease is unset or ended at now, in
// the job queue's order, leased to owner for a minute.
func limitedReq(queue, owner string, now time.Time, limit int) dao.ClaimRequest {
	return dao.ClaimRequest{
		Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, queue),
			dao.Or(dao.IsNull(jobs.ColLeaseUntil), dao.Le(jobs.ColLeaseUntil, now))),
		Set:     dao.Set{jobs.ColLeaseOwner: owner, jobs.ColLeaseUntil: now.Add(time.Minute), jobs.ColAttempt: dao.Incr(1)},
		Limit:   limit,
		OrderBy: []dao.Order{dao.Asc(jobs.ColPriority), dao.Asc(jobs.ColScheduledAt), dao.Asc(jobs.ColID)},
	}
}

// eachLimitStore runs fn on a job store of the memory store and, in a
// subtest each, of SQLite, PostgreSQL and MariaDB (a table named from
// table, migrated).
func eachLimitStore(t *testing.T, table string, fn func(*testing.T, dao.Store[jobs.Row])) {
	t.Run("memory", func(t *testing.T) {
		js, err := memstore.New[jobs.Row]()
		if err != nil {
			t.Fatal(err)
		}
		fn(t, js)
	})
	for _, be := range testdb.SQLBackends {
		t.Run(be.Name, func(t *testing.T) {
			js, _ := newJobStore(t, be.Open(t), table)
			if err := jobs.Migrate(context.Background(), js, nil); err != nil {
				t.Fatal(err)
			}
			fn(t, js)
		})
	}
}

// TestLimitScanWidens checks, on the memory store, SQLite, PostgreSQL and
// MariaDB, that a partitioned limited claim whose first read of
// candidates (twice the claim's size) holds only jobs of full partitions
// reads on, up to jobs.LimitScan candidates, and takes the job of a
// partition with room behind them.
func TestLimitScanWidens(t *testing.T) { eachLimitStore(t, "scan_jobs", testLimitScanWidens) }

func testLimitScanWidens(t *testing.T, js dao.Store[jobs.Row]) {
	ctx := context.Background()
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	queue := "scan_" + t.Name()[len("TestLimitScanWidens/"):]
	const limit = 10
	params := make([]jobs.InsertParams, 2*limit+6)
	for i := range params {
		params[i] = jobs.InsertParams{Args: benchArgs{Seq: int64(i), Part: 1}, Opts: &jobs.InsertOpts{Queue: queue}}
	}
	params[len(params)-1].Args = benchArgs{Seq: int64(len(params)), Part: 2}
	res, err := c.InsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	claim, err := jobs.NewLimiter(c, queue, jobs.Limit{Max: 1, ByArgs: []string{"part"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	rows, err := claim(ctx, now, limitedReq(queue, "a", now, limit))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int64, len(rows))
	for i := range rows {
		got[i] = rows[i].ID
	}
	want := []int64{res[0].Job.ID, res[len(res)-1].Job.ID}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v: the first job of partition 1 and the job of partition 2 behind %d others", got, want, len(res)-2)
	}
}
