package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// fires counts every fire by schedule key and due time.
type fires struct {
	mu    sync.Mutex
	byKey map[string]int
	byDue map[string]int // key@due
}

func newFires() *fires { return &fires{byKey: map[string]int{}, byDue: map[string]int{}} }

func (f *fires) record(fr dispatch.Fire) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byKey[fr.Schedule.Key]++
	f.byDue[fr.Schedule.Key+"@"+fr.Schedule.NextFireAt.UTC().Format(time.RFC3339Nano)]++
}

func (f *fires) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byKey[key]
}

func (f *fires) duplicates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var d []string
	for k, n := range f.byDue {
		if n > 1 {
			d = append(d, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	return d
}

func newScheduleWorker(t *testing.T, s dao.Store[dispatch.Schedule], fn dispatch.FireFunc, p dispatch.Policy, cfg dispatch.Config[dispatch.Schedule]) *dispatch.ScheduleWorker {
	t.Helper()
	w, err := dispatch.NewScheduleWorker(s, fn, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestExactlyOnceAcrossWorkers: four workers in one process over one
// table fire 200 once schedules and two every-second cron schedules; every
// once schedule fires exactly once, each cron schedule fires again and again,
// and no cron occurrence fires twice.
func TestExactlyOnceAcrossWorkers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		ctx := context.Background()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		const n = 200
		past := time.Now().Add(-time.Minute)
		for i := range n {
			if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("once-%03d", i), At: past}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("cron-%d", i), Cron: "* * * * * *"}); err != nil {
				t.Fatal(err)
			}
		}
		f := newFires()
		var stops []func()
		for i := range 4 {
			w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
				f.record(fr)
				return nil
			}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{WorkerID: fmt.Sprintf("w%d", i), Concurrency: 8, PollInterval: 20 * time.Millisecond})
			stops = append(stops, runWorker(t, w.Run))
		}
		waitFor(t, 60*time.Second, "all once schedules fired", func() bool {
			c, err := store.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, "once"), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired))))
			return err == nil && c == n
		})
		// A few cron occurrences each; waited for rather than timed, so
		// that a loaded machine slows the test, not fails it.
		waitFor(t, 30*time.Second, "each cron schedule fired twice", func() bool {
			return f.count("cron-0") >= 2 && f.count("cron-1") >= 2
		})
		for _, stop := range stops {
			stop()
		}
		for i := range n {
			if c := f.count(fmt.Sprintf("once-%03d", i)); c != 1 {
				t.Errorf("once-%03d fired %d times", i, c)
			}
		}
		if d := f.duplicates(); len(d) > 0 {
			t.Errorf("occurrences fired more than once: %v", d)
		}
		left, err := store.Count(ctx, dao.NotNull(dispatch.ColLeaseOwner))
		if err != nil {
			t.Fatal(err)
		}
		owned, err := store.Count(ctx, dao.Ne(dispatch.ColLeaseOwner, ""))
		if err != nil || owned != 0 {
			t.Errorf("%d of %d rows still leased after the workers stopped (err %v)", owned, left, err)
		}
	})
}

// TestLadderOnWorker: a failing once schedule climbs the ladder on a fake
// clock and fails at its max failures; its last error is kept.
func TestLadderOnWorker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		ctx := context.Background()
		clk := newClock()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{Now: clk.Now})
		if _, _, err := sc.Add(ctx, dispatch.Spec{Key: "flaky", MaxFailures: 3}); err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int64
		w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
			calls.Add(1)
			return fmt.Errorf("attempt %d failed", calls.Load())
		}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Now: clk.Now, PollInterval: 10 * time.Millisecond, Lease: time.Minute})
		runWorker(t, w.Run)
		start := clk.Now()
		for i, wait := range []time.Duration{30 * time.Second, time.Minute} {
			waitFor(t, 10*time.Second, fmt.Sprintf("failure %d", i+1), func() bool { return get(t, sc, "flaky").FailureCount == i+1 })
			s := get(t, sc, "flaky")
			if !s.NextFireAt.Equal(start.Add(wait)) || s.Status != dispatch.StatusActive || s.LastError != fmt.Sprintf("attempt %d failed", i+1) {
				t.Fatalf("after failure %d: next %v (want start+%v), status %s, last error %q", i+1, s.NextFireAt.Sub(start), wait, s.Status, s.LastError)
			}
			time.Sleep(50 * time.Millisecond) // not due yet: nothing fires
			if calls.Load() != int64(i+1) {
				t.Fatalf("fired %d times before the backoff passed", calls.Load())
			}
			clk.Advance(wait)
			start = clk.Now()
		}
		waitFor(t, 10*time.Second, "failed", func() bool { return get(t, sc, "flaky").Status == dispatch.StatusFailed })
		s := get(t, sc, "flaky")
		if s.FailureCount != 3 || s.LastError != "attempt 3 failed" {
			t.Fatalf("failed schedule: %+v", s)
		}
		if st := w.ScheduleStats(); st.Retries != 2 || st.Failed != 1 || st.Fired != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestFencedOutcomeAfterLeaseLoss: a worker whose row was taken over while
