package dispatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// TestTickDerivedFromLease: a Config without Tick takes its tick from the
// lease (1 s, or a quarter of a shorter lease) instead of refusing a short
// lease; an explicit Tick above 3/8 of the lease is refused.
func TestTickDerivedFromLease(t *testing.T) {
	store, _ := memBackend().open(t)
	fn := func(context.Context, dispatch.Fire) error { return nil }
	for _, c := range []struct {
		lease, tick, want time.Duration
	}{
		{lease: 1500 * time.Millisecond, want: 375 * time.Millisecond},
		{lease: 0, want: dispatch.DefaultPollInterval},                                               // default lease 30 s
		{lease: 4 * time.Second, want: time.Second},                                                  // a quarter is the default tick
		{lease: 10 * time.Second, want: dispatch.DefaultPollInterval},                                // a quarter is longer: 1 s
		{lease: 2 * time.Millisecond, want: time.Millisecond},                                        // never below 1 ms
		{lease: 1600 * time.Millisecond, tick: 600 * time.Millisecond, want: 600 * time.Millisecond}, // explicit, 3/8 of the lease
	} {
		w, err := dispatch.NewScheduleWorker(store, fn, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Lease: c.lease, PollInterval: c.tick})
		if err != nil {
			t.Errorf("lease %v, tick %v: %v", c.lease, c.tick, err)
			continue
		}
		if got := w.Config().PollInterval; got != c.want {
			t.Errorf("lease %v, tick %v: worker tick %v, want %v", c.lease, c.tick, got, c.want)
		}
		if got := dispatch.PollIntervalFor(c.lease); c.tick == 0 && got != c.want {
			t.Errorf("PollIntervalFor(%v) = %v, want %v", c.lease, got, c.want)
		}
	}
	for _, c := range []struct{ lease, tick time.Duration }{
		{1500 * time.Millisecond, time.Second},
		{1500 * time.Millisecond, 750 * time.Millisecond}, // two ticks fit, but leave no time to start a claim's rows
		{1600 * time.Millisecond, 601 * time.Millisecond}, // the lease less two ticks is shorter than the claim's deadline
	} {
		_, err := dispatch.NewScheduleWorker(store, fn, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Lease: c.lease, PollInterval: c.tick})
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("explicit tick %v with lease %v: err %v, want ErrInvalidArgument", c.tick, c.lease, err)
		}
	}
}

// TestShortLeaseDerivedTickRenews: with a short lease and no Tick, the
// derived tick renews a handler that runs for several leases in time: a
// second worker never fires its row, and no lease is lost.
func TestShortLeaseDerivedTickRenews(t *testing.T) {
	store, _ := memBackend().open(t)
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	addKeys(t, sc, "long")
	var fired, cancelled atomic.Int64
	fn := func(ctx context.Context, _ dispatch.Fire) error {
		fired.Add(1)
		select {
		case <-time.After(6 * time.Second): // three leases
			return nil
		case <-ctx.Done():
			cancelled.Add(1)
			return ctx.Err()
		}
	}
	// A lease of 2 s derives a tick of 500 ms, half the default: a
	// renewal late by up to 1.5 s, as under -race on a loaded machine,
	// still keeps it.
	cfg := dispatch.Config[dispatch.Schedule]{Lease: 2 * time.Second}
	cfg.WorkerID = "first"
	w1 := newScheduleWorker(t, store, fn, dispatch.Policy{}, cfg)
	runWorker(t, w1.Run)
	waitFor(t, 10*time.Second, "claimed", func() bool { return w1.Stats().InFlight == 1 })
	cfg.WorkerID = "second"
	w2 := newScheduleWorker(t, store, fn, dispatch.Policy{}, cfg)
	runWorker(t, w2.Run)
	waitFired(t, store, 1, "fired")
	if fired.Load() != 1 || cancelled.Load() != 0 {
		t.Fatalf("fired %d times, %d cancelled; want once, none cancelled", fired.Load(), cancelled.Load())
	}
	if st := w1.Stats(); st.Renewed < 2 || st.LeaseLost != 0 || st.Completed != 1 {
		t.Fatalf("first worker stats %+v: want at least 2 renewals, no lease lost, 1 outcome", st)
	}
}

// TestDeprecatedTickIsPollInterval: a Config that sets only the deprecated
// Tick runs with it as its PollInterval (the explicit interval's 3/8 rule
// applies to it), and PollInterval wins when both are set.
func TestDeprecatedTickIsPollInterval(t *testing.T) {
	store, _ := memBackend().open(t)
	fn := func(context.Context, dispatch.Fire) error { return nil }
	old := dispatch.Config[dispatch.Schedule]{Lease: 1600 * time.Millisecond, Tick: 200 * time.Millisecond}
	w, err := dispatch.NewScheduleWorker(store, fn, dispatch.Policy{}, old)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Config().PollInterval; got != 200*time.Millisecond {
		t.Errorf("Tick 200ms alone: PollInterval %v, want 200ms", got)
	}
	tooLong := dispatch.Config[dispatch.Schedule]{Lease: 1600 * time.Millisecond, Tick: 601 * time.Millisecond}
	if _, err := dispatch.NewScheduleWorker(store, fn, dispatch.Policy{}, tooLong); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Tick 601ms alone with lease 1.6s: err %v, want ErrInvalidArgument as for PollInterval", err)
	}
	both := dispatch.Config[dispatch.Schedule]{Lease: 1600 * time.Millisecond, Tick: 601 * time.Millisecond, PollInterval: 300 * time.Millisecond}
	w, err = dispatch.NewScheduleWorker(store, fn, dispatch.Policy{}, both)
	if err != nil {
		t.Fatalf("PollInterval 300ms beside Tick 601ms: %v, want the new field to win", err)
	}
	if got := w.Config().PollInterval; got != 300*time.Millisecond {
		t.Errorf("both set: PollInterval %v, want 300ms", got)
	}
	if got, want := dispatch.TickFor(3*time.Second), dispatch.PollIntervalFor(3*time.Second); got != want {
		t.Errorf("TickFor(3s) = %v, want PollIntervalFor's %v", got, want)
	}
	if tick := dispatch.DefaultTick; tick != dispatch.DefaultPollInterval {
		t.Errorf("DefaultTick %v, want DefaultPollInterval %v", tick, dispatch.DefaultPollInterval)
	}
}
