package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// backend opens a fresh, empty schedule store; db is nil for the memory
// store.
type backend struct {
	name string
	open func(t *testing.T) (*dao.Table[dispatch.Schedule], *gorm.DB)
}

func sqlBackend(name string, open func(testing.TB) *gorm.DB) backend {
	return backend{name: name, open: func(t *testing.T) (*dao.Table[dispatch.Schedule], *gorm.DB) {
		t.Helper()
		db := open(t)
		table := testdb.Table(t, db, "sched")
		if err := dispatch.MigrateSchedules(context.Background(), db, table); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		s, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table))
		if err != nil {
			t.Fatalf("sqlstore: %v", err)
		}
		return s, db
	}}
}

func memBackend() backend {
	return backend{name: "memory", open: func(t *testing.T) (*dao.Table[dispatch.Schedule], *gorm.DB) {
		s, err := memstore.New[dispatch.Schedule]()
		if err != nil {
			t.Fatal(err)
		}
		return s, nil
	}}
}

func backends() []backend {
	return []backend{
		memBackend(),
		sqlBackend("sqlite", testdb.SQLite),
		sqlBackend("postgres", testdb.Postgres),
		sqlBackend("mariadb", testdb.MySQL),
	}
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// clock is a settable fake clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newSchedules(t *testing.T, s dao.Store[dispatch.Schedule], cfg dispatch.SchedulesConfig) *dispatch.Schedules {
	t.Helper()
	sc, err := dispatch.NewSchedules(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func get(t *testing.T, sc *dispatch.Schedules, key string) dispatch.Schedule {
	t.Helper()
	s, err := sc.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return s
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runWorker runs w until the returned stop is called; stop waits for Run
// and fails t on its error.
func runWorker(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// addKeys adds an immediate schedule for each key.
func addKeys(t *testing.T, sc *dispatch.Schedules, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, _, err := sc.Add(context.Background(), dispatch.Spec{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFired waits up to 10 s until n schedules in store are fired.
func waitFired(t *testing.T, store dao.Store[dispatch.Schedule], n int64, what string) {
	t.Helper()
	waitFor(t, 10*time.Second, what, func() bool {
		c, err := store.Count(context.Background(), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired)))
		return err == nil && c == n
	})
}
