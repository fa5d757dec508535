package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/outbox"
)

// setLease writes a schedule's lease columns directly, as a claim by a
// worker would have.
func setLease(t *testing.T, s dao.Store[dispatch.Schedule], key, owner string, until time.Time) {
	t.Helper()
	if n, err := s.Update(context.Background(), dao.Eq(dispatch.ColKey, key), dao.Set{dispatch.ColLeaseOwner: owner, dispatch.ColLeaseUntil: until}); err != nil || n != 1 {
		t.Fatalf("set lease of %s: %d, %v", key, n, err)
	}
}

// TestRescuer: only leases that name an owner and expired more than After
// ago are freed (owner cleared, lease end kept), in bounded passes, and
// counted; a second run finds nothing.
func TestRescuer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		ctx := context.Background()
		clk := newClock()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{Now: clk.Now})
		now := clk.Now()
		addKeys(t, sc, "dead-0", "dead-1", "dead-2", "dead-3", "dead-4", "recent", "free", "live")
		for i := range 5 {
			setLease(t, store, fmt.Sprintf("dead-%d", i), fmt.Sprintf("gone#%d", i), now.Add(-10*time.Minute))
		}
		setLease(t, store, "recent", "slow#1", now.Add(-time.Minute))
		setLease(t, store, "free", "", now.Add(-time.Hour))
		setLease(t, store, "live", "live#1", now.Add(time.Minute))

		r, err := dispatch.NewRescuer(dispatch.RescueConfig[dispatch.Schedule]{
			Store: store, KeyField: dispatch.ColID, Key: func(s *dispatch.Schedule) any { return s.ID },
			OwnerField: dispatch.ColLeaseOwner, UntilField: dispatch.ColLeaseUntil,
			After: 5 * time.Minute, BatchSize: 2, Now: clk.Now, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := r.Rescue(ctx)
		if err != nil || n != 5 || r.Rescued() != 5 {
			t.Fatalf("rescue: %d, %v (total %d); want 5", n, err, r.Rescued())
		}
		for i := range 5 {
			s := get(t, sc, fmt.Sprintf("dead-%d", i))
			if s.LeaseOwner != "" || s.LeaseUntil == nil || !s.LeaseUntil.Equal(now.Add(-10*time.Minute)) || s.Status != dispatch.StatusActive {
				t.Errorf("dead-%d after the rescue: owner %q until %v status %s", i, s.LeaseOwner, s.LeaseUntil, s.Status)
			}
		}
		for k, owner := range map[string]string{"recent": "slow#1", "live": "live#1", "free": ""} {
			if s := get(t, sc, k); s.LeaseOwner != owner {
				t.Errorf("%s: owner %q, want %q", k, s.LeaseOwner, owner)
			}
		}
		if n, err := r.Rescue(ctx); err != nil || n != 0 {
			t.Fatalf("second rescue: %d, %v; want 0", n, err)
		}
		clk.Advance(5 * time.Minute)
		if n, err := r.Rescue(ctx); err != nil || n != 1 || get(t, sc, "recent").LeaseOwner != "" {
			t.Fatalf("rescue after 5 more minutes: %d, %v; want the recent one", n, err)
		}
	})
}

