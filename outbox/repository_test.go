package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

func TestAddDefaultsAndDuplicates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		clk := newClock()
		r := newRepo(t, s, outbox.WithClock(clk.Now))
		m := &outbox.Message{MessageID: "a", Topic: "t", TargetBroker: "x", Headers: outbox.Headers{"k": "v"}}
		if err := r.Add(ctx, nil, m); err != nil {
			t.Fatal(err)
		}
		if m.ID == 0 {
			t.Fatal("id not filled in")
		}
		got := get(t, s, m.ID)
		if got.Status != outbox.StatusPending || got.MaxRetries != outbox.DefaultRetryPolicy().MaxRetries ||
			!sameTime(got.CreatedAt, clk.Now()) || got.Headers["k"] != "v" {
			t.Fatalf("stored %+v", got)
		}
		err := r.Add(ctx, nil, &outbox.Message{MessageID: "a", Topic: "t", TargetBroker: "x"})
		if !errors.Is(err, dao.ErrDuplicate) {
			t.Fatalf("same id, same broker: %v, want ErrDuplicate", err)
		}
		if err := r.Add(ctx, nil, &outbox.Message{MessageID: "a", Topic: "t", TargetBroker: "y"}); err != nil {
			t.Fatalf("same id, other broker: %v", err)
		}
		none := &outbox.Message{MessageID: "b", Topic: "t", MaxRetries: outbox.NoRetry}
		if err := r.Add(ctx, nil, none); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, none.ID); got.MaxRetries != 0 {
			t.Fatalf("NoRetry stored as %d", got.MaxRetries)
		}
		if n, _ := s.Count(ctx, dao.Criteria{}); n != 3 {
			t.Fatalf("%d rows, want 3", n)
		}
	})
}

func TestAddInvalid(t *testing.T) {
	s, _ := backends()[0].open(t)
	r := newRepo(t, s)
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	now := time.Now()
	for name, m := range map[string]*outbox.Message{
		"nil":             nil,
		"no id":           {Topic: "t"},
		"no topic":        {MessageID: "a"},
		"long id":         {MessageID: long, Topic: "t"},
		"long topic":      {MessageID: "a", Topic: long + long},
		"long broker":     {MessageID: "a", Topic: "t", TargetBroker: long},
		"status":          {MessageID: "a", Topic: "t", Status: outbox.StatusPublished},
		"locked":          {MessageID: "a", Topic: "t", LockedBy: "w"},
		"published":       {MessageID: "a", Topic: "t", PublishedAt: &now},
		"has id":          {ID: 7, MessageID: "a", Topic: "t"},
		"bad max retries": {MessageID: "a", Topic: "t", MaxRetries: -2},
	} {
		ok := &outbox.Message{MessageID: "ok-" + name, Topic: "t"}
		if err := r.Add(ctx, nil, ok, m); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	err := r.Add(ctx, nil, &outbox.Message{MessageID: "d", Topic: "t"}, &outbox.Message{MessageID: "d", Topic: "t"})
	if !errors.Is(err, dao.ErrDuplicate) {
		t.Errorf("id twice in one call: %v, want ErrDuplicate", err)
	}
	if err := r.Add(ctx, &gorm.DB{}, &outbox.Message{MessageID: "tx", Topic: "t"}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("tx on a store without transactions: %v, want ErrInvalidArgument", err)
	}
	if n, _ := s.Count(ctx, dao.Criteria{}); n != 0 {
		t.Fatalf("invalid input stored %d rows", n)
	}
	if _, err := r.ClaimBatch(ctx, "", 10, ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("claim without worker: %v", err)
	}
	if _, err := r.ClaimBatch(ctx, "w", -1, ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("claim with negative limit: %v", err)
	}
	if _, err := r.ClaimBatchLease(ctx, "w", 1, "", 0); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("claim without lease: %v", err)
	}
	if _, err := r.MarkFailed(ctx, "w", outbox.Failure{ID: 1}, outbox.Failure{ID: 1}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("mark failed with a repeated id: %v", err)
	}
	if _, err := r.Requeue(ctx, []outbox.Status{outbox.StatusPublished}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("requeue published: %v", err)
	}
	if _, err := r.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusPending}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("purge pending: %v", err)
	}
	if _, err := r.List(ctx, outbox.Filter{Statuses: []outbox.Status{"nope"}}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("list unknown status: %v", err)
	}
	for _, o := range []outbox.Option{
		outbox.WithLease(0), outbox.WithClock(nil), outbox.WithRandom(nil),
		outbox.WithRetryPolicy(outbox.RetryPolicy{}),
	} {
		if _, err := outbox.New(s, o); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("bad option: %v", err)
		}
	}
	if _, err := outbox.New(nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil store: %v", err)
	}
}