// its handler ran writes nothing.
func TestFencedOutcomeAfterLeaseLoss(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		addKeys(t, sc, "job")
		started, finish := make(chan struct{}), make(chan struct{})
		w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
			close(started)
			<-finish
			return nil
		}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{PollInterval: 10 * time.Millisecond, Lease: time.Minute})
		runWorker(t, w.Run)
		<-started
		// Another worker takes the row over (as after an expired lease).
		setLease(t, store, "job", "thief#1", time.Now().Add(time.Hour))
		close(finish)
		waitFor(t, 10*time.Second, "the fenced outcome", func() bool { return w.Stats().LeaseLost == 1 })
		s := get(t, sc, "job")
		if s.Status != dispatch.StatusActive || s.LeaseOwner != "thief#1" || s.LastFiredAt != nil {
			t.Fatalf("row changed by a worker that lost it: %+v", s)
		}
		if st := w.Stats(); st.Completed != 0 {
			t.Fatalf("stats %+v: an outcome counted as written", st)
		}
	})
}

// TestRenewalKeepsLongHandler: a handler running for several leases keeps
// its row: a second worker never fires it, and the renewal is batched.
func TestRenewalKeepsLongHandler(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		addKeys(t, sc, "long-a", "long-b")
		f := newFires()
		var cancelled atomic.Int64
		fn := func(ctx context.Context, fr dispatch.Fire) error {
			f.record(fr)
			select {
			case <-time.After(12 * time.Second): // one and a half leases
				return nil
			case <-ctx.Done():
				cancelled.Add(1)
				return ctx.Err()
			}
		}
		// Leases of 8 s, renewed after 4 s, so that a renewal may be
		// late by up to 4 s: with 500 ms leases a machine running the
		// race detector at a load of 9 (two cores) delayed renewals past
		// the lease, and with 2 s and then 4 s leases the full test run
		// in CI (every package at once under the race detector, the
		// server writing with fsync on) did too.
		cfg := dispatch.Config[dispatch.Schedule]{PollInterval: 200 * time.Millisecond, Lease: 8 * time.Second}
		cfg.WorkerID = "first"
		w1 := newScheduleWorker(t, store, fn, dispatch.Policy{}, cfg)
		runWorker(t, w1.Run)
		waitFor(t, 10*time.Second, "both claimed", func() bool { return w1.Stats().InFlight == 2 })
		cfg.WorkerID = "second"
		w2 := newScheduleWorker(t, store, fn, dispatch.Policy{}, cfg)
		runWorker(t, w2.Run)
		// The handlers take 12 s: wait well past that, as a loaded
		// machine delays their outcome writes (the test is about the
		// renewals, checked below, not about speed).
		waitFor(t, 40*time.Second, "both fired", func() bool {
			c, err := store.Count(context.Background(), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired)))
			return err == nil && c == 2
		})
		if f.count("long-a") != 1 || f.count("long-b") != 1 || cancelled.Load() != 0 {
			t.Fatalf("fires a=%d b=%d, cancelled %d; want each once, none cancelled (first worker %+v, second %+v)", f.count("long-a"), f.count("long-b"), cancelled.Load(), w1.Stats(), w2.Stats())
		}
		// The worker counts an outcome once its write has returned, just
		// after the table shows it.
		waitFor(t, 10*time.Second, "the outcomes counted", func() bool { return w1.Stats().Unwritten == 0 })
		st := w1.Stats()
		if st.Renewed < 4 || st.LeaseLost != 0 || st.Completed != 2 {
			t.Fatalf("first worker stats %+v: want at least 2 renewals of each row, no lease lost", st)
		}
	})
}

