// Command bench measures claimstore's Watermill Publisher and Subscriber
// beside watermill-sql's on the local PostgreSQL, in one run: publish
// msg/s (messages written per second, 1000 per Publish call), and consume
// msg/s (messages received and acked per second, from Subscribe to the
// last ack) with 1 subscriber and with -subscribers subscribers of one
// consumer group. Each phase works on a fresh topic (watermill-sql) or
// message table (claimstore) of -rows messages, and every phase counts
// every message id: a message handled twice or never fails the run.
//
// watermill-sql's subscribers of one consumer group serialize on the
// group's offset row (a second subscriber waits for the first one's
// transaction), so its consume is measured with 1 subscriber and with the
// same count as claimstore's. The tables a run creates are dropped at its
// end.
//
//	cd watermill && go run ./bench                    # 20,000 messages, 8 subscribers
//	cd watermill && go run ./bench -rows 100000 -rounds 3
//
// The log mode (LogPublisher and LogSubscriber over an outbox log of 16
// partitions, messages keyed by their number modulo 100) is measured the
// same way, and its consume also checks each key's messages in order.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// Config is one run.
type Config struct {
	DSN         string
	Rows        int // messages per phase
	Subscribers int // subscribers of one group in the parallel phases
	Batch       int // messages one subscriber reads (watermill-sql) or claims (claimstore) at once
	Rounds      int
	Timeout     time.Duration // bound of each timed phase
}

// Result is one timed phase.
type Result struct {
	Round       int
	System      string // "watermill-sql" or "claimstore"
	Phase       string // "publish" or "consume"
	Subscribers int
	Messages    int
	Wall        time.Duration
}

// PerSec returns messages per second.
func (r Result) PerSec() float64 { return float64(r.Messages) / r.Wall.Seconds() }

func main() {
	var cfg Config
	flag.StringVar(&cfg.DSN, "dsn", envOr("CLAIMSTORE_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL URL")
	flag.IntVar(&cfg.Rows, "rows", 20000, "messages per phase")
	flag.IntVar(&cfg.Subscribers, "subscribers", 8, "subscribers of one group in the parallel phases")
	flag.IntVar(&cfg.Batch, "batch", 100, "messages per subscriber read or claim")
	flag.IntVar(&cfg.Rounds, "rounds", 1, "rounds, the systems interleaved")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "bound of each timed phase")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results, err := Run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	Report(os.Stdout, cfg, results)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run runs cfg.Rounds rounds of every phase and returns the results,
// printing one line per phase to out.
func Run(ctx context.Context, cfg Config, out io.Writer) ([]Result, error) {
	if cfg.Rows <= 0 || cfg.Subscribers <= 0 || cfg.Batch <= 0 || cfg.Rounds <= 0 {
		return nil, errors.New("rows, subscribers, batch and rounds must be > 0")
	}
	var results []Result
	add := func(r Result, err error) error {
		if err != nil {
			return fmt.Errorf("%s %s (%d subscribers): %w", r.System, r.Phase, r.Subscribers, err)
		}
		results = append(results, r)
		fmt.Fprintf(out, "round %d %-14s %-8s subscribers=%d messages=%d %.0f msg/s\n", r.Round, r.System, r.Phase, r.Subscribers, r.Messages, r.PerSec())
		return nil
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, n := range []int{1, cfg.Subscribers} {
			for _, system := range []func(context.Context, Config, int) (Result, Result, error){runWatermillSQL, runClaimstore, runClaimstoreLog} {
				pub, cons, err := system(ctx, cfg, n)
				pub.Round, cons.Round = round, round
				if n == 1 { // the publish phase is timed once per round
					if err := add(pub, err); err != nil {
						return results, err
					}
				}
				if err := add(cons, err); err != nil {
					return results, err
				}
			}
			if n == cfg.Subscribers {
				break
			}
		}
	}
	return results, nil
}

// messages returns n messages whose UUIDs are their numbers 0..n-1.
func messages(n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(strconv.Itoa(i), []byte(`{"seq":`+strconv.Itoa(i)+`}`))
	}
	return msgs
}

