// Package logbench measures the outbox's log mode against the broker's
// own ceiling, in one run: JetStream's asynchronous publish of N messages
// with a message id and no database (the most a relay could reach), then
// outbox.Log.Write of N messages and LogRelays publishing them to
// JetStream, each key's messages in order. The stream is read back after
// the relays: every message must be in it once, each key in order, else
// the run fails.
package logbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// Options describe one run; every count must be >= 1 (Payload >= 0).
type Options struct {
	// Backend and DSN name the database (postgres or sqlite: the log's
	// backends; sqlite needs a DSN).
	Backend, DSN string
	// Messages is N, of Payload bytes each, with Keys partition keys
	// spread over Partitions partitions.
	Messages, Payload, Keys, Partitions int
	// Writers write concurrently, WriteBatch messages per transaction.
	Writers, WriteBatch int
	// Relays run at once, each with its own NATS connection, reading
	// batches of Batch records.
	Relays, Batch int
	// NATSURL is an external NATS server; empty starts an embedded one.
	NATSURL string
	// Repeat runs both phases this many times; the report gives the
	// median run of each.
	Repeat int
	// Timeout bounds each phase.
	Timeout time.Duration
	// Progress receives progress lines; nil: none.
	Progress io.Writer
}

// Report is the result of a run: the median of each phase.
type Report struct {
	Options Options
	NATS    string
	// Ceiling is JetStream's own asynchronous publish, messages/s.
	Ceiling float64
	// Write is outbox.Log.Write, messages/s.
	Write float64
	// Relay is the LogRelays' publish to JetStream, messages/s, from
	// their start to the last message stored.
	Relay float64
	// Republished is how many messages the relays published more than
	// once in the median relay run (the stream stored each once).
	Republished int
}

// WriteText prints the report.
func (r *Report) WriteText(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "log mode on %s, NATS %s: %d messages of %d bytes, %d keys over %d partitions; %d relays, batches of %d; median of %d\n",
		o.Backend, r.NATS, o.Messages, o.Payload, o.Keys, o.Partitions, o.Relays, o.Batch, o.Repeat)
	fmt.Fprintf(w, "  JetStream async publish with Msg-Id, no database  %8.0f msg/s\n", r.Ceiling)
	fmt.Fprintf(w, "  outbox.Log.Write (%d writers × %d per tx)          %8.0f msg/s\n", o.Writers, o.WriteBatch, r.Write)
	fmt.Fprintf(w, "  LogRelay to JetStream, each key in order          %8.0f msg/s (%d published again, stored once)\n", r.Relay, r.Republished)
	fmt.Fprintf(w, "relay / JetStream ceiling: %.2f\n", r.Relay/r.Ceiling)
}

// Run measures the phases o.Repeat times and returns the medians.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	broker, err := outboxenv.StartBroker(o.NATSURL)
	if err != nil {
		return nil, err
	}
	defer broker.Close()
	db, err := sqlstore.Open(ctx, o.Backend, o.DSN)
	if err != nil {
		return nil, err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
		// A reader reads each partition it holds on a connection of its
		// own, so the relays together use up to one per partition.
		sqlDB.SetMaxOpenConns(o.Writers + o.Partitions + o.Relays + 4)
	}
	var ceilings, writes, relays []float64
	var republished []int
	for i := range o.Repeat {
		fmt.Fprintf(o.Progress, "bench log: run %d of %d: JetStream ceiling\n", i+1, o.Repeat)
		c, err := ceiling(ctx, o, broker.URL)
		if err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
		fmt.Fprintf(o.Progress, "bench log: run %d of %d: %.0f msg/s; log write and relay\n", i+1, o.Repeat, c)
		wr, rr, again, err := logRun(ctx, o, db, broker.URL)
		if err != nil {
			return nil, fmt.Errorf("log relay: %w", err)
		}
		fmt.Fprintf(o.Progress, "bench log: run %d of %d: write %.0f msg/s, relay %.0f msg/s\n", i+1, o.Repeat, wr, rr)
		ceilings, writes, relays, republished = append(ceilings, c), append(writes, wr), append(relays, rr), append(republished, again)
	}
	rep := &Report{Options: o, NATS: broker.URL, Ceiling: median(ceilings), Write: median(writes)}
	rep.Relay = median(relays)
	for i, r := range relays {
		if r == rep.Relay {
			rep.Republished = republished[i]
		}
	}
	if broker.Embedded() {
		rep.NATS += " (embedded, file storage)"
	}
	return rep, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// stream creates a file-stored stream with a 10-minute duplicate window
