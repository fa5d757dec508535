package shard_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/outbox/shard"
)

// entry is the business row written with each message, in the same
// transaction on the key's shard.
type entry struct {
	ID  int64
	Key string `gorm:"size:191;not null"`
	Seq int    `gorm:"not null"`
}

func (entry) TableName() string { return "shard_entries" }

// newShards creates n PostgreSQL databases, each with the message table
// and the business table, and returns a router over them. Each pool holds
// at most conns connections; the databases are dropped when t ends.
func newShards(t *testing.T, n, conns int) *shard.Router {
	t.Helper()
	ctx := context.Background()
	shards := make([]shard.Shard, n)
	for i := range shards {
		db := testdb.PostgresDatabase(t, "claimstore_shard", conns)
		if err := outbox.Migrate(ctx, db, ""); err != nil {
			t.Fatal(err)
		}
		if err := db.WithContext(ctx).AutoMigrate(&entry{}); err != nil {
			t.Fatal(err)
		}
		store, err := sqlstore.New[outbox.Message](db)
		if err != nil {
			t.Fatal(err)
		}
		repo, err := outbox.New(store)
		if err != nil {
			t.Fatal(err)
		}
		shards[i] = shard.Shard{DB: db, Outbox: repo}
	}
	r, err := shard.NewRouter(shards...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// totals returns the message and business row counts of every shard.
func totals(t *testing.T, r *shard.Router) (msgs, rows []int64) {
	t.Helper()
	ctx := context.Background()
	for _, s := range r.Shards() {
		c, err := s.Outbox.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var sum, n int64
		for _, v := range c {
			sum += v
		}
		if err := s.DB.WithContext(ctx).Model(&entry{}).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		msgs, rows = append(msgs, sum), append(rows, n)
	}
	return msgs, rows
}

// keyOn returns a key of the form prefix-<n> that maps to shard i of r.
func keyOn(t *testing.T, r *shard.Router, prefix string, i int) string {
	t.Helper()
	for n := range 1000 {
		k := fmt.Sprintf("%s-%d", prefix, n)
		if j, _ := r.Index(k); j == i {
			return k
		}
	}
	t.Fatalf("no key %s-* on shard %d", prefix, i)
	return ""
}

func msg(key string, seq int) *outbox.Message {
	return &outbox.Message{
		MessageID: fmt.Sprintf("%s#%d", key, seq), Topic: "shard.events", Type: "entry.added",
		PartitionKey: key, Payload: []byte(strconv.Itoa(seq)),
	}
}

// Bad input is refused with ErrInvalidArgument and writes nothing on any
// shard.
// startBroker starts an embedded NATS server with JetStream for the test,
// creates the stream name on the subjects shard.>, and returns a publisher
// on it and its JetStream context.
func startBroker(ctx context.Context, t *testing.T, name string) (*natspub.Publisher, jetstream.JetStream) {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := natspub.New(nc, natspub.Config{})
	if err != nil {
		t.Fatal(err)
	}
	js := pub.JetStream()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"shard.>"}, Storage: jetstream.FileStorage,
		Duplicates: outboxenv.DuplicateWindow(outbox.RelayConfig{}),
	}); err != nil {
		t.Fatal(err)
	}
	return pub, js
}

func TestRouterRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	r := newShards(t, 2, 2)
	s0, s1 := r.At(0), r.At(1)
	for name, shards := range map[string][]shard.Shard{
		"no shard":        nil,
		"nil outbox":      {s0, {DB: s1.DB}},
		"shared repo":     {s0, {Outbox: s0.Outbox}},
		"shared database": {s0, {DB: s0.DB, Outbox: s1.Outbox}},
	} {
		if _, err := shard.NewRouter(shards...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("NewRouter(%s) = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := shard.NewRelays(nil, outbox.PublisherFunc(nil), outbox.RelayConfig{}, 1); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewRelays(nil router) = %v", err)
	}
	if _, err := shard.NewRelays(r, outbox.PublisherFunc(func(context.Context, []outbox.Message) []error { return nil }), outbox.RelayConfig{}, -1); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewRelays(-1 per shard) = %v", err)
	}

	// A group starts once and stops once.
	g, err := shard.NewRelays(r, outbox.PublisherFunc(func(_ context.Context, ms []outbox.Message) []error { return make([]error, len(ms)) }),
		outbox.RelayConfig{PollInterval: 10 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("second Start = %v, want ErrInvalidArgument", err)
	}
	if err := g.Stop(); err != nil {
		t.Errorf("Stop = %v", err)
	}
	if err := g.Stop(); err != nil {
		t.Errorf("Stop of a stopped group = %v", err)
	}

	k0, k1 := keyOn(t, r, "k", 0), keyOn(t, r, "k", 1)
	for name, msgs := range map[string][]*outbox.Message{
		"empty key":      {msg("", 1)},
		"nil message":    {msg(k0, 1), nil},
		"two shards":     {msg(k0, 1), msg(k1, 1)},
		"invalid in one": {msg(k0, 1), {MessageID: "x", PartitionKey: k0}}, // no topic
	} {
		if err := r.Add(ctx, nil, msgs...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Add(%s) = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, _, err := r.Shard(""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Shard(\"\") = %v", err)
	}
	if err := r.Transaction(ctx, "", func(*gorm.DB, shard.AddFunc) error { return nil }); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Transaction(empty key) = %v", err)
	}
	// A message of another shard's key inside a transaction is refused,
	// and the transaction's business row is rolled back with it.
	err = r.Transaction(ctx, k0, func(tx *gorm.DB, add shard.AddFunc) error {
		if err := tx.Create(&entry{Key: k0, Seq: 1}).Error; err != nil {
			return err
		}
		return add(msg(k1, 1))
	})
	if !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Transaction adding another shard's key = %v", err)
	}
	noDB, err := shard.NewRouter(shard.Shard{Outbox: s0.Outbox}, shard.Shard{Outbox: s1.Outbox})
	if err != nil {
		t.Fatal(err)
	}
	if err := noDB.Transaction(ctx, k0, func(*gorm.DB, shard.AddFunc) error { return nil }); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Transaction without DB = %v", err)
	}
	msgs, rows := totals(t, r)
	if msgs[0]+msgs[1]+rows[0]+rows[1] != 0 {
		t.Errorf("bad input wrote messages %v, rows %v", msgs, rows)
	}

	// Good input lands on the key's shard, the message with its row.
	if err := r.Transaction(ctx, k1, func(tx *gorm.DB, add shard.AddFunc) error {
		if err := tx.Create(&entry{Key: k1, Seq: 1}).Error; err != nil {
			return err
		}
		return add(&outbox.Message{MessageID: "m1", Topic: "shard.events"}) // key filled in
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ctx, nil, msg(k0, 2)); err != nil {
		t.Fatal(err)
	}
	msgs, rows = totals(t, r)
	if fmt.Sprint(msgs, rows) != "[1 1] [0 1]" {
		t.Errorf("after one transaction on shard 1 and one Add on shard 0: messages %v, rows %v", msgs, rows)
	}
}

