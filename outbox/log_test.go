package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

var logBackends = []testdb.Backend{{Name: "sqlite", Open: testdb.SQLite}, {Name: "postgres", Open: testdb.Postgres}}

// recorder is a Publisher that keeps what it was given, refusing the
// message ids in refuse (count of refusals left, -1 for ever).
type recorder struct {
	mu     sync.Mutex
	got    []outbox.Message
	refuse map[string]int
}

func (r *recorder) Publish(_ context.Context, msgs []outbox.Message) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if n := r.refuse[m.MessageID]; n != 0 {
			r.refuse[m.MessageID] = n - 1
			errs[i] = errors.New("refused")
			// A broker that refuses one message refuses the rest of the
			// batch too (they are not stored before it).
			for j := i + 1; j < len(msgs); j++ {
				errs[j] = errors.New("not sent")
			}
			return errs
		}
		r.got = append(r.got, m)
	}
	return errs
}

func (r *recorder) messages() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Message(nil), r.got...)
}

// writeKeys writes per keys messages k-<key>-<i>, i from 0, in
// transactions of perTx messages over all keys.
func writeKeys(t *testing.T, db *gorm.DB, lg *outbox.Log, keys, per, perTx int) {
	t.Helper()
	var all []*outbox.Message
	for i := range per {
		for k := range keys {
			all = append(all, &outbox.Message{MessageID: fmt.Sprintf("k%d-%d", k, i), Topic: "events.log",
				PartitionKey: fmt.Sprintf("key-%d", k), Payload: []byte("p"), Type: "t", Headers: outbox.Headers{"a": "b"}})
		}
	}
	for start := 0; start < len(all); start += perTx {
		chunk := all[start:min(start+perTx, len(all))]
		if err := db.Transaction(func(tx *gorm.DB) error { return lg.Write(context.Background(), tx, chunk...) }); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOrder checks that every key's messages were first published in
// order and that all keys*per messages were published.
func checkOrder(t *testing.T, got []outbox.Message, keys, per int) (dups int) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.MessageID] {
			dups++
			continue
		}
		seen[m.MessageID] = true
		var k, i int
		if _, err := fmt.Sscanf(m.MessageID, "k%d-%d", &k, &i); err != nil {
			t.Fatalf("unexpected message %q", m.MessageID)
		}
		key := fmt.Sprint(k)
		if i != next[key] {
			t.Fatalf("key %s: got message %d, want %d (out of order)", key, i, next[key])
		}
		next[key]++
		if m.Type != "t" || m.Headers["a"] != "b" || m.PartitionKey != fmt.Sprintf("key-%d", k) {
			t.Fatalf("message %+v lost its fields", m)
		}
	}
	if len(seen) != keys*per {
		t.Fatalf("published %d distinct messages, want %d", len(seen), keys*per)
	}
	return dups
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestLogRelayOrder runs two relays of one reader name over a log of 4
// partitions while writers add messages of 8 keys: every message is
// published, each key's in order, and a relay that stops hands its
// partitions over to the other.
func TestLogRelayOrder(t *testing.T) {
	for _, b := range logBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			lg, err := outbox.NewLog(sqlstoretest.Log(t, db), 4)
			if err != nil {
				t.Fatal(err)
			}
			leases := sqlstoretest.Leases(t, db)
			rec := &recorder{}
			cfg := outbox.LogRelayConfig{LogReaderConfig: outbox.LogReaderConfig{Reader: "relay", Leases: leases,
				Lease: 600 * time.Millisecond, Batch: 7, PollInterval: 10 * time.Millisecond, Logger: quiet()}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			run := func(ctx context.Context, holder string) {
				c := cfg
				c.Holder = holder
				r, err := outbox.NewLogRelay(lg, rec, c)
				if err != nil {
					t.Error(err)
					return
				}
				wg.Add(1)
				go func() { defer wg.Done(); _ = r.Run(ctx) }()
			}
			ctx1, stop1 := context.WithCancel(ctx)
			run(ctx1, "h1")
			run(ctx, "h2")
			const keys, per = 8, 40
			writeKeys(t, db, lg, keys, per/2, 9)
			stop1() // h1 releases its partitions; h2 takes them over
			writeKeys2 := func() {
				var all []*outbox.Message
				for i := per / 2; i < per; i++ {
					for k := range keys {
						all = append(all, &outbox.Message{MessageID: fmt.Sprintf("k%d-%d", k, i), Topic: "events.log",
							PartitionKey: fmt.Sprintf("key-%d", k), Payload: []byte("p"), Type: "t", Headers: outbox.Headers{"a": "b"}})
					}
				}
				if err := lg.Write(context.Background(), nil, all...); err != nil {
					t.Fatal(err)
				}
			}
			writeKeys2()
			waitFor(t, 30*time.Second, "every message", func() bool {
				seen := map[string]bool{}
				for _, m := range rec.messages() {
					seen[m.MessageID] = true
				}
				return len(seen) == keys*per
			})
			// The last batch's cursor moves with the next read: every
			// cursor catches up, and Lags says so.
			var lags []outbox.CursorLag
			waitFor(t, 30*time.Second, "the cursors caught up", func() bool {
				lags, err = lg.Lags(context.Background(), 1000)
				if err != nil || len(lags) != 4 {
					return false
				}
				for _, l := range lags {
					if l.Behind != 0 || l.Age(time.Now()) != 0 {
						return false
					}
				}
				return true
			})
			for i, l := range lags {
				if l.Reader != "relay" || l.Partition != i {
					t.Errorf("lag %d is of %s/%d, want relay/%d", i, l.Reader, l.Partition, i)
				}
			}
			cancel()
			wg.Wait()
			dups := checkOrder(t, rec.messages(), keys, per)
			t.Logf("%d messages, %d published again after a hand-over", keys*per, dups)
		})
	}
}