// on a fresh subject and returns it, its subject and its deletion.
func stream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, string, func(), error) {
	s := outboxenv.RandomHex(4)
	subject := "logbench." + s
	drop, err := outboxenv.CreateStream(ctx, js, "LOGBENCH_"+s, subject, 10*time.Minute)
	if err != nil {
		return nil, "", nil, err
	}
	st, err := js.Stream(ctx, "LOGBENCH_"+s)
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	return st, subject, drop, nil
}

// ceiling publishes o.Messages messages of o.Payload bytes with a message
// id, asynchronously, on one connection, and returns messages/s until the
// last ack.
func ceiling(ctx context.Context, o Options, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	nc, err := outboxenv.ConnectNATS(url, "logbench-ceiling")
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	if err != nil {
		return 0, err
	}
	st, subject, drop, err := stream(ctx, js)
	if err != nil {
		return 0, err
	}
	defer drop()
	payload := make([]byte, o.Payload)
	start := time.Now()
	for i := range o.Messages {
		m := nats.NewMsg(subject)
		m.Data = payload
		m.Header.Set(jetstream.MsgIDHeader, "c-"+strconv.Itoa(i))
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(o.Timeout)); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	rate := float64(o.Messages) / time.Since(start).Seconds()
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	if int(info.State.Msgs) != o.Messages {
		return 0, fmt.Errorf("the stream holds %d of %d messages", info.State.Msgs, o.Messages)
	}
	return rate, nil
}