// TestRetention: fired and failed schedules past the age are deleted in
// bounded batches; active, paused and recent ones stay.
func TestRetention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		ctx := context.Background()
		clk := newClock()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{Now: clk.Now})
		now := clk.Now()
		rows := map[string]struct {
			status dispatch.Status
			due    time.Duration
			kept   bool
		}{
			"fired-old-0": {dispatch.StatusFired, -3 * time.Hour, false},
			"fired-old-1": {dispatch.StatusFired, -2 * time.Hour, false},
			"fired-old-2": {dispatch.StatusFired, -90 * time.Minute, false},
			"failed-old":  {dispatch.StatusFailed, -5 * time.Hour, false},
			"fired-new":   {dispatch.StatusFired, -10 * time.Minute, true},
			"failed-new":  {dispatch.StatusFailed, -30 * time.Minute, true},
			"active-old":  {dispatch.StatusActive, -5 * time.Hour, true},
			"paused-old":  {dispatch.StatusPaused, -5 * time.Hour, true},
		}
		for k, r := range rows {
			if _, _, err := sc.Add(ctx, dispatch.Spec{Key: k, At: now.Add(r.due)}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Update(ctx, dao.Eq(dispatch.ColKey, k), dao.Set{dispatch.ColStatus: string(r.status)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := dispatch.NewRetention(store, dispatch.RetentionConfig{OlderThan: time.Hour, Statuses: []dispatch.Status{dispatch.StatusActive}}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("retention of active schedules: %v", err)
		}
		if _, err := dispatch.NewRetention(store, dispatch.RetentionConfig{}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("retention without an age: %v", err)
		}
		rt, err := dispatch.NewRetention(store, dispatch.RetentionConfig{OlderThan: time.Hour, BatchSize: 3, MaxBatches: 1, Now: clk.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := rt.Sweep(ctx); err != nil || n != 3 {
			t.Fatalf("first sweep (one batch of 3): %d, %v", n, err)
		}
		if n, err := rt.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("second sweep: %d, %v; want the last old one", n, err)
		}
		if n, err := rt.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("third sweep: %d, %v; want 0", n, err)
		}
		for k, r := range rows {
			_, err := sc.Get(ctx, k)
			if kept := err == nil; kept != r.kept {
				t.Errorf("%s: kept %v, want %v (err %v)", k, kept, r.kept, err)
			}
		}
	})
}

// TestOutboxRetentionTask: the task purges the outbox's old published
// messages through the outbox's own sweep.
func TestOutboxRetentionTask(t *testing.T) {
	ctx := context.Background()
	ms, err := memstore.New[outbox.Message]()
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	repo, err := outbox.New(ms, outbox.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if err := repo.Add(ctx, nil, &outbox.Message{MessageID: fmt.Sprintf("m-%d", i), Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := repo.ClaimBatch(ctx, "w", 5, "")
	if err != nil || len(got) != 5 {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	ids := make([]int64, len(got))
	for i := range got {
		ids[i] = got[i].ID
	}
	if _, err := repo.MarkPublished(ctx, "w", ids...); err != nil {
		t.Fatal(err)
	}
	task := dispatch.OutboxRetention(repo, outbox.PurgeRequest{Status: outbox.StatusPublished, OlderThan: time.Hour, BatchSize: 2})
	if err := task.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := repo.Counts(ctx); c[outbox.StatusPublished] != 5 {
		t.Fatalf("purged published messages younger than the age: %v", c)
	}
	clk.Advance(2 * time.Hour)
	if err := task.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _ := repo.Counts(ctx); c[outbox.StatusPublished] != 0 || c[outbox.StatusPending] != 2 {
		t.Fatalf("after the sweep: %v; want 0 published and the 2 pending kept", c)
	}
}

// TestMaintenanceOnLeaderOnly: of two workers whose maintenance is gated
// by electors of one election, only the leader's tasks run; when it
// resigns, the other's run.
func TestMaintenanceOnLeaderOnly(t *testing.T) {
	store, _ := memBackend().open(t)
	leases := memstore.NewLeases()
	quiet := slog.New(slog.DiscardHandler)
	var runs [2]atomic.Int64
	var electors [2]*coord.Elector
	var stopElector [2]func()
	for i := range 2 {
		e, err := coord.NewElector(leases, coord.ElectorConfig{Name: "dispatch-maintenance", ID: fmt.Sprintf("c%d", i),
			Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		electors[i] = e
		w := newScheduleWorker(t, store, func(context.Context, dispatch.Fire) error { return nil }, dispatch.Policy{},
			dispatch.Config[dispatch.Schedule]{PollInterval: 20 * time.Millisecond, Logger: quiet, Maintenance: &dispatch.Maintenance{
				Every: 10 * time.Millisecond, Leader: dispatch.ElectorGate(e),
				Tasks: []dispatch.Task{{Name: "count", Run: func(context.Context) error { runs[i].Add(1); return nil }}},
			}})
		runWorker(t, w.Run)
		if i == 0 { // c0 campaigns first and wins
			stopElector[i] = runWorker(t, e.Run)
			waitFor(t, 5*time.Second, "c0 elected", func() bool { _, ok := e.Leader(); return ok })
		} else {
			stopElector[i] = runWorker(t, e.Run)
		}
	}
	waitFor(t, 5*time.Second, "the leader's tasks", func() bool { return runs[0].Load() >= 5 })
	if n := runs[1].Load(); n != 0 {
		t.Fatalf("the follower ran its tasks %d times", n)
	}
	stopElector[0]() // resigns
	waitFor(t, 5*time.Second, "c1 elected", func() bool { _, ok := electors[1].Leader(); return ok })
	before := runs[0].Load()
	waitFor(t, 5*time.Second, "the new leader's tasks", func() bool { return runs[1].Load() >= 5 })
	if n := runs[0].Load(); n != before {
		t.Fatalf("the resigned leader ran its tasks %d more times", n-before)
	}
}

// TestMaintenanceRunTaskPeriods: Maintenance.Run, without a worker, runs a
// task without its own period every period, and one with Every of four
// periods at most once per Every (first at the first period), each behind
// the leader gate; it refuses a negative task period before running
// anything.
func TestMaintenanceRunTaskPeriods(t *testing.T) {
	var every, slow, asked atomic.Int64
	m := &dispatch.Maintenance{
		Every:  10 * time.Millisecond,
		Leader: func(context.Context) bool { asked.Add(1); return true },
		Tasks: []dispatch.Task{
			{Name: "every", Run: func(context.Context) error { every.Add(1); return nil }},
			{Name: "slow", Run: func(context.Context) error { slow.Add(1); return nil }, Every: 40 * time.Millisecond},
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- m.Run(ctx, slog.New(slog.DiscardHandler)) }()
	waitFor(t, 10*time.Second, "40 periods", func() bool { return every.Load() >= 40 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	ran := time.Since(began)
	e, s := every.Load(), slow.Load()
	most := int64(ran/(40*time.Millisecond)) + 1
	t.Logf("%d periods in %v: the slow task ran %d times (at most %d), the gate was asked %d times", e, ran.Round(time.Millisecond), s, most, asked.Load())
	if s < 1 || s > most {
		t.Errorf("the task with a period of 40 ms ran %d times in %v (%d periods), want 1 to %d", s, ran, e, most)
	}
	if asked.Load() < e+s {
		t.Errorf("the gate was asked %d times for %d task runs", asked.Load(), e+s)
	}
	bad := &dispatch.Maintenance{Tasks: []dispatch.Task{{Name: "bad", Run: func(context.Context) error { return nil }, Every: -time.Second}}}
	if err := bad.Run(context.Background(), nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Run with a negative task period: %v, want dao.ErrInvalidArgument", err)
	}
}