// order is a business row written in the same transaction as its message.
type order struct {
	ID   int64 `gorm:"primaryKey"`
	Item string
}

func TestAddInCallerTransaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		if db == nil {
			t.Skip("no transactions on this backend")
		}
		ctx := context.Background()
		r := newRepo(t, s)
		orders := testdb.Table(t, db, "orders")
		if err := db.Table(orders).AutoMigrate(&order{}); err != nil {
			t.Fatal(err)
		}
		write := func(item, msgID string, fail error) error {
			return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Table(orders).Create(&order{Item: item}).Error; err != nil {
					return err
				}
				if err := r.Add(ctx, tx, &outbox.Message{MessageID: msgID, Topic: "orders.created", Payload: []byte(item)}); err != nil {
					return err
				}
				return fail
			})
		}
		if err := write("committed", "m1", nil); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("business rule failed")
		if err := write("rolled back", "m2", boom); !errors.Is(err, boom) {
			t.Fatalf("rollback: %v", err)
		}
		if err := write("duplicate", "m1", nil); !errors.Is(err, dao.ErrDuplicate) {
			t.Fatalf("duplicate message id in a transaction: %v, want ErrDuplicate", err)
		}
		var items []string
		if err := db.Table(orders).Order("id").Pluck("item", &items).Error; err != nil {
			t.Fatal(err)
		}
		stored, err := r.List(ctx, outbox.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(items, []string{"committed"}) || len(stored) != 1 || stored[0].MessageID != "m1" {
			t.Fatalf("orders %v, messages %+v: want exactly the committed pair", items, stored)
		}
	})
}

func TestClaimOrderAndState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		clk := newClock()
		r := newRepo(t, s, outbox.WithClock(clk.Now), outbox.WithLease(7*time.Second))
		t0 := clk.Now()
		add := func(id string, prio int, age time.Duration) {
			if err := r.Add(ctx, nil, &outbox.Message{MessageID: id, Topic: "t", Priority: prio, CreatedAt: t0.Add(-age)}); err != nil {
				t.Fatal(err)
			}
		}
		add("low-old", 0, 3*time.Second)
		add("high-new", 5, 1*time.Second)
		add("low-new", 0, 1*time.Second)
		add("high-old", 5, 2*time.Second)
		add("mid", 1, 0)
		got, err := r.ClaimBatch(ctx, "w1", 4, "")
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, m := range got {
			order = append(order, m.MessageID)
			if m.Status != outbox.StatusProcessing || m.LockedBy != "w1" || m.LockedUntil == nil ||
				!sameTime(*m.LockedUntil, t0.Add(7*time.Second)) {
				t.Fatalf("claimed row %+v", m)
			}
			stored := get(t, s, m.ID)
			if stored.Status != outbox.StatusProcessing || stored.LockedBy != "w1" {
				t.Fatalf("stored row %+v", stored)
			}
		}
		if want := []string{"high-old", "high-new", "mid", "low-old"}; !slices.Equal(order, want) {
			t.Fatalf("claim order %v, want %v", order, want)
		}
		rest, err := r.ClaimBatch(ctx, "w2", 10, "")
		if err != nil || len(rest) != 1 || rest[0].MessageID != "low-new" {
			t.Fatalf("second claim: %v %+v", err, rest)
		}
		if more, err := r.ClaimBatch(ctx, "w3", 10, ""); err != nil || len(more) != 0 {
			t.Fatalf("third claim: %v %d rows", err, len(more))
		}
	})
}