// logRun writes o.Messages messages to a fresh log, then publishes them
// with o.Relays LogRelays, checks the stream, and returns the write and
// relay rates and how many messages were published more than once.
func logRun(ctx context.Context, o Options, db *gorm.DB, url string) (write, relay float64, again int, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	name := "logbench_" + outboxenv.RandomHex(4)
	store, err := sqlstore.NewLog(db, name)
	if err != nil {
		return 0, 0, 0, err
	}
	leases, err := sqlstore.NewLeases(db, name+"_leases")
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		t := store.Tables()
		for _, table := range []string{t.Log, t.Cursors, t.Dead, leases.Table()} {
			if derr := db.Session(&gorm.Session{NewDB: true, Context: context.Background()}).Migrator().DropTable(table); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	if err := store.Migrate(ctx); err != nil {
		return 0, 0, 0, err
	}
	if err := leases.Migrate(ctx); err != nil {
		return 0, 0, 0, err
	}
	lg, err := outbox.NewLog(store, o.Partitions)
	if err != nil {
		return 0, 0, 0, err
	}
	nc, err := outboxenv.ConnectNATS(url, "logbench-check")
	if err != nil {
		return 0, 0, 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, 0, err
	}
	st, subject, drop, err := stream(ctx, js)
	if err != nil {
		return 0, 0, 0, err
	}
	defer drop()

	payload := make([]byte, o.Payload)
	start := time.Now()
	if err := writeAll(ctx, o, db, lg, subject, payload); err != nil {
		return 0, 0, 0, err
	}
	write = float64(o.Messages) / time.Since(start).Seconds()

	pubs := &countingPublishes{}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var conns []*nats.Conn
	// The relays stop before their connections close.
	halt := func() {
		stop()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	defer halt()
	errs := make(chan error, o.Relays)
	start = time.Now()
	for i := range o.Relays {
		rnc, err := outboxenv.ConnectNATS(url, fmt.Sprintf("logbench-relay-%d", i))
		if err != nil {
			return 0, 0, 0, err
		}
		conns = append(conns, rnc)
		pub, err := natspub.New(rnc, natspub.Config{})
		if err != nil {
			return 0, 0, 0, err
		}
		r, err := outbox.NewLogRelay(lg, pubs.wrap(pub), outbox.LogRelayConfig{LogReaderConfig: outbox.LogReaderConfig{
			Reader: "bench", WorkerID: fmt.Sprintf("relay-%d", i), Leases: leases, LogTable: name, Batch: o.Batch,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}})
		if err != nil {
			return 0, 0, 0, err
		}
		wg.Go(func() {
			if err := r.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		})
	}
	for {
		info, err := st.Info(ctx)
		if err != nil {
			return 0, 0, 0, err
		}
		if int(info.State.Msgs) >= o.Messages {
			break
		}
		select {
		case err := <-errs:
			return 0, 0, 0, err
		case <-ctx.Done():
			return 0, 0, 0, fmt.Errorf("%d of %d messages stored: %w", info.State.Msgs, o.Messages, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	relay = float64(o.Messages) / time.Since(start).Seconds()
	halt()
	if err := checkStream(ctx, st, o); err != nil {
		return 0, 0, 0, err
	}
	return write, relay, int(pubs.n.Load()) - o.Messages, nil
}

// writeAll writes o.Messages messages, message seq of key seq mod o.Keys
// with id "k-i" (i its number within the key), o.WriteBatch per
// transaction, from o.Writers goroutines; writer w writes the keys k with
// k mod o.Writers = w, in order, so each key's messages commit in the
// order of their numbers.
func writeAll(ctx context.Context, o Options, db *gorm.DB, lg *outbox.Log, subject string, payload []byte) error {
	var wg sync.WaitGroup
	errs := make([]error, o.Writers)
	for w := range o.Writers {
		wg.Go(func() {
			var msgs []*outbox.Message
			flush := func() error {
				if len(msgs) == 0 {
					return nil
				}
				err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return lg.Write(ctx, tx, msgs...) })
				msgs = msgs[:0]
				return err
			}
			for seq := range o.Messages {
				k := seq % o.Keys
				if k%o.Writers != w {
					continue
				}
				msgs = append(msgs, &outbox.Message{MessageID: strconv.Itoa(k) + "-" + strconv.Itoa(seq/o.Keys), Topic: subject,
					PartitionKey: "key-" + strconv.Itoa(k), Payload: payload})
				if len(msgs) == o.WriteBatch {
					if errs[w] = flush(); errs[w] != nil {
						return
					}
				}
			}
			errs[w] = flush()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// countingPublishes counts the messages the relays publish.
type countingPublishes struct {
	n atomic.Int64
}

func (c *countingPublishes) wrap(p outbox.Publisher) outbox.Publisher {
	return outbox.PublisherFunc(func(ctx context.Context, msgs []outbox.Message) []error {
		c.n.Add(int64(len(msgs)))
		return p.Publish(ctx, msgs)
	})
}

// fetchWait is the longest wait of one read of the stream's check.
var fetchWait = 5 * time.Second

// checkStream reads the stream in order: every message must be in it
// once, and each key's messages in the order of their numbers (the order
// they were committed in).
func checkStream(ctx context.Context, st jetstream.Stream, o Options) error {
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	seen := make(map[string]bool, o.Messages)
	last := map[string]int{}
	for len(seen) < o.Messages {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if seen[id] {
				return fmt.Errorf("message %s stored twice", id)
			}
			seen[id] = true
			k, i, ok := strings.Cut(id, "-")
			n, err := strconv.Atoi(i)
			if !ok || err != nil {
				return fmt.Errorf("message id %q", id)
			}
			if p, ok := last[k]; (ok && n != p+1) || (!ok && n != 0) {
				return fmt.Errorf("key %s: message %d stored after %d", k, n, p)
			}
			last[k] = n
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if got == 0 {
			return fmt.Errorf("%d of %d messages read back", len(seen), o.Messages)
		}
	}
	return nil
}