// TestRenewalLossCancelsHandler: when the renewal finds the row taken over,
// the handler's context ends with ErrLeaseLost.
func TestRenewalLossCancelsHandler(t *testing.T) {
	b := memBackend()
	store, _ := b.open(t)
	ctx := context.Background()
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	addKeys(t, sc, "job")
	started := make(chan struct{})
	cause := make(chan error, 1)
	w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{PollInterval: 20 * time.Millisecond, Lease: 200 * time.Millisecond})
	runWorker(t, w.Run)
	<-started
	if _, err := store.Update(ctx, dao.Eq(dispatch.ColKey, "job"), dao.Set{dispatch.ColLeaseOwner: "thief#1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, dispatch.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled after its lease was lost")
	}
	waitFor(t, 5*time.Second, "outcome attempt", func() bool { return w.Stats().InFlight == 0 })
	if s := get(t, sc, "job"); s.FailureCount != 0 || s.LeaseOwner != "thief#1" {
		t.Fatalf("the lost row was written: %+v", s)
	}
	if st := w.Stats(); st.LeaseLost != 1 {
		t.Fatalf("stats %+v: want the loss counted once", st)
	}
}

// TestDrainFinishesInFlight: a handler that ends within the drain timeout
// writes its outcome.
func TestDrainFinishesInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		addKeys(t, sc, "job")
		started := make(chan struct{})
		w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
			close(started)
			time.Sleep(300 * time.Millisecond)
			return ctx.Err()
		}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{PollInterval: 10 * time.Millisecond, DrainTimeout: 5 * time.Second})
		stop := runWorker(t, w.Run)
		<-started
		stop()
		if s := get(t, sc, "job"); s.Status != dispatch.StatusFired || s.LeaseOwner != "" {
			t.Fatalf("after drain: %+v, want fired", s)
		}
	})
}

// TestDrainReleasesPastTimeout: handlers still running at the drain
// timeout are cancelled with ErrDrained and their leases released, so
// another worker fires them at once.
func TestDrainReleasesPastTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		addKeys(t, sc, "a", "b", "c")
		var causes sync.Map
		w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
			<-ctx.Done()
			causes.Store(fr.Schedule.Key, context.Cause(ctx))
			return ctx.Err()
		}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{WorkerID: "draining", PollInterval: 10 * time.Millisecond, Lease: time.Hour, DrainTimeout: 200 * time.Millisecond})
		stop := runWorker(t, w.Run)
		waitFor(t, 10*time.Second, "three in flight", func() bool { return w.Stats().InFlight == 3 })
		begin := time.Now()
		stop()
		if d := time.Since(begin); d < 200*time.Millisecond {
			t.Fatalf("Run returned after %v, before the drain timeout", d)
		}
		for _, k := range []string{"a", "b", "c"} {
			s := get(t, sc, k)
			if s.Status != dispatch.StatusActive || s.LeaseOwner != "" || s.FailureCount != 0 {
				t.Errorf("%s after drain: %+v; want active, lease released, no failure", k, s)
			}
			if c, _ := causes.Load(k); !errors.Is(c.(error), dispatch.ErrDrained) {
				t.Errorf("%s: cause %v, want ErrDrained", k, c)
			}
		}
		if st := w.Stats(); st.Released != 3 {
			t.Errorf("stats %+v: want 3 released", st)
		}
		// Another worker takes them at once, although the lease was an hour.
		f := newFires()
		w2 := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error { f.record(fr); return nil },
			dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{WorkerID: "next", PollInterval: 10 * time.Millisecond})
		runWorker(t, w2.Run)
		waitFired(t, store, 3, "the released rows fired")
	})
}