// Writers route entries and their messages to two databases; one relay
// per shard publishes to one JetStream stream. Every message is in the
// stream exactly once, each key's messages in the order they were written,
// and each shard holds exactly its keys' messages and rows.
func TestShardedOutboxEndToEnd(t *testing.T) {
	const (
		keys    = 120
		perKey  = 10
		writers = 6
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newShards(t, 2, 4)

	pub, js := startBroker(ctx, t, "SHARDS")

	relays, err := shard.NewRelays(r, pub, outbox.RelayConfig{
		WorkerID: "e2e", BatchSize: 25, PollInterval: 10 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond,
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := relays.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = relays.Stop()
		}
	})

	// Each writer owns the keys w, w+writers, …; it writes a key's
	// messages one after another, then the next key's, while the relays
	// publish: a key's messages sit next to each other in the claim
	// order, where batches published side by side would swap them (with
	// Concurrency 4 and batches of 5 this test fails).
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for k := w; k < keys; k += writers {
				for seq := range perKey {
					key := fmt.Sprintf("account-%d", k)
					err := r.Transaction(ctx, key, func(tx *gorm.DB, add shard.AddFunc) error {
						if err := tx.Create(&entry{Key: key, Seq: seq}).Error; err != nil {
							return err
						}
						return add(msg(key, seq))
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	defer dcancel()
	if err := r.WaitDrained(dctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := relays.Stop(); err != nil {
		t.Fatal(err)
	}

	// Each shard holds its keys' rows and messages, and its relay
	// published them.
	want := make([]int64, r.Len())
	for k := range keys {
		i, _ := r.Index(fmt.Sprintf("account-%d", k))
		want[i] += perKey
	}
	msgs, rows := totals(t, r)
	stats := relays.Stats()
	for i := range want {
		if want[i] == 0 || msgs[i] != want[i] || rows[i] != want[i] || stats[i].Published != want[i] {
			t.Errorf("shard %d: %d messages, %d rows, %d published; want %d of each", i, msgs[i], rows[i], stats[i].Published, want[i])
		}
		published, err := r.At(i).Outbox.Published(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range published {
			if j, _ := r.Index(m.PartitionKey); j != i {
				t.Fatalf("message %s of key %q (shard %d) is on shard %d", m.MessageID, m.PartitionKey, j, i)
			}
		}
	}
	t.Logf("messages per shard %v, relay stats %+v", msgs, stats)

	audit, err := natspub.Audit(ctx, js, "SHARDS")
	if err != nil {
		t.Fatal(err)
	}
	if audit.Read != keys*perKey || audit.Distinct() != keys*perKey || audit.Duplicates() != 0 || audit.NoID != 0 {
		t.Fatalf("stream: read %d, distinct %d, duplicates %d, without id %d; want %d exactly once",
			audit.Read, audit.Distinct(), audit.Duplicates(), audit.NoID, keys*perKey)
	}
	checkOrder(ctx, t, js, "SHARDS", keys*perKey)
}

// checkOrder reads the stream from the start and checks that each key's
// sequence numbers (the payloads) come 0, 1, 2, … in stream order.
func checkOrder(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, total int) {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	read := 0
	for read < total {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			read++
			key := m.Headers().Get(natspub.HeaderPartitionKey)
			seq, err := strconv.Atoi(string(m.Data()))
			if err != nil {
				t.Fatalf("payload %q: %v", m.Data(), err)
			}
			if seq != next[key] {
				t.Fatalf("key %q: message %d in the stream where %d was due", key, seq, next[key])
			}
			next[key]++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("stream ended after %d of %d messages", read, total)
		}
	}
}