// publish publishes n messages in calls of 1000 and returns the time.
func publish(pub message.Publisher, topic string, n int) (time.Duration, error) {
	msgs := messages(n)
	start := time.Now()
	for chunk := range slices.Chunk(msgs, 1000) {
		if err := pub.Publish(topic, chunk...); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// consume subscribes subs to topic, acks every message, and returns the
// time from the first Subscribe until every message 0..n-1 was acked. A
// message received twice, or an unknown one, is an error; with ordered,
// so is a message received after a later one of its key (metadata
// keyMetadata).
func consume(ctx context.Context, subs []message.Subscriber, topic string, n int, timeout time.Duration, ordered bool) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := make([]bool, n)
	var mu sync.Mutex
	got, twice, bad, reordered := 0, 0, 0, 0
	last := map[string]int{}
	done := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range subs {
		ch, err := s.Subscribe(ctx, topic)
		if err != nil {
			return 0, err
		}
		wg.Go(func() {
			for m := range ch {
				i, err := strconv.Atoi(m.UUID)
				mu.Lock()
				switch {
				case err != nil || i < 0 || i >= n:
					bad++
				case seen[i]:
					twice++
				default:
					if ordered {
						k := m.Metadata.Get(keyMetadata)
						if p, ok := last[k]; ok && i < p {
							reordered++
						}
						last[k] = i
					}
					seen[i] = true
					got++
					if got == n {
						close(done)
					}
				}
				mu.Unlock()
				m.Ack()
			}
		})
	}
	var wall time.Duration
	select {
	case <-done:
		wall = time.Since(start)
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if got < n {
		return 0, fmt.Errorf("%d of %d messages acked: %w", got, n, ctx.Err())
	}
	if twice > 0 || bad > 0 || reordered > 0 {
		return 0, fmt.Errorf("%d messages received twice, %d unknown, %d after a later one of their key", twice, bad, reordered)
	}
	return wall, nil
}

func openSQL(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// runWatermillSQL measures watermill-sql: publish (PostgreSQL schema
// adapter) and consume with subs subscribers of one group (PostgreSQL
// offsets adapter), on a fresh topic whose tables it drops.
func runWatermillSQL(ctx context.Context, cfg Config, subs int) (pubRes, consRes Result, err error) {
	pubRes = Result{System: "watermill-sql", Phase: "publish", Subscribers: 0, Messages: cfg.Rows}
	consRes = Result{System: "watermill-sql", Phase: "consume", Subscribers: subs, Messages: cfg.Rows}
	db, err := openSQL(ctx, cfg.DSN, subs+2)
	if err != nil {
		return pubRes, consRes, err
	}
	defer db.Close()
	topic := "wmbench_" + suffix()
	defer func() {
		for _, t := range []string{"watermill_" + topic, "watermill_offsets_" + topic} {
			if _, derr := db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+pgx.Identifier{t}.Sanitize()); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	schema := wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: cfg.Batch}
	pub, err := wsql.NewPublisher(db, wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, watermill.NopLogger{})
	if err != nil {
		return pubRes, consRes, err
	}
	var ss []message.Subscriber
	for range subs {
		s, err := wsql.NewSubscriber(db, wsql.SubscriberConfig{
			ConsumerGroup: "bench", SchemaAdapter: schema, OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
			InitializeSchema: true, PollInterval: 100 * time.Millisecond,
		}, watermill.NopLogger{})
		if err != nil {
			return pubRes, consRes, err
		}
		defer s.Close()
		ss = append(ss, s)
	}
	if err := ss[0].(message.SubscribeInitializer).SubscribeInitialize(topic); err != nil {
		return pubRes, consRes, err
	}
	if pubRes.Wall, err = publish(pub, topic, cfg.Rows); err != nil {
		return pubRes, consRes, err
	}
	consRes.Wall, err = consume(ctx, ss, topic, cfg.Rows, cfg.Timeout, false)
	return pubRes, consRes, err
}

// runClaimstore measures claimstore's Publisher and Subscriber: publish,
// and consume with subs subscribers of one group registered before the
// publish (so the consume includes the fan-out into the group's
// deliveries), on a fresh message table whose tables it drops.
func runClaimstore(ctx context.Context, cfg Config, subs int) (pubRes, consRes Result, err error) {
	pubRes = Result{System: "claimstore", Phase: "publish", Subscribers: 0, Messages: cfg.Rows}
	consRes = Result{System: "claimstore", Phase: "consume", Subscribers: subs, Messages: cfg.Rows}
	db, closeDB, err := openGorm(ctx, cfg.DSN, subs+2)
	if err != nil {
		return pubRes, consRes, err
	}
	defer closeDB()
	tables, err := cswm.TablesOf("wmbench_" + suffix())
	if err != nil {
		return pubRes, consRes, err
	}
	defer func() {
		for _, t := range []string{tables.Messages, tables.Deliveries, tables.Groups} {
			err = errors.Join(err, db.WithContext(context.WithoutCancel(ctx)).Migrator().DropTable(t))
		}
	}()
	if err := cswm.Migrate(ctx, db, tables.Messages); err != nil {
		return pubRes, consRes, err
	}
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(tables.Messages))
	if err != nil {
		return pubRes, consRes, err
	}
	repo, err := outbox.New(store)
	if err != nil {
		return pubRes, consRes, err
	}
	pub, err := cswm.NewPublisher(repo, cswm.PublisherConfig{})
	if err != nil {
		return pubRes, consRes, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ss []message.Subscriber
	for range subs {
		s, err := cswm.NewSubscriber(db, cswm.SubscriberConfig{
			Table: tables.Messages, ConsumerGroup: "bench", BatchSize: cfg.Batch,
			PollInterval: 100 * time.Millisecond, Logger: quiet,
		})
		if err != nil {
			return pubRes, consRes, err
		}
		defer s.Close()
		ss = append(ss, s)
	}
	if err := ss[0].(message.SubscribeInitializer).SubscribeInitialize("bench"); err != nil {
		return pubRes, consRes, err
	}
	if pubRes.Wall, err = publish(pub, "bench", cfg.Rows); err != nil {
		return pubRes, consRes, err
	}
	if err := analyze(ctx, db, tables); err != nil {
		return pubRes, consRes, err
	}
	consRes.Wall, err = consume(ctx, ss, "bench", cfg.Rows, cfg.Timeout, false)
	return pubRes, consRes, err
}

// The log phases: messages keyed by their number modulo logKeys (in
// metadata keyMetadata), over logPartitions partitions.
const (
	keyMetadata   = "key"
	logKeys       = 100
	logPartitions = 16
)

// runClaimstoreLog measures claimstore's LogPublisher and LogSubscriber
// (the outbox's log mode): publish, and consume with subs subscribers of
// one group, each key's messages checked in order, on a fresh log whose
// tables it drops.
func runClaimstoreLog(ctx context.Context, cfg Config, subs int) (pubRes, consRes Result, err error) {
	pubRes = Result{System: "claimstore-log", Phase: "publish", Subscribers: 0, Messages: cfg.Rows}
	consRes = Result{System: "claimstore-log", Phase: "consume", Subscribers: subs, Messages: cfg.Rows}
	db, closeDB, err := openGorm(ctx, cfg.DSN, 2*subs+2)
	if err != nil {
		return pubRes, consRes, err
	}
	defer closeDB()
	name := "wmbench_log_" + suffix()
	store, err := sqlstore.NewLog(db, name)
	if err != nil {
		return pubRes, consRes, err
	}
	leases, err := sqlstore.NewLeases(db, name+"_leases")
	if err != nil {
		return pubRes, consRes, err
	}
	defer func() {
		t := store.Tables()
		for _, table := range []string{t.Log, t.Cursors, t.Dead, leases.Table()} {
			err = errors.Join(err, db.WithContext(context.WithoutCancel(ctx)).Migrator().DropTable(table))
		}
	}()
	if err := store.Migrate(ctx); err != nil {
		return pubRes, consRes, err
	}
	if err := leases.Migrate(ctx); err != nil {
		return pubRes, consRes, err
	}
	lg, err := outbox.NewLog(store, logPartitions)
	if err != nil {
		return pubRes, consRes, err
	}
	pub, err := cswm.NewLogPublisher(lg, cswm.LogPublisherConfig{KeyMetadata: keyMetadata})
	if err != nil {
		return pubRes, consRes, err
	}
	msgs := messages(cfg.Rows)
	for i, m := range msgs {
		m.Metadata.Set(keyMetadata, strconv.Itoa(i%logKeys))
	}
	start := time.Now()
	for chunk := range slices.Chunk(msgs, 1000) {
		if err := pub.Publish("bench", chunk...); err != nil {
			return pubRes, consRes, err
		}
	}
	pubRes.Wall = time.Since(start)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ss []message.Subscriber
	for range subs {
		s, err := cswm.NewLogSubscriber(lg, cswm.LogSubscriberConfig{ConsumerGroup: "bench", Leases: leases, LogTable: name,
			Batch: cfg.Batch, PollInterval: 20 * time.Millisecond, Logger: quiet})
		if err != nil {
			return pubRes, consRes, err
		}
		defer s.Close()
		ss = append(ss, s)
	}
	consRes.Wall, err = consume(ctx, ss, "bench", cfg.Rows, cfg.Timeout, true)
	return pubRes, consRes, err
}

// openGorm opens PostgreSQL at dsn with a pool of conns connections and
// returns it with the function that closes it.
func openGorm(ctx context.Context, dsn string, conns int) (*gorm.DB, func(), error) {
	db, err := sqlstore.Open(ctx, "postgres", dsn)
	if err != nil {
		return nil, nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, err
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	return db, func() { _ = sqlDB.Close() }, nil
}

// analyze refreshes the planner's statistics of the message table after
// the bulk publish, as autovacuum would soon after.
func analyze(ctx context.Context, db *gorm.DB, t cswm.Tables) error {
	return db.WithContext(ctx).Exec("ANALYZE " + pgx.Identifier{t.Messages}.Sanitize()).Error
}

// Report prints the medians per system, phase and subscriber count, and
// the ratios the comparison asks for.
func Report(out io.Writer, cfg Config, results []Result) {
	type key struct {
		system, phase string
		subs          int
	}
	rates := map[key][]float64{}
	for _, r := range results {
		k := key{r.System, r.Phase, r.Subscribers}
		rates[k] = append(rates[k], r.PerSec())
	}
	median := func(k key) float64 {
		v := slices.Clone(rates[k])
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	fmt.Fprintf(out, "\nmedians of %d round(s), %d messages per phase:\n", cfg.Rounds, cfg.Rows)
	for _, k := range []key{
		{"watermill-sql", "publish", 0}, {"claimstore", "publish", 0},
		{"watermill-sql", "consume", 1}, {"watermill-sql", "consume", cfg.Subscribers},
		{"claimstore", "consume", 1}, {"claimstore", "consume", cfg.Subscribers},
		{"claimstore-log", "publish", 0}, {"claimstore-log", "consume", 1}, {"claimstore-log", "consume", cfg.Subscribers},
	} {
		fmt.Fprintf(out, "  %-14s %-8s subscribers=%d %.0f msg/s\n", k.system, k.phase, k.subs, median(k))
	}
	wbest := max(median(key{"watermill-sql", "consume", 1}), median(key{"watermill-sql", "consume", cfg.Subscribers}))
	fmt.Fprintf(out, "publish: claimstore / watermill-sql = %.2f\n", median(key{"claimstore", "publish", 0})/median(key{"watermill-sql", "publish", 0}))
	fmt.Fprintf(out, "consume, %d subscribers: claimstore / watermill-sql's best configuration = %.2f\n", cfg.Subscribers, median(key{"claimstore", "consume", cfg.Subscribers})/wbest)
	fmt.Fprintf(out, "log mode: publish / watermill-sql's = %.2f; consume, %d subscribers, each key in order / watermill-sql's best configuration = %.2f\n",
		median(key{"claimstore-log", "publish", 0})/median(key{"watermill-sql", "publish", 0}), cfg.Subscribers,
		median(key{"claimstore-log", "consume", cfg.Subscribers})/wbest)
}