// TestLogRelayDeadLetter checks that a message refused past its retries
// goes to the dead letters while its partition's later messages follow,
// and that with StopOnRefusal the partition stops and says why.
func TestLogRelayDeadLetter(t *testing.T) {
	for _, b := range logBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			store := sqlstoretest.Log(t, db)
			lg, err := outbox.NewLog(store, 1)
			if err != nil {
				t.Fatal(err)
			}
			leases := sqlstoretest.Leases(t, db)
			writeKeys(t, db, lg, 1, 5, 5)
			rec := &recorder{refuse: map[string]int{"k0-2": -1}}
			policy := outbox.RetryPolicy{BaseDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond, MaxRetries: 2}
			r, err := outbox.NewLogRelay(lg, rec, outbox.LogRelayConfig{Retry: policy, LogReaderConfig: outbox.LogReaderConfig{
				Reader: "relay", Leases: leases, PollInterval: 10 * time.Millisecond, Logger: quiet()}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Run(ctx) }()
			waitFor(t, 30*time.Second, "four messages", func() bool { return len(rec.messages()) == 4 })
			cancel()
			<-done
			var ids []string
			for _, m := range rec.messages() {
				ids = append(ids, m.MessageID)
			}
			if fmt.Sprint(ids) != "[k0-0 k0-1 k0-3 k0-4]" {
				t.Fatalf("published %v", ids)
			}
			dl, err := store.DeadLetters(context.Background(), 0, 10)
			if err != nil || len(dl) != 1 || dl[0].Record.MessageID != "k0-2" || dl[0].LastError != "refused" {
				t.Fatalf("dead letters = %+v, %v", dl, err)
			}
			// Status: the relay's cursor and the dead letter, limits obeyed.
			st, err := lg.Status(context.Background(), 1, 0)
			if err != nil || len(st.Cursors) != 1 || st.Cursors[0].Reader != "relay" || len(st.DeadLetters) != 0 || st.MoreDead {
				t.Fatalf("status with no dead letters asked: %+v, %v", st, err)
			}
			if st, err = lg.Status(context.Background(), 10, 1); err != nil || len(st.DeadLetters) != 1 || st.MoreDead {
				t.Fatalf("status with one dead letter asked: %+v, %v", st, err)
			}
			if _, err := lg.Status(context.Background(), 10, -1); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Fatalf("negative dead-letter limit: err = %v", err)
			}

			// StopOnRefusal: a second reader stops at the refused message.
			rec2 := &recorder{refuse: map[string]int{"k0-2": -1}}
			r2, err := outbox.NewLogRelay(lg, rec2, outbox.LogRelayConfig{Retry: policy, StopOnRefusal: true,
				LogReaderConfig: outbox.LogReaderConfig{Reader: "strict", Leases: leases, PollInterval: 10 * time.Millisecond, Logger: quiet()}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			done = make(chan struct{})
			go func() { defer close(done); _ = r2.Run(ctx) }()
			waitFor(t, 30*time.Second, "the partition to stop", func() bool { return r2.Stopped()[0] != nil })
			if err := r2.Stopped()[0]; !errors.Is(err, outbox.ErrPartitionStopped) {
				t.Fatalf("stopped with %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			if n := len(rec2.messages()); n != 2 {
				t.Fatalf("strict reader published %d messages, want the 2 before the refused one", n)
			}
			cancel()
			<-done
		})
	}
}

