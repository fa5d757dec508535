package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// lateFirstClaim answers its first Claim only after delay: the claim is
// committed at once (its rows are leased), but the worker learns it late,
// as when the claim waited behind another transaction's lock or its answer
// was held up.
type lateFirstClaim struct {
	dao.Store[dispatch.Schedule]
	delay time.Duration
	calls atomic.Int64
}

func (s *lateFirstClaim) Claim(ctx context.Context, req dao.ClaimRequest) ([]dispatch.Schedule, error) {
	rows, err := s.Store.Claim(ctx, req)
	if s.calls.Add(1) == 1 {
		time.Sleep(s.delay)
	}
	return rows, err
}

// leaseChecks records, for every fire, whether its handler started
// before the lease it was claimed with ended.
type leaseChecks struct {
	fires *fires
	mu    sync.Mutex
	late  []string
}

func (c *leaseChecks) fire(_ context.Context, fr dispatch.Fire) error {
	now := time.Now()
	c.fires.record(fr)
	if until := fr.Schedule.LeaseUntil; until == nil || !now.Before(*until) {
		c.mu.Lock()
		c.late = append(c.late, fmt.Sprintf("%s (owner %s, lease until %v, started %v)", fr.Schedule.Key, fr.Schedule.LeaseOwner, until, now))
		c.mu.Unlock()
	}
	return nil
}

// checkFiredOnceInLease fails t unless each of the n once schedules fired
// exactly once and every handler started within its lease.
func (c *leaseChecks) checkFiredOnceInLease(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		if got := c.fires.count(fmt.Sprintf("once-%03d", i)); got != 1 {
			t.Errorf("once-%03d fired %d times", i, got)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.late {
		t.Errorf("handler started after its lease ended: %s", l)
	}
}

// addOnce adds n once schedules, once-000 …, due a minute ago.
func addOnce(t *testing.T, s dao.Store[dispatch.Schedule], n int) {
	t.Helper()
	sc := newSchedules(t, s, dispatch.SchedulesConfig{})
	past := time.Now().Add(-time.Minute)
	for i := range n {
		if _, _, err := sc.Add(context.Background(), dispatch.Spec{Key: fmt.Sprintf("once-%03d", i), At: past}); err != nil {
			t.Fatal(err)
		}
	}
}

// A worker whose claim is answered only after the lease it took has ended
// must not start the handlers of those rows: another worker may hold them
// by then. Worker a learns of its first claim two leases late; worker b
// claims the rows once a's lease ends. Every schedule fires once, and
// every handler starts within its lease.
func TestClaimAnsweredAfterItsLease(t *testing.T) {
	mem, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	const n, lease = 20, time.Second
	addOnce(t, mem, n)
	c := &leaseChecks{fires: newFires()}
	cfg := func(id string) dispatch.Config[dispatch.Schedule] {
		return dispatch.Config[dispatch.Schedule]{WorkerID: id, Concurrency: 8, BatchSize: 8, PollInterval: 50 * time.Millisecond, Lease: lease}
	}
	slow := &lateFirstClaim{Store: mem, delay: 2 * lease}
	a := newScheduleWorker(t, slow, c.fire, dispatch.Policy{}, cfg("a"))
	stopA := runWorker(t, a.Run)
	waitFor(t, 5*time.Second, "worker a's first claim", func() bool { return slow.calls.Load() > 0 })
	b := newScheduleWorker(t, mem, c.fire, dispatch.Policy{}, cfg("b"))
	stopB := runWorker(t, b.Run)
	waitFor(t, 30*time.Second, "every once schedule fired", func() bool {
		got, err := mem.Count(context.Background(), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired)))
		return err == nil && got == n
	})
	time.Sleep(3 * lease) // a's late answer, had it been handled
	stopA()
	stopB()
	t.Logf("worker a %+v; worker b %+v", a.Stats(), b.Stats())
	c.checkFiredOnceInLease(t, n)
}