func TestClaimEligibility(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		clk := newClock()
		policy := outbox.RetryPolicy{BaseDelay: 5 * time.Second, Multiplier: 1, MaxDelay: 5 * time.Second, MaxRetries: 3}
		r := newRepo(t, s, outbox.WithClock(clk.Now), outbox.WithLease(10*time.Second), outbox.WithRetryPolicy(policy))
		all := msgs("e", "t", 5)
		other := &outbox.Message{MessageID: "other", Topic: "t", TargetBroker: "other"}
		if err := r.Add(ctx, nil, append(all, other)...); err != nil {
			t.Fatal(err)
		}
		claimed, err := r.ClaimBatch(ctx, "setup", 10, "")
		if err != nil || len(claimed) != 5 {
			t.Fatalf("setup claim: %v, %d rows", err, len(claimed))
		}
		pending, processing, failed, published, abandoned := all[0].ID, all[1].ID, all[2].ID, all[3].ID, all[4].ID
		if _, err := r.Release(ctx, "setup", pending); err != nil {
			t.Fatal(err)
		}
		if _, err := r.MarkPublished(ctx, "setup", published); err != nil {
			t.Fatal(err)
		}
		byID := map[int64]outbox.Message{}
		for _, m := range claimed {
			byID[m.ID] = m
		}
		f := byID[failed]
		a := byID[abandoned]
		if _, err := r.MarkFailed(ctx, "setup", outbox.Failed(&f, errors.New("retry me")), outbox.Failed(&a, outbox.Permanent(errors.New("never")))); err != nil {
			t.Fatal(err)
		}
		claimAt := func(worker string) []int64 {
			t.Helper()
			got, err := r.ClaimBatch(ctx, worker, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			out := ids(got)
			if _, err := r.Release(ctx, worker, out...); err != nil {
				t.Fatal(err)
			}
			slices.Sort(out)
			return out
		}
		if got := claimAt("w1"); !slices.Equal(got, []int64{pending}) {
			t.Fatalf("at t0: claimed %v, want only the pending row %d", got, pending)
		}
		clk.Advance(6 * time.Second)
		if got, want := claimAt("w2"), []int64{pending, failed}; !slices.Equal(got, want) {
			t.Fatalf("after the retry time: claimed %v, want %v", got, want)
		}
		clk.Advance(5 * time.Second)
		if got, want := claimAt("w3"), []int64{pending, processing, failed}; !slices.Equal(got, want) {
			t.Fatalf("after the lease: claimed %v, want %v", got, want)
		}
		for id, want := range map[int64]outbox.Status{published: outbox.StatusPublished, abandoned: outbox.StatusAbandoned, other.ID: outbox.StatusPending} {
			if got := get(t, s, id); got.Status != want {
				t.Fatalf("row %d is %s, want %s", id, got.Status, want)
			}
		}
		if got, err := r.ClaimBatch(ctx, "w4", 10, "other"); err != nil || len(got) != 1 || got[0].ID != other.ID {
			t.Fatalf("claim for the other broker: %v %+v", err, got)
		}
	})
}

