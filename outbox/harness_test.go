package outbox_test

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
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// backend opens a fresh, empty message store; db is nil for stores without
// transactions.
type backend struct {
	name string
	open func(t *testing.T) (dao.Store[outbox.Message], *gorm.DB)
}

func sqlBackend(name string, open func(testing.TB) *gorm.DB) backend {
	return backend{name: name, open: func(t *testing.T) (dao.Store[outbox.Message], *gorm.DB) {
		t.Helper()
		db := open(t)
		table := testdb.Table(t, db, "outbox")
		ctx := context.Background()
		if err := outbox.Migrate(ctx, db, table); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		s, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
		if err != nil {
			t.Fatalf("sqlstore: %v", err)
		}
		return s, db
	}}
}

func backends() []backend {
	return []backend{
		{name: "memory", open: func(t *testing.T) (dao.Store[outbox.Message], *gorm.DB) {
			s, err := memstore.New[outbox.Message]()
			if err != nil {
				t.Fatal(err)
			}
			return s, nil
		}},
		sqlBackend("sqlite", testdb.SQLite),
		sqlBackend("postgres", testdb.Postgres),
		sqlBackend("mariadb", testdb.MySQL),
	}
}

// forEachBackend runs f as a subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// clock is a settable clock for repositories.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

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

// countingStore counts the writes that reach a real store.
type countingStore struct {
	dao.Store[outbox.Message]
	updates, finds atomic.Int64
}

func (c *countingStore) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	c.updates.Add(1)
	return c.Store.Update(ctx, where, set)
}

func (c *countingStore) Find(ctx context.Context, q dao.Query) ([]outbox.Message, error) {
	c.finds.Add(1)
	return c.Store.Find(ctx, q)
}

func newRepo(t *testing.T, s dao.Store[outbox.Message], opts ...outbox.Option) *outbox.Repository {
	t.Helper()
	r, err := outbox.New(s, opts...)
	if err != nil {
		t.Fatalf("new repository: %v", err)
	}
	return r
}

// msgs returns n new messages with ids prefix-0 … prefix-(n-1) on topic.
func msgs(prefix, topic string, n int) []*outbox.Message {
	out := make([]*outbox.Message, n)
	for i := range out {
		out[i] = &outbox.Message{
			MessageID: fmt.Sprintf("%s-%d", prefix, i),
			Topic:     topic,
			Type:      "test.event",
			Payload:   fmt.Appendf(nil, `{"n":%d}`, i),
		}
	}
	return out
}

func ids(ms []outbox.Message) []int64 {
	out := make([]int64, len(ms))
	for i := range ms {
		out[i] = ms[i].ID
	}
	return out
}

func get(t *testing.T, s dao.Store[outbox.Message], id int64) outbox.Message {
	t.Helper()
	m, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return m
}

// sameTime compares times to the millisecond, the coarsest precision of
// the backends (MySQL DATETIME(3) rounds).
func sameTime(a, b time.Time) bool {
	d := a.Sub(b)
	return d > -time.Millisecond && d < time.Millisecond
}