// A claim that waits behind another transaction's row lock ends when its
// deadline, a quarter of the lease, passes, and the rows it claimed are
// handled within their lease: two workers over 30 schedules, one of which
// another connection keeps locked for three leases (the MariaDB default
// and PostgreSQL's portable claim wait for the lock; PostgreSQL's fast
// path skips the row). Every schedule fires once, every handler within
// its lease.
func TestClaimBehindALockKeepsToItsLease(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(testing.TB) *gorm.DB
		opts []sqlstore.Option
	}{
		{"mariadb", testdb.MySQL, nil},
		{"postgres_portable", testdb.Postgres, []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}},
	} {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			ctx := context.Background()
			table := testdb.Table(t, db, "lockedclaim")
			if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			s, err := sqlstore.New[dispatch.Schedule](db, append(b.opts, sqlstore.WithTable(table))...)
			if err != nil {
				t.Fatal(err)
			}
			const n, lease = 30, 2 * time.Second
			addOnce(t, s, n)
			locked, err := s.Find(ctx, dao.Query{Where: dao.Eq(dispatch.ColKey, "once-003")})
			if err != nil || len(locked) != 1 {
				t.Fatalf("find once-003: %v (%d rows)", err, len(locked))
			}
			var once sync.Once
			hold := testdb.HoldLock(t, db, table, locked[0].ID)
			release := func() { once.Do(hold) }
			t.Cleanup(release)
			c := &leaseChecks{fires: newFires()}
			var stops []func()
			var workers []*dispatch.ScheduleWorker
			for _, id := range []string{"a", "b"} {
				w := newScheduleWorker(t, s, c.fire, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
					WorkerID: id, Concurrency: 8, BatchSize: 8, PollInterval: 100 * time.Millisecond, Lease: lease,
				})
				workers = append(workers, w)
				stops = append(stops, runWorker(t, w.Run))
			}
			time.Sleep(3 * lease)
			release()
			waitFor(t, 60*time.Second, "every once schedule fired", func() bool {
				got, err := s.Count(ctx, dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired)))
				return err == nil && got == n
			})
			for _, stop := range stops {
				stop()
			}
			t.Logf("worker a %+v; worker b %+v", workers[0].Stats(), workers[1].Stats())
			c.checkFiredOnceInLease(t, n)
		})
	}
}

// A claim released before its handlers started (it answered after the
// lease less two ticks) writes Config.ReleaseSet with the release: here
// it takes back the count ClaimSet added, so the rows end as claimed once,
// by the worker that handled them.
func TestReleaseSetUndoesALateClaim(t *testing.T) {
	mem, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	const n, lease = 5, time.Second
	addOnce(t, mem, n)
	slow := &lateFirstClaim{Store: mem, delay: lease + lease/2}
	var handled atomic.Int64
	w, err := dispatch.New(dispatch.Config[dispatch.Schedule]{
		Store: slow, KeyField: dispatch.ColID, Key: func(s *dispatch.Schedule) any { return s.ID },
		Due:      func(time.Time) dao.Criteria { return dao.Eq(dispatch.ColStatus, string(dispatch.StatusActive)) },
		ClaimSet: func(time.Time) dao.Set { return dao.Set{dispatch.ColFailureCount: dao.Incr(1)} },
		ReleaseSet: func(time.Time) dao.Set {
			return dao.Set{dispatch.ColFailureCount: dao.Incr(-1)}
		},
		Handler: func(_ context.Context, j *dispatch.Job[dispatch.Schedule]) dao.Set {
			handled.Add(1)
			return dao.Set{dispatch.ColStatus: string(dispatch.StatusFired)}
		},
		WorkerID: "late", PollInterval: 50 * time.Millisecond, Lease: lease,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w.Run)
	waitFired(t, mem, n, "every row handled after the late claim's release")
	stop()
	rows, err := mem.Find(context.Background(), dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.FailureCount != 1 {
			t.Errorf("%s: count %d, want 1: the released claim's count taken back, the handled one's kept", r.Key, r.FailureCount)
		}
	}
	if st := w.Stats(); st.Released != n || handled.Load() != n {
		t.Errorf("stats %+v, %d handled: want %d released by the late claim and %d handled", st, handled.Load(), n, n)
	}
}
