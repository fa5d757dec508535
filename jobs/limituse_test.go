package jobs_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// TestLimits checks Client.Limits on the memory store, SQLite,
// PostgreSQL and MariaDB, with limited claims run at the test's time:
//
//   - an unpartitioned queue under Max 3 and Rate 1 an hour (Burst 5)
//     with 5 jobs claims 3: Limits gives the recorded Limit, 3 running
//     and 2 tokens in the one partition ""; a finished job leaves 2
//     running;
//   - a queue partitioned by args field seq under Max 2, with 3, 1 and
//     2 jobs of seq 1, 2 and 3, claims 2, 1 and 2: Limits with
//     Partitions 2 gives 5 running, partitions [1] and [3] of 2 each,
//     and 1 more; a claim two minutes on, with no room, records the
//     Limit again;
//   - a queue partitioned by seq under Rate 1 an hour (Burst 3) alone,
//     with 2 jobs of seq 1 and 1 of seq 2, claims them: Limits gives no
//     running job (no slot rows without a Max) and partitions [1] with
//     1 token and [2] with 2, the fewest tokens first;
//   - bad parameters are dao.ErrInvalidArgument.
func TestLimits(t *testing.T) { eachLimitStore(t, "limuse_jobs", testLimits) }

func testLimits(t *testing.T, js dao.Store[jobs.Row]) {
	ctx := context.Background()
	c, err := jobs.NewClient(jobs.Config{Store: js})
	if err != nil {
		t.Fatal(err)
	}
	// Queue names of their own: the memory store's limit state is kept
	// per process, by table and queue.
	suffix := "_" + t.Name()[len("TestLimits/"):]
	now := time.Now().UTC().Truncate(time.Millisecond)
	// One limiter per queue, kept across claims as a client keeps it.
	limiters := map[string]func(context.Context, time.Time, dao.ClaimRequest) ([]jobs.Row, error){}
	claimAt := func(queue string, lim jobs.Limit, now time.Time) []jobs.Row {
		t.Helper()
		cl := limiters[queue]
		if cl == nil {
			var err error
			if cl, err = jobs.NewLimiter(c, queue, lim); err != nil {
				t.Fatal(err)
			}
			limiters[queue] = cl
		}
		rows, err := cl(ctx, now, dao.ClaimRequest{
			Where:   dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, queue), dao.IsNull(jobs.ColLeaseUntil)),
			Set:     dao.Set{jobs.ColLeaseOwner: "w1", jobs.ColLeaseUntil: now.Add(time.Hour), jobs.ColAttempt: dao.Incr(1)},
			Limit:   10,
			OrderBy: []dao.Order{dao.Asc(jobs.ColID)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	claim := func(queue string, lim jobs.Limit) []jobs.Row {
		t.Helper()
		return claimAt(queue, lim, now)
	}
	insert := func(queue string, seqs ...int64) {
		t.Helper()
		for _, s := range seqs {
			if _, err := c.Insert(ctx, benchArgs{Seq: s}, &jobs.InsertOpts{Queue: queue}); err != nil {
				t.Fatal(err)
			}
		}
	}
	limits := func(p jobs.LimitParams) jobs.LimitInfo {
		t.Helper()
		got, err := c.Limits(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Queue != p.Queue {
			t.Fatalf("Limits(%+v): %+v, want queue %s alone", p, got, p.Queue)
		}
		t.Logf("Limits(%s): limit %+v, running %d, more %d", p.Queue, got[0].Limit, got[0].Running, got[0].More)
		for _, lp := range got[0].Partitions {
			tok := "-"
			if lp.Tokens != nil {
				tok = strconv.FormatFloat(*lp.Tokens, 'f', 4, 64)
			}
			t.Logf("  partition %q: running %d, tokens %s", lp.Key, lp.Running, tok)
		}
		return got[0]
	}

	whole := "limuse_whole" + suffix
	lim := jobs.Limit{Max: 3, Rate: 1, Period: time.Hour, Burst: 5}
	insert(whole, 1, 2, 3, 4, 5)
	rows := claim(whole, lim)
	if len(rows) != 3 {
		t.Fatalf("claimed %d jobs of %s, want 3", len(rows), whole)
	}
	info := limits(jobs.LimitParams{Queue: whole})
	if info.Limit == nil || !reflect.DeepEqual(*info.Limit, lim) {
		t.Errorf("recorded limit %+v, want %+v", info.Limit, lim)
	}
	if info.RecordedAt == nil || info.RecordedAt.Sub(now).Abs() > time.Second {
		t.Errorf("recorded at %v, want %v", info.RecordedAt, now)
	}
	if info.Running != 3 || len(info.Partitions) != 1 || info.Partitions[0].Key != "" || info.Partitions[0].Running != 3 {
		t.Errorf("running %d, partitions %+v; want 3 in partition \"\"", info.Running, info.Partitions)
	}
	// 2 tokens left, and a token an hour: at most a few more by now.
	if len(info.Partitions) == 1 && (info.Partitions[0].Tokens == nil || math.Abs(*info.Partitions[0].Tokens-2) > 0.01) {
		t.Errorf("tokens %v, want 2", info.Partitions[0].Tokens)
	}
	if _, err := js.Update(ctx, dao.Eq(jobs.ColID, rows[0].ID), dao.Set{jobs.ColState: string(jobs.StateCompleted), jobs.ColLeaseOwner: "", jobs.ColLeaseUntil: nil, jobs.ColFinalizedAt: now}); err != nil {
		t.Fatal(err)
	}
	if info := limits(jobs.LimitParams{Queue: whole}); info.Running != 2 || len(info.Partitions) != 1 || info.Partitions[0].Running != 2 {
		t.Errorf("after one finished: running %d, partitions %+v; want 2", info.Running, info.Partitions)
	}

	parted := "limuse_parted" + suffix
	plim := jobs.Limit{Max: 2, ByArgs: []string{"seq"}}
	insert(parted, 1, 1, 1, 2, 3, 3)
	if rows := claim(parted, plim); len(rows) != 5 {
		t.Fatalf("claimed %d jobs of %s, want 5", len(rows), parted)
	}
	info = limits(jobs.LimitParams{Queue: parted, Partitions: 2})
	want := []jobs.LimitPartition{{Key: "[1]", Running: 2}, {Key: "[3]", Running: 2}}
	if info.Running != 5 || !reflect.DeepEqual(info.Partitions, want) || info.More != 1 {
		t.Errorf("running %d, partitions %+v, more %d; want 5, %+v, 1", info.Running, info.Partitions, info.More, want)
	}
	if info.Limit == nil || !reflect.DeepEqual(*info.Limit, plim) {
		t.Errorf("recorded limit %+v, want %+v", info.Limit, plim)
	}
	// Two minutes on, the queue has no room (its one waiting job is of
	// a full partition): the claim takes no lock on SQL, and records its
	// Limit all the same.
	later := now.Add(2 * time.Minute)
	if rows := claimAt(parted, plim, later); len(rows) != 0 {
		t.Errorf("claimed %d jobs of the full partition, want 0", len(rows))
	}
	if info := limits(jobs.LimitParams{Queue: parted}); info.RecordedAt == nil || info.RecordedAt.Sub(later).Abs() > time.Second {
		t.Errorf("recorded at %v after a claim with no room, want %v", info.RecordedAt, later)
	}

	rated := "limuse_rated" + suffix
	rlim := jobs.Limit{Rate: 1, Period: time.Hour, Burst: 3, ByArgs: []string{"seq"}}
	insert(rated, 1, 1, 2)
	if rows := claim(rated, rlim); len(rows) != 3 {
		t.Fatalf("claimed %d jobs of %s, want 3", len(rows), rated)
	}
	info = limits(jobs.LimitParams{Queue: rated})
	if info.Running != 0 || len(info.Partitions) != 2 || info.More != 0 {
		t.Fatalf("rate only: running %d, partitions %+v, more %d; want 0 running (no slot rows without Max) in 2 partitions", info.Running, info.Partitions, info.More)
	}
	for i, w := range []struct {
		key    string
		tokens float64
	}{{"[1]", 1}, {"[2]", 2}} {
		p := info.Partitions[i]
		if p.Key != w.key || p.Tokens == nil || math.Abs(*p.Tokens-w.tokens) > 0.01 {
			t.Errorf("rate only: partition %d: %q with tokens %v, want %q with %v", i, p.Key, p.Tokens, w.key, w.tokens)
		}
	}

	for _, p := range []jobs.LimitParams{{Partitions: -1}, {Partitions: jobs.MaxListLimit + 1}, {Queue: "no spaces"}} {
		if _, err := c.Limits(ctx, p); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Limits(%+v): %v, want dao.ErrInvalidArgument", p, err)
		}
	}
}
