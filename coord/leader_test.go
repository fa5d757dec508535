package coord_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestNewElectorRefusesBadConfig(t *testing.T) {
	ls := memstore.NewLeases()
	for _, c := range []struct {
		what string
		cfg  coord.ElectorConfig
	}{
		{"no name", coord.ElectorConfig{}},
		{"name with NUL", coord.ElectorConfig{Name: "a\x00"}},
		{"negative TTL", coord.ElectorConfig{Name: "n", Lease: -time.Second}},
		{"TTL below a millisecond", coord.ElectorConfig{Name: "n", Lease: time.Microsecond}},
		{"margin as long as the TTL", coord.ElectorConfig{Name: "n", Lease: time.Second, SafetyMargin: time.Second}},
		{"renewal after the local deadline", coord.ElectorConfig{Name: "n", Lease: time.Second, RenewInterval: 950 * time.Millisecond}},
		{"negative poll", coord.ElectorConfig{Name: "n", PollInterval: -1}},
	} {
		if _, err := coord.NewElector(ls, c.cfg); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", c.what, err)
		}
	}
	if _, err := coord.NewElector(nil, coord.ElectorConfig{Name: "n"}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil store: err = %v, want ErrInvalidArgument", err)
	}
	e, err := coord.NewElector(ls, coord.ElectorConfig{Name: "n", Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := e.Config()
	if got.RenewInterval != time.Second || got.PollInterval != time.Second || got.SafetyMargin != 300*time.Millisecond || got.ID == "" {
		t.Errorf("defaults = %+v; want renew 1s, poll 1s, margin 300ms and an id", got)
	}
}

// TestElectorLifecycle elects one candidate, checks the callbacks, the
// metrics and a second Run, and resigns.
func TestElectorLifecycle(t *testing.T) {
	ls := memstore.NewLeases()
	reader := metric.NewManualReader()
	var mu sync.Mutex
	var events []string
	elected := make(chan coord.Leader, 1)
	e, err := coord.NewElector(ls, coord.ElectorConfig{
		Name: "lifecycle", ID: "only", Lease: 300 * time.Millisecond, Logger: quiet,
		MeterProvider: metric.NewMeterProvider(metric.WithReader(reader)),
		OnElected: func(ctx context.Context, l coord.Leader) {
			mu.Lock()
			events = append(events, "elected")
			mu.Unlock()
			elected <- l
			<-ctx.Done()
			mu.Lock()
			events = append(events, "ctx done")
			mu.Unlock()
		},
		OnDeposed: func(l coord.Leader) {
			mu.Lock()
			events = append(events, "deposed")
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	l := <-elected
	if l.Term() != 1 || l.ID() != "only" || l.Name() != "lifecycle" || !l.Active() {
		t.Fatalf("leader = term %d id %q name %q active %v", l.Term(), l.ID(), l.Name(), l.Active())
	}
	if err := e.Run(ctx); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("second concurrent Run: err = %v, want ErrInvalidArgument", err)
	}
	// Several renewals keep the term.
	time.Sleep(700 * time.Millisecond)
	if cur, ok := e.Leader(); !ok || cur.Term() != 1 {
		t.Errorf("after renewals Leader() = %d, %v; want term 1", cur.Term(), ok)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if l.Active() || l.Context().Err() == nil {
		t.Error("the Leader is still active after Run returned")
	}
	mu.Lock()
	if want := []string{"elected", "ctx done", "deposed"}; len(events) != 3 || events[0] != want[0] || events[1] != want[1] || events[2] != want[2] {
		t.Errorf("events = %v, want %v", events, want)
	}
	mu.Unlock()
	lease, err := ls.GetLease(context.Background(), "lifecycle")
	if err != nil || !lease.Expired() {
		t.Errorf("lease after Run returned = %+v, %v; want released", lease, err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == coord.MetricLeaderTerm {
				if len(g.DataPoints) != 1 || g.DataPoints[0].Value != 1 {
					t.Errorf("%s = %+v, want 1", m.Name, g.DataPoints)
				}
			}
		}
	}
	for _, name := range []string{coord.MetricLeaderAttempts, coord.MetricLeaderTerm, coord.MetricLeaderChanges} {
		if !seen[name] {
			t.Errorf("metric %s not recorded", name)
		}
	}
}

// TestLeaderLapsesWithoutRenewal stops a leader's renewals (the store
// fails) and checks that its Leader's context ends by the local deadline,
// before the lease expires in the store.
func TestLeaderLapsesWithoutRenewal(t *testing.T) {
	ls := &failing{LeaseStore: memstore.NewLeases()}
	elected := make(chan coord.Leader, 1)
	e, err := coord.NewElector(ls, coord.ElectorConfig{
		Name: "lapse", ID: "a", Lease: 500 * time.Millisecond, SafetyMargin: 100 * time.Millisecond, Logger: quiet,
		OnElected: func(ctx context.Context, l coord.Leader) { elected <- l; <-ctx.Done() },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = e.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }() // the elector ends with the test
	l := <-elected
	lease, _ := ls.GetLease(ctx, "lapse")
	ls.fail()
	<-l.Context().Done()
	now := time.Now().UTC()
	if !now.Before(lease.ExpiresAt) {
		t.Errorf("leadership ended at %v, not before the lease's expiry %v", now, lease.ExpiresAt)
	}
	if _, ok := e.Leader(); ok {
		// The elector's goroutine may lag the context by a moment.
		time.Sleep(50 * time.Millisecond)
		if _, ok := e.Leader(); ok {
			t.Error("Leader() still reports leadership after the local deadline")
		}
	}
}

// failing fails every call once fail is called.
type failing struct {
	coord.LeaseStore
	mu   sync.Mutex
	down bool
}

func (f *failing) fail() { f.mu.Lock(); f.down = true; f.mu.Unlock() }

func (f *failing) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (coord.Lease, bool, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return coord.Lease{}, false, dao.ErrUnavailable
	}
	return f.LeaseStore.AcquireLease(ctx, name, holder, ttl)
}

func TestFencedUpdateRefusesTheFenceColumnInSet(t *testing.T) {
	type row struct {
		ID    int64 `gorm:"primaryKey"`
		Fence *int64
	}
	s, err := memstore.New[row]()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.FencedUpdate(context.Background(), s, coord.Leader{}, "fence", dao.Criteria{}, dao.Set{"fence": int64(1)}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("err = %v, want ErrInvalidArgument", err)
	}
	if _, err := coord.FencedUpdate(context.Background(), s, coord.Leader{}, "fence", dao.Criteria{}, dao.Set{"id": int64(1)}); !errors.Is(err, coord.ErrNotLeader) {
		t.Errorf("zero Leader: err = %v, want ErrNotLeader", err)
	}
}

// TestLeaderRenewalRetriesRetryableErrors makes the store fail three
// renewals in a row with dao.ErrUnavailable (a server out of connections,
// a lost connection): the leader tries again with backoff within its
// lease, keeps its term and is never deposed. Without the retries the
// failed renewals, one RenewInterval apart, would reach the local
// deadline and end the leadership.
func TestLeaderRenewalRetriesRetryableErrors(t *testing.T) {
	ls := &flaky{LeaseStore: memstore.NewLeases()}
	elected := make(chan coord.Leader, 1)
	deposed := make(chan struct{}, 1)
	e, err := coord.NewElector(ls, coord.ElectorConfig{
		Name: "flaky", ID: "a", Lease: 900 * time.Millisecond, SafetyMargin: 100 * time.Millisecond, Logger: quiet,
		OnElected: func(ctx context.Context, l coord.Leader) { elected <- l; <-ctx.Done() },
		OnDeposed: func(coord.Leader) { deposed <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = e.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	l := <-elected
	ls.failNext(3)
	select {
	case <-deposed:
		t.Fatal("the leader was deposed after three failed renewals within its lease")
	case <-l.Context().Done():
		t.Fatal("the leadership ended after three failed renewals within its lease")
	case <-time.After(2 * time.Second):
	}
	if n := ls.failures(); n != 0 {
		t.Fatalf("%d of the store's failures were never met: no renewal ran", n)
	}
	if cur, ok := e.Leader(); !ok || cur.Term() != l.Term() {
		t.Errorf("after the failed renewals Leader() = term %d, %v; want term %d", cur.Term(), ok, l.Term())
	}
}

// flaky fails the next n calls of AcquireLease with dao.ErrUnavailable
// once failNext(n) is called.
type flaky struct {
	coord.LeaseStore
	mu   sync.Mutex
	left int
}

func (f *flaky) failNext(n int) { f.mu.Lock(); f.left = n; f.mu.Unlock() }

func (f *flaky) failures() int { f.mu.Lock(); defer f.mu.Unlock(); return f.left }

func (f *flaky) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (coord.Lease, bool, error) {
	f.mu.Lock()
	fail := f.left > 0
	if fail {
		f.left--
	}
	f.mu.Unlock()
	if fail {
		return coord.Lease{}, false, fmt.Errorf("acquire lease: too many connections: %w", dao.ErrUnavailable)
	}
	return f.LeaseStore.AcquireLease(ctx, name, holder, ttl)
}

// TestElectorDeprecatedTTL: an ElectorConfig that sets only the
// deprecated TTL runs with it as its Lease (the margin and renewal
// defaults derive from it), and Lease wins when both are set.
func TestElectorDeprecatedTTL(t *testing.T) {
	ls := memstore.NewLeases()
	e, err := coord.NewElector(ls, coord.ElectorConfig{Name: "old", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c := e.Config(); c.Lease != 3*time.Second || c.RenewInterval != time.Second {
		t.Errorf("TTL 3s alone: Lease %v, RenewInterval %v; want 3s, 1s", c.Lease, c.RenewInterval)
	}
	if _, err := coord.NewElector(ls, coord.ElectorConfig{Name: "old", TTL: time.Microsecond}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("TTL 1µs alone: %v, want ErrInvalidArgument as for Lease", err)
	}
	e, err = coord.NewElector(ls, coord.ElectorConfig{Name: "both", TTL: 3 * time.Second, Lease: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c := e.Config(); c.Lease != 6*time.Second {
		t.Errorf("both set: Lease %v, want 6s", c.Lease)
	}
	if old := coord.DefaultLeaderTTL; old != coord.DefaultLeaderLease {
		t.Errorf("DefaultLeaderTTL %v, want DefaultLeaderLease %v", old, coord.DefaultLeaderLease)
	}
}