func TestFencedMarks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		clk := newClock()
		r := newRepo(t, s, outbox.WithClock(clk.Now), outbox.WithLease(time.Second))
		if err := r.Add(ctx, nil, msgs("f", "t", 4)...); err != nil {
			t.Fatal(err)
		}
		stale, err := r.ClaimBatch(ctx, "stale", 4, "")
		if err != nil || len(stale) != 4 {
			t.Fatalf("claim: %v %d", err, len(stale))
		}
		keep := stale[0] // still held by "stale": its marks must apply
		if _, err := r.Release(ctx, "stale", keep.ID); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second) // the lease of the other three expires
		owner, err := r.ClaimBatch(ctx, "owner", 4, "")
		if err != nil || len(owner) != 4 {
			t.Fatalf("new owner claimed %d: %v", len(owner), err)
		}
		// "owner" holds all four; "stale" still believes it holds stale[1:].
		if _, err := r.Release(ctx, "owner", keep.ID); err != nil {
			t.Fatal(err)
		}
		again, err := r.ClaimBatch(ctx, "stale", 1, "")
		if err != nil || len(again) != 1 || again[0].ID != keep.ID {
			t.Fatalf("stale worker re-claims the released row: %v %+v", err, again)
		}
		staleIDs := ids(stale[1:])
		before := map[int64]outbox.Message{}
		for _, id := range staleIDs {
			before[id] = get(t, s, id)
		}
		check := func(op string, notApplied []int64, err error) {
			t.Helper()
			var fe *outbox.FenceError
			if !errors.Is(err, outbox.ErrLeaseLost) || !errors.As(err, &fe) {
				t.Fatalf("%s: err %v, want a FenceError", op, err)
			}
			slices.Sort(notApplied)
			if !slices.Equal(notApplied, staleIDs) || !slices.Equal(fe.IDs, notApplied) {
				t.Fatalf("%s: not applied %v (error lists %v), want %v", op, notApplied, fe.IDs, staleIDs)
			}
			for _, id := range staleIDs {
				got := get(t, s, id)
				b := before[id]
				if got.Status != outbox.StatusProcessing || got.LockedBy != "owner" || got.RetryCount != b.RetryCount ||
					!sameTime(*got.LockedUntil, *b.LockedUntil) || got.LastError != "" {
					t.Fatalf("%s changed the new owner's row: %+v", op, got)
				}
			}
		}
		n, err := r.MarkPublished(ctx, "stale", append([]int64{keep.ID}, staleIDs...)...)
		check("mark published", n, err)
		if got := get(t, s, keep.ID); got.Status != outbox.StatusPublished {
			t.Fatalf("the row the stale worker still held was not published: %+v", got)
		}
		var fails []outbox.Failure
		for i := range stale[1:] {
			fails = append(fails, outbox.Failed(&stale[1+i], errors.New("late")))
		}
		res, err := r.MarkFailed(ctx, "stale", fails...)
		check("mark failed", res.NotApplied, err)
		if len(res.Retrying)+len(res.Abandoned) != 0 {
			t.Fatalf("mark failed reports changes: %+v", res)
		}
		n, err = r.Release(ctx, "stale", staleIDs...)
		check("release", n, err)
		// A guard on the claimed retry count: a wrong count changes nothing.
		wrong := outbox.Failed(&owner[1], errors.New("x"))
		wrong.RetryCount = 5
		if res, err := r.MarkFailed(ctx, "owner", wrong); !errors.Is(err, outbox.ErrLeaseLost) || len(res.NotApplied) != 1 {
			t.Fatalf("mark failed with a wrong retry count: %+v %v", res, err)
		}
		// The owner's own marks apply.
		if n, err := r.MarkPublished(ctx, "owner", staleIDs...); err != nil || len(n) != 0 {
			t.Fatalf("owner's mark: %v %v", n, err)
		}
		counts, err := r.Counts(ctx)
		if err != nil || counts[outbox.StatusPublished] != 4 {
			t.Fatalf("counts %v %v", counts, err)
		}
	})
}

func TestRetryPolicyHonoured(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		clk := newClock()
		policy := outbox.RetryPolicy{BaseDelay: time.Second, Multiplier: 3, MaxDelay: 20 * time.Second, Jitter: 0.5, MaxRetries: 4}
		u := 0.5
		r := newRepo(t, s, outbox.WithClock(clk.Now), outbox.WithRetryPolicy(policy), outbox.WithRandom(func() float64 { return u }))
		m := &outbox.Message{MessageID: "r", Topic: "t"}
		if err := r.Add(ctx, nil, m); err != nil {
			t.Fatal(err)
		}
		// Delay before retry n+1: min(1s × 3^n, 20s) × (1 − 0.5 × 0.5).
		want := []time.Duration{750 * time.Millisecond, 2250 * time.Millisecond, 6750 * time.Millisecond, 15 * time.Second}
		for attempt := range 5 {
			got, err := r.ClaimBatch(ctx, "w", 1, "")
			if err != nil || len(got) != 1 {
				t.Fatalf("attempt %d: claim %v %d", attempt, err, len(got))
			}
			res, err := r.MarkFailed(ctx, "w", outbox.Failed(&got[0], fmt.Errorf("boom %d", attempt+1)))
			if err != nil {
				t.Fatal(err)
			}
			row := get(t, s, m.ID)
			if row.RetryCount != attempt+1 || row.LastError != fmt.Sprintf("boom %d", attempt+1) || row.LockedUntil != nil {
				t.Fatalf("attempt %d: row %+v", attempt, row)
			}
			if attempt == 4 {
				if len(res.Abandoned) != 1 || row.Status != outbox.StatusAbandoned || row.NextRetryAt != nil {
					t.Fatalf("past max retries: %+v, row %+v", res, row)
				}
				break
			}
			if len(res.Retrying) != 1 || row.Status != outbox.StatusFailed || row.NextRetryAt == nil ||
				!sameTime(*row.NextRetryAt, clk.Now().Add(want[attempt])) {
				t.Fatalf("attempt %d: %+v, next retry %v, want now+%v", attempt, res, row.NextRetryAt, want[attempt])
			}
			clk.Advance(want[attempt] - time.Millisecond)
			if early, _ := r.ClaimBatch(ctx, "w", 1, ""); len(early) != 0 {
				t.Fatalf("attempt %d: claimed before its retry time", attempt)
			}
			clk.Advance(time.Millisecond)
		}
		if got, _ := r.ClaimBatch(ctx, "w", 1, ""); len(got) != 0 {
			t.Fatal("an abandoned message was claimed")
		}
		if n, err := r.Requeue(ctx, nil, m.ID); err != nil || n != 1 {
			t.Fatalf("requeue: %d %v", n, err)
		}
		row := get(t, s, m.ID)
		if row.Status != outbox.StatusPending || row.RetryCount != 0 || row.LastError != "boom 5" {
			t.Fatalf("requeued row %+v", row)
		}
	})
}