// TestLogTrim checks that retention deletes only what the slowest reader
// is done with, in bounded batches, and that a reader behind the kept
// rows stops with ErrCursorBehind.
func TestLogTrim(t *testing.T) {
	for _, b := range logBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			store := sqlstoretest.Log(t, db)
			lg, err := outbox.NewLog(store, 1)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			writeKeys(t, db, lg, 1, 10, 10)
			if n, err := lg.Trim(ctx, 3); err != nil || n != 0 {
				t.Fatalf("trim with no reader = %d, %v; want 0", n, err)
			}
			// Reader "fast" reads 6, "slow" 4.
			for reader, n := range map[string]int{"fast": 6, "slow": 4} {
				cur, err := store.OpenCursor(ctx, reader, 0, 1)
				if err != nil {
					t.Fatal(err)
				}
				// Another transaction of the server may hold the records
				// back for a moment: read until they come.
				var batch driver.LogBatch
				waitFor(t, 30*time.Second, "the records", func() bool {
					batch, err = store.Next(ctx, outbox.LogNextRequest(reader, 0, 1, cur.Position, n))
					if err != nil {
						t.Fatal(err)
					}
					return len(batch.Records) == n
				})
				last := batch.Records[n-1].Position
				req := outbox.LogNextRequest(reader, 0, 1, last, 1)
				req.Commit = &outbox.LogCommit{From: cur.Position, To: last}
				if _, err := store.Next(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			var total int64
			for {
				n, err := lg.Trim(ctx, 3)
				if err != nil {
					t.Fatal(err)
				}
				if n > 3 {
					t.Fatalf("one trim deleted %d rows, more than its batch", n)
				}
				if n == 0 {
					break
				}
				total += n
			}
			if total != 4 {
				t.Fatalf("trimmed %d, want the 4 the slowest reader is done with", total)
			}
			if _, err := store.OpenCursor(ctx, "new", 0, 1); err != nil {
				t.Fatalf("a new reader starts at the mark: %v", err)
			}
			if err := db.Exec("UPDATE "+db.Statement.Quote(store.Tables().Cursors)+" SET seq = 0, tx = 0 WHERE reader = ?", "slow").Error; err != nil {
				t.Fatal(err)
			}
			leases := sqlstoretest.Leases(t, db)
			c, err := lg.Consumer(outbox.LogReaderConfig{Reader: "slow", Leases: leases, Logger: quiet(), PollInterval: 10 * time.Millisecond},
				func(context.Context, int, []outbox.LogRecord) (int, []outbox.LogDeadLetter, error) {
					return 0, nil, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _ = c.Run(cctx) }()
			waitFor(t, 30*time.Second, "the reader behind to stop", func() bool { return c.Stopped()[0] != nil })
			if err := c.Stopped()[0]; !errors.Is(err, outbox.ErrCursorBehind) {
				t.Fatalf("stopped with %v, want ErrCursorBehind", err)
			}
		})
	}
}

// TestLogWriteInvalid checks that bad messages are refused and nothing is
// written.
func TestLogWriteInvalid(t *testing.T) {
	db := testdb.SQLite(t)
	store := sqlstoretest.Log(t, db)
	lg, err := outbox.NewLog(store, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*outbox.Message{nil, {Topic: "t"}, {MessageID: "m"}} {
		if err := lg.Write(context.Background(), nil, &outbox.Message{MessageID: "ok", Topic: "t"}, m); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("Write(%+v): err = %v, want ErrInvalidArgument", m, err)
		}
	}
	if _, err := outbox.NewLog(store, 0); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewLog with 0 partitions: %v", err)
	}
	var n int64
	if err := db.Table(store.Tables().Log).Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("rows = %d, %v; want none", n, err)
	}
}