// blockingStore blocks Claim while block is set, to observe the worker
// during a claim.
type blockingStore struct {
	dao.Store[dispatch.Schedule]
	block   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Claim(ctx context.Context, req dao.ClaimRequest) ([]dispatch.Schedule, error) {
	if s.block.Load() {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.Claim(ctx, req)
}

// TestReadinessBeforeClaimingStops: the readiness handler answers 503 as
// soon as the context ends, while a claim is still under way; liveness
// stays 200 throughout.
func TestReadinessBeforeClaimingStops(t *testing.T) {
	store, _ := memBackend().open(t)
	bs := &blockingStore{Store: store, entered: make(chan struct{}), release: make(chan struct{})}
	w := newScheduleWorker(t, bs, func(ctx context.Context, fr dispatch.Fire) error { return nil },
		dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{PollInterval: 10 * time.Millisecond})
	status := func(h http.Handler) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if c := status(w.Ready()); c != http.StatusServiceUnavailable {
		t.Fatalf("ready before Run: %d", c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, 5*time.Second, "ready", func() bool { return status(w.Ready()) == http.StatusOK })
	bs.block.Store(true)
	<-bs.entered // a claim is under way
	cancel()
	if c := status(w.Ready()); c != http.StatusServiceUnavailable {
		t.Fatalf("ready during the drain's claim: %d, want 503", c)
	}
	if c := status(w.Live()); c != http.StatusOK {
		t.Fatalf("live while draining: %d", c)
	}
	bs.block.Store(false)
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := status(w.Live()); c != http.StatusOK {
		t.Fatalf("live after Run: %d", c)
	}
}

// TestMaintenanceLeaderGate: maintenance tasks run each period on the
// leader only.
func TestMaintenanceLeaderGate(t *testing.T) {
	store, _ := memBackend().open(t)
	var leader atomic.Bool
	var runs atomic.Int64
	m := &dispatch.Maintenance{Every: 10 * time.Millisecond, Leader: func(context.Context) bool { return leader.Load() },
		Tasks: []dispatch.Task{{Name: "count", Run: func(context.Context) error { runs.Add(1); return nil }}}}
	w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error { return nil },
		dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{PollInterval: 10 * time.Millisecond, Maintenance: m})
	runWorker(t, w.Run)
	time.Sleep(100 * time.Millisecond)
	if runs.Load() != 0 {
		t.Fatalf("tasks ran %d times on a follower", runs.Load())
	}
	leader.Store(true)
	waitFor(t, 5*time.Second, "tasks on the leader", func() bool { return runs.Load() >= 3 })
}

func TestWorkerConfigInvalid(t *testing.T) {
	store, _ := memBackend().open(t)
	fn := func(ctx context.Context, fr dispatch.Fire) error { return nil }
	for name, cfg := range map[string]dispatch.Config[dispatch.Schedule]{
		"negative concurrency":               {Concurrency: -1},
		"lease below two ticks":              {PollInterval: time.Second, Lease: time.Second},
		"row fields set":                     {KeyField: "id"},
		"long worker id":                     {WorkerID: string(make([]byte, dispatch.MaxWorkerIDLen+1))},
		"negative outcome delay":             {OutcomeDelay: -time.Millisecond},
		"outcome delay over a quarter lease": {Lease: time.Minute, OutcomeDelay: 16 * time.Second},
	} {
		if _, err := dispatch.NewScheduleWorker(store, fn, dispatch.Policy{}, cfg); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := dispatch.New(dispatch.Config[dispatch.Schedule]{Store: store}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("missing fields: err %v", err)
	}
}

// A fire that completes as the drain cancels it (its work was done, it
// returns nil) has its outcome written: the schedule is fired once and
// does not fire again on the next worker, although the drain cancelled its
// context.
func TestDrainWritesOutcomeOfCompletedFire(t *testing.T) {
	store, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	addKeys(t, sc, "report")
	f := newFires()
	w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
		<-ctx.Done() // the work ends just as the drain cancels it
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{WorkerID: "first", PollInterval: 10 * time.Millisecond, Lease: time.Hour, DrainTimeout: 50 * time.Millisecond})
	stop := runWorker(t, w.Run)
	waitFor(t, 10*time.Second, "the fire in flight", func() bool { return w.Stats().InFlight == 1 })
	stop()
	if s := get(t, sc, "report"); s.Status != dispatch.StatusFired || s.LeaseOwner != "" {
		t.Fatalf("after the drain: %+v; want fired, lease cleared", s)
	}
	next := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{WorkerID: "second", PollInterval: 10 * time.Millisecond})
	stopNext := runWorker(t, next.Run)
	time.Sleep(200 * time.Millisecond)
	stopNext()
	if c := f.count("report"); c != 1 {
		t.Fatalf("report fired %d times, want once", c)
	}
}