func TestRetryPolicyMath(t *testing.T) {
	p := outbox.RetryPolicy{BaseDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: time.Second, Jitter: 1, MaxRetries: 1}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		if got := p.Backoff(n); got != want*time.Millisecond {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want*time.Millisecond)
		}
	}
	if got := p.Backoff(10000); got != time.Second {
		t.Errorf("Backoff overflows: %v", got)
	}
	if got := p.Delay(1, 0); got != 200*time.Millisecond {
		t.Errorf("Delay with u=0: %v", got)
	}
	if got := p.Delay(1, 0.75); got != 50*time.Millisecond {
		t.Errorf("full jitter, u=0.75: %v, want 50ms", got)
	}
	p.Jitter = 0
	if got := p.Delay(3, 0.99); got != 800*time.Millisecond {
		t.Errorf("no jitter: %v", got)
	}
	for _, bad := range []outbox.RetryPolicy{
		{BaseDelay: 0, Multiplier: 1, MaxDelay: 1},
		{BaseDelay: 1, Multiplier: 0.5, MaxDelay: 1},
		{BaseDelay: 2, Multiplier: 1, MaxDelay: 1},
		{BaseDelay: 1, Multiplier: 1, MaxDelay: 1, Jitter: 1.5},
		{BaseDelay: 1, Multiplier: 1, MaxDelay: 1, MaxRetries: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := outbox.DefaultRetryPolicy().Validate(); err != nil {
		t.Error(err)
	}
}

func TestMarksAreBatched(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		inner, _ := b.open(t)
		s := &countingStore{Store: inner}
		clk := newClock()
		var draws int
		r := newRepo(t, s, outbox.WithClock(clk.Now), outbox.WithRandom(func() float64 { draws++; return 0.5 }),
			outbox.WithRetryPolicy(outbox.RetryPolicy{BaseDelay: time.Second, Multiplier: 2, MaxDelay: time.Minute, Jitter: 0.5, MaxRetries: 1}))
		if err := r.Add(ctx, nil, msgs("b", "t", 30)...); err != nil {
			t.Fatal(err)
		}
		got, err := r.ClaimBatch(ctx, "w", 30, "")
		if err != nil || len(got) != 30 {
			t.Fatalf("claim: %v %d", err, len(got))
		}
		s.updates.Store(0)
		if _, err := r.MarkPublished(ctx, "w", ids(got[:10])...); err != nil {
			t.Fatal(err)
		}
		if n := s.updates.Load(); n != 1 {
			t.Fatalf("MarkPublished of 10 rows ran %d UPDATEs, want 1", n)
		}
		var fails []outbox.Failure
		for i := 10; i < 30; i++ {
			fails = append(fails, outbox.Failed(&got[i], errors.New("broker down")))
		}
		s.updates.Store(0)
		res, err := r.MarkFailed(ctx, "w", fails...)
		if err != nil || len(res.Retrying) != 20 {
			t.Fatalf("mark failed: %+v %v", res, err)
		}
		if n := s.updates.Load(); n != 1 || draws != 1 {
			t.Fatalf("MarkFailed of 20 rows with one error ran %d UPDATEs and %d jitter draws, want 1 and 1", n, draws)
		}
		next := get(t, s, got[10].ID).NextRetryAt
		for _, f := range fails {
			if row := get(t, s, f.ID); !sameTime(*row.NextRetryAt, *next) {
				t.Fatalf("rows of one group have different retry times: %v vs %v", row.NextRetryAt, next)
			}
		}
		// Second round: 10 rows on their last retry (abandoned), 10 rows
		// with another error text; the rest … two groups, two UPDATEs.
		clk.Advance(time.Minute)
		again, err := r.ClaimBatch(ctx, "w", 30, "")
		if err != nil || len(again) != 20 {
			t.Fatalf("re-claim: %v %d", err, len(again))
		}
		fails = fails[:0]
		for i := range again {
			msg := "broker down"
			if i%2 == 0 {
				msg = "timeout"
			}
			fails = append(fails, outbox.Failed(&again[i], errors.New(msg)))
		}
		s.updates.Store(0)
		s.finds.Store(0)
		res, err = r.MarkFailed(ctx, "w", fails...)
		if err != nil || len(res.Abandoned) != 20 {
			t.Fatalf("second mark failed: %+v %v", res, err)
		}
		if n, f := s.updates.Load(), s.finds.Load(); n != 2 || f != 0 {
			t.Fatalf("MarkFailed with two error texts ran %d UPDATEs and %d reads, want 2 and 0", n, f)
		}
	})
}

