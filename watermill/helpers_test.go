package watermill_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// backends are the databases every test runs on: PostgreSQL and
// MySQL/MariaDB (skipped with a message when their server is down, unless
// CLAIMSTORE_REQUIRE names them) and SQLite (always).
var backends = []struct {
	name string
	open func(t testing.TB) *gorm.DB
}{
	{"postgres", testdb.Postgres},
	{"mysql", testdb.MySQL},
	{"sqlite", testdb.SQLite},
}

// eachBackend runs f as a subtest on each backend, with a handle whose
// pool holds at most conns connections.
func eachBackend(t *testing.T, conns int, f func(t *testing.T, db *gorm.DB)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			sqlDB.SetMaxOpenConns(conns)
			sqlDB.SetMaxIdleConns(conns)
			f(t, db)
		})
	}
}

// newTables creates a fresh message table with its delivery and groups
// tables, and drops the three when t ends (even when it fails).
func newTables(t testing.TB, db *gorm.DB) cswm.Tables {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	tables, err := cswm.TablesOf("wm_" + hex.EncodeToString(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{tables.Messages, tables.Deliveries, tables.Groups} {
			if err := db.Migrator().DropTable(name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cswm.Migrate(ctx, db, tables.Messages); err != nil {
		t.Fatal(err)
	}
	return tables
}

// repository returns a repository over table.
func repository(t testing.TB, db *gorm.DB, table string, opts ...outbox.Option) *outbox.Repository {
	t.Helper()
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := outbox.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// fastRetries is the retry policy of the tests: a nacked message comes
// back within 50 ms, and is abandoned after 1000 nacks.
var fastRetries = outbox.RetryPolicy{BaseDelay: 5 * time.Millisecond, Multiplier: 2, MaxDelay: 50 * time.Millisecond, MaxRetries: 1000}

// newPublisher returns a publisher on table.
func newPublisher(t testing.TB, db *gorm.DB, table string) *cswm.Publisher {
	t.Helper()
	pub, err := cswm.NewPublisher(repository(t, db, table), cswm.PublisherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// newSubscriber returns a subscriber of group on table that polls every
// 10 to 100 ms; cfg's other fields are kept.
func newSubscriber(t testing.TB, db *gorm.DB, table, group string, cfg cswm.SubscriberConfig) *cswm.Subscriber {
	t.Helper()
	cfg.Table = table
	cfg.ConsumerGroup = group
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
		cfg.MaxPollInterval = 100 * time.Millisecond
	}
	if cfg.RetryPolicy == nil {
		p := fastRetries
		cfg.RetryPolicy = &p
	}
	sub, err := cswm.NewSubscriber(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// ackAll subscribes each of subs to topic under ctx and acks every message
// it receives, calling seen first with the subscriber's index and the
// message's UUID (one call at a time). The returned wait blocks until
// every subscription's channel is closed (ctx ended).
func ackAll(t *testing.T, ctx context.Context, subs []*cswm.Subscriber, topic string, seen func(i int, uuid string)) (wait func()) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range subs {
		ch, err := s.Subscribe(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for m := range ch {
				mu.Lock()
				seen(i, m.UUID)
				mu.Unlock()
				m.Ack()
			}
		})
	}
	return wg.Wait
}