func TestMarkLargeBatchChunks(t *testing.T) {
	inner, _ := backends()[1].open(t) // SQLite: the memory store's claim is quadratic in the batch size
	s := &countingStore{Store: inner}
	r := newRepo(t, s)
	ctx := context.Background()
	if err := r.Add(ctx, nil, msgs("c", "t", 2500)...); err != nil {
		t.Fatal(err)
	}
	got, err := r.ClaimBatch(ctx, "w", 2500, "")
	if err != nil || len(got) != 2500 {
		t.Fatalf("claim: %v %d", err, len(got))
	}
	s.updates.Store(0)
	if _, err := r.MarkPublished(ctx, "w", ids(got)...); err != nil {
		t.Fatal(err)
	}
	if n := s.updates.Load(); n != 3 {
		t.Fatalf("2500 ids: %d UPDATEs, want 3 (1000 ids each)", n)
	}
}

func TestInspectionRequeuePurge(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.open(t)
		clk := newClock()
		r := newRepo(t, s, outbox.WithClock(clk.Now),
			outbox.WithRetryPolicy(outbox.RetryPolicy{BaseDelay: time.Hour, Multiplier: 1, MaxDelay: time.Hour, MaxRetries: 5}))
		const n = 40
		if err := r.Add(ctx, nil, msgs("i", "t", n)...); err != nil {
			t.Fatal(err)
		}
		if oldest, ok, err := r.OldestUnpublished(ctx, ""); err != nil || !ok || !sameTime(oldest, clk.Now()) {
			t.Fatalf("oldest: %v %v %v", oldest, ok, err)
		}
		got, err := r.ClaimBatch(ctx, "w", 34, "")
		if err != nil || len(got) != 34 {
			t.Fatal(err)
		}
		// 20 published, 5 failed, 4 abandoned, 5 processing, 6 pending.
		if _, err := r.MarkPublished(ctx, "w", ids(got[:20])...); err != nil {
			t.Fatal(err)
		}
		var fails []outbox.Failure
		for i := 20; i < 29; i++ {
			err := errors.New("transient")
			if i >= 25 {
				err = outbox.Permanent(errors.New("rejected"))
			}
			fails = append(fails, outbox.Failed(&got[i], err))
		}
		if _, err := r.MarkFailed(ctx, "w", fails...); err != nil {
			t.Fatal(err)
		}
		want := map[outbox.Status]int64{outbox.StatusPublished: 20, outbox.StatusFailed: 5, outbox.StatusAbandoned: 4, outbox.StatusProcessing: 5, outbox.StatusPending: 6}
		counts, err := r.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range outbox.Statuses {
			if counts[st] != want[st] {
				t.Fatalf("counts %v, want %v", counts, want)
			}
		}
		for name, c := range map[string]struct {
			f    func(context.Context, int) ([]outbox.Message, error)
			want int
		}{
			"unprocessed": {r.Unprocessed, 11}, "processing": {r.Processing, 5}, "failed": {r.Failed, 5},
			"abandoned": {r.Abandoned, 4}, "published": {r.Published, 20},
		} {
			ms, err := c.f(ctx, 0)
			if err != nil || len(ms) != c.want {
				t.Fatalf("%s: %d rows, %v; want %d", name, len(ms), err, c.want)
			}
			if limited, _ := c.f(ctx, 2); len(limited) != min(2, c.want) {
				t.Fatalf("%s with limit 2: %d rows", name, len(limited))
			}
		}
		ab, _ := r.Abandoned(ctx, 0)
		if !strings.Contains(ab[0].LastError, "rejected") {
			t.Fatalf("abandoned without its error: %+v", ab[0])
		}
		if n, err := r.Requeue(ctx, []outbox.Status{outbox.StatusAbandoned}, ab[0].ID, ab[1].ID); err != nil || n != 2 {
			t.Fatalf("requeue two: %d %v", n, err)
		}
		if n, err := r.Requeue(ctx, nil); err != nil || n != 7 {
			t.Fatalf("requeue the rest: %d %v, want 7 (5 failed, 2 abandoned)", n, err)
		}
		if n, err := r.Requeue(ctx, nil); err != nil || n != 0 {
			t.Fatalf("requeue again: %d %v", n, err)
		}
		// Retention: the 20 published rows, swept by 4 concurrent sweepers
		// in batches of 3.
		clk.Advance(2 * time.Hour)
		if n, err := r.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusPublished, OlderThan: 3 * time.Hour}); err != nil || n != 0 {
			t.Fatalf("purge of rows not yet old enough: %d %v", n, err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var total int64
		for range 4 {
			wg.Go(func() {
				n, err := r.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusPublished, OlderThan: time.Hour, BatchSize: 3})
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if total != 20 {
			t.Fatalf("concurrent sweeps deleted %d rows, want 20", total)
		}
		if n, err := r.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusPublished, BatchSize: 3}); err != nil || n != 0 {
			t.Fatalf("sweep again: %d %v", n, err)
		}
		if left, _ := s.Count(ctx, dao.Criteria{}); left != n-20 {
			t.Fatalf("%d rows left, want %d", left, n-20)
		}
		if n, err := r.Purge(ctx, outbox.PurgeRequest{Status: outbox.StatusAbandoned, MaxBatches: 1, BatchSize: 1}); err != nil || n != 0 {
			t.Fatalf("purge abandoned (none left): %d %v", n, err)
		}
	})
}

func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	for _, b := range backends()[1:] {
		t.Run(b.name, func(t *testing.T) {
			_, db := b.open(t) // one table migrated already
			table := testdb.Table(t, db, "outbox_mig")
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Go(func() { errs <- outbox.Migrate(context.Background(), db, table) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("concurrent migrate: %v", err)
				}
			}
			if err := outbox.Migrate(context.Background(), db, table); err != nil {
				t.Fatalf("migrate again: %v", err)
			}
			claim, unique := outbox.IndexNames(db, table)
			for _, idx := range []string{claim, unique} {
				if !db.Migrator().HasIndex(table, idx) {
					t.Fatalf("index %s missing on %s", idx, table)
				}
			}
			if err := outbox.Migrate(context.Background(), db, "bad-name"); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Fatalf("bad table name: %v", err)
			}
		})
	}
}

// A worker whose clock is off by more than the lease loses its rows to a
// worker on time (behind: its lease was over when it was written) or takes
// them from one (ahead: the other's lease looks over to it). Either way the
// worker that lost the rows cannot overwrite the new owner's state with any
// mark, and the new owner's marks apply.
func TestSkewedWorkerFence(t *testing.T) {
	for _, c := range []struct {
		name         string
		first, later time.Duration // clock skews of the first and the later claimer
	}{
		{"behind loses to on-time", -time.Hour, 0},
		{"on-time loses to ahead", 0, time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				s, _ := b.open(t)
				const lease = 2 * time.Second
				first := newRepo(t, s, outbox.WithClock(skewedClock(c.first)), outbox.WithLease(lease))
				later := newRepo(t, s, outbox.WithClock(skewedClock(c.later)), outbox.WithLease(lease))
				if err := first.Add(ctx, nil, msgs("skewfence", "t", 4)...); err != nil {
					t.Fatal(err)
				}
				stale, err := first.ClaimBatch(ctx, "old", 4, "")
				if err != nil || len(stale) != 4 {
					t.Fatalf("first claim: %v, %d rows", err, len(stale))
				}
				owner, err := later.ClaimBatch(ctx, "new", 4, "")
				if err != nil || len(owner) != 4 {
					t.Fatalf("later claim took %d rows (%v); the skew should make all 4 look expired", len(owner), err)
				}
				all := ids(stale)
				slices.Sort(all)
				before := map[int64]outbox.Message{}
				for _, id := range all {
					before[id] = get(t, s, id)
				}
				check := func(op string, notApplied []int64, err error) {
					t.Helper()
					slices.Sort(notApplied)
					if !errors.Is(err, outbox.ErrLeaseLost) || !slices.Equal(notApplied, all) {
						t.Fatalf("%s by the old owner: not applied %v, err %v; want all of %v refused", op, notApplied, err, all)
					}
					for _, id := range all {
						got, was := get(t, s, id), before[id]
						if got.Status != outbox.StatusProcessing || got.LockedBy != "new" || got.RetryCount != 0 ||
							got.LockedUntil == nil || !sameTime(*got.LockedUntil, *was.LockedUntil) || got.LastError != "" {
							t.Fatalf("%s by the old owner changed the new owner's row: %+v", op, got)
						}
					}
				}
				n, err := first.MarkPublished(ctx, "old", all...)
				check("mark published", n, err)
				var fails []outbox.Failure
				for i := range stale {
					fails = append(fails, outbox.Failed(&stale[i], errors.New("late")))
				}
				res, err := first.MarkFailed(ctx, "old", fails...)
				check("mark failed", res.NotApplied, err)
				n, err = first.Release(ctx, "old", all...)
				check("release", n, err)
				if n, err := later.MarkPublished(ctx, "new", all...); err != nil || len(n) != 0 {
					t.Fatalf("new owner's mark: %v %v", n, err)
				}
				if got, err := later.Counts(ctx); err != nil || got[outbox.StatusPublished] != 4 {
					t.Fatalf("counts %v %v", got, err)
				}
			})
		})
	}
}

// Without an injected clock a repository over a SQL store reads the
// database's clock: the leases and retry times it writes are the
// database's time plus the lease or delay, whatever its host's wall clock
// says. The database servers here run on this machine, so their clock is
// the real time.
func TestDatabaseClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _ := b.open(t)
		if r := newRepo(t, s, outbox.WithClock(time.Now)); r.DatabaseClock() {
			t.Fatal("an injected clock must replace the database clock")
		}
		if b.name == "memory" {
			if newRepo(t, s).DatabaseClock() {
				t.Fatal("memstore has no database clock of its own")
			}
			return
		}
		for _, skew := range []time.Duration{-time.Hour, time.Hour} {
			ctx := context.Background()
			const lease, delay = 10 * time.Second, 30 * time.Second
			policy := outbox.RetryPolicy{BaseDelay: delay, Multiplier: 1, MaxDelay: delay, MaxRetries: 3}
			r := newRepo(t, s, outbox.WithLease(lease), outbox.WithRetryPolicy(policy))
			if !r.DatabaseClock() || !outbox.SetHostClock(r, skewedClock(skew)) {
				t.Fatal("a repository over a SQL store must read the database clock")
			}
			prefix := fmt.Sprintf("dbclock%d", int(skew.Hours()))
			if err := r.Add(ctx, nil, msgs(prefix, "t", 2)...); err != nil {
				t.Fatal(err)
			}
			// near reports whether got is want, on the real clock, within
			// the time the calls took plus a second of slack.
			near := func(got time.Time, from, to time.Time, d time.Duration) bool {
				return !got.Before(from.Add(d-time.Second)) && !got.After(to.Add(d+time.Second))
			}
			from := time.Now()
			got, err := r.ClaimBatch(ctx, "w", 2, "")
			to := time.Now()
			if err != nil || len(got) != 2 {
				t.Fatalf("skew %v: claim: %v, %d rows", skew, err, len(got))
			}
			for _, m := range got {
				if !near(*m.LockedUntil, from, to, lease) {
					t.Fatalf("skew %v: LockedUntil %v, want the real time %v + %v", skew, *m.LockedUntil, from, lease)
				}
			}
			from = time.Now()
			if _, err := r.MarkFailed(ctx, "w", outbox.Failed(&got[0], errors.New("x"))); err != nil {
				t.Fatal(err)
			}
			if _, err := r.MarkPublished(ctx, "w", got[1].ID); err != nil {
				t.Fatal(err)
			}
			to = time.Now()
			if m := get(t, s, got[0].ID); m.NextRetryAt == nil || !near(*m.NextRetryAt, from, to, delay) {
				t.Fatalf("skew %v: NextRetryAt %v, want the real time %v + %v", skew, m.NextRetryAt, from, delay)
			}
			if m := get(t, s, got[1].ID); m.PublishedAt == nil || !near(*m.PublishedAt, from, to, 0) {
				t.Fatalf("skew %v: PublishedAt %v, want the real time %v", skew, m.PublishedAt, from)
			}
		}
	})
}
