// Command sharded-outbox is the transactional outbox partitioned across
// two PostgreSQL databases by account: each deposit and its message are
// written in one transaction on the database the account's key maps to
// (package outbox/shard: jump consistent hash over FNV-1a), a relay per
// database publishes to one NATS JetStream stream, and the stream is read
// back to show every message once and each account's messages in order.
//
// It creates two databases on the PostgreSQL server of
// $CLAIMSTORE_POSTGRES_DSN (default the local one; a postgres:// URL whose
// user may create databases) and drops them when it ends. It publishes to
// a NATS server started inside the process, or to the one of -nats-url
// (with JetStream; the stream is deleted at the end):
//
//	go run ./examples/sharded-outbox
//	go run ./examples/sharded-outbox -accounts 100 -deposits 20
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/outbox/shard"
)

// Deposit is the business row: it lives on the shard of its account.
type Deposit struct {
	ID      int64
	Account string `gorm:"size:191;not null;index"`
	Seq     int    `gorm:"not null"`
	Amount  int64  `gorm:"not null"` // cents
}

// TableName is the table of the deposits.
func (Deposit) TableName() string { return "example_deposits" }

const (
	shards     = 2
	streamName = "EXAMPLE_SHARDED"
	subject    = "example.deposits"
)

type config struct {
	dsn      string
	natsURL  string // empty: a server inside the process
	accounts int
	deposits int // per account
}

func main() {
	cfg := config{dsn: env("CLAIMSTORE_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")}
	flag.StringVar(&cfg.natsURL, "nats-url", "", "NATS server with JetStream (default: one started inside this process)")
	flag.IntVar(&cfg.accounts, "accounts", 20, "accounts (partition keys)")
	flag.IntVar(&cfg.deposits, "deposits", 5, "deposits per account, written one after another")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal("sharded-outbox: ", err)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if cfg.accounts < 1 || cfg.deposits < 1 {
		return fmt.Errorf("-accounts and -deposits must be at least 1")
	}
	js, closeBroker, err := broker(cfg.natsURL)
	if err != nil {
		return err
	}
	defer closeBroker()
	relayCfg := outbox.RelayConfig{
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	// The duplicate window covers the relays' retry horizon, rounded up to
	// a minute, so that every repeat is stored once (docs/operations.md).
	window := (outbox.RetryHorizon(outbox.DefaultRetryPolicy(), relayCfg) + time.Minute - 1).Truncate(time.Minute)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{subject}, Duplicates: window,
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", streamName, err)
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), streamName) }()

	// One database per shard, each with its deposits and its outbox.
	list := make([]shard.Shard, shards)
	for i := range list {
		db, drop, err := createDatabase(ctx, cfg.dsn)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, drop()) }()
		if err := db.WithContext(ctx).AutoMigrate(&Deposit{}); err != nil {
			return err
		}
		if err := outbox.Migrate(ctx, db, ""); err != nil {
			return err
		}
		store, err := sqlstore.New[outbox.Message](db)
		if err != nil {
			return err
		}
		repo, err := outbox.New(store)
		if err != nil {
			return err
		}
		list[i] = shard.Shard{DB: db, Outbox: repo}
	}
	router, err := shard.NewRouter(list...)
	if err != nil {
		return err
	}

	// One relay per shard, of Concurrency 1: each account's messages
	// leave its shard in the order they were written.
	pub, err := natspub.New(js.Conn(), natspub.Config{})
	if err != nil {
		return err
	}
	relays, err := shard.NewRelays(router, pub, relayCfg, 1)
	if err != nil {
		return err
	}
	if err := relays.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, relays.Stop()) }()

	// Writers, one per account, run at once; each writes its account's
	// deposits one after another, a deposit and its message in one
	// transaction on the account's shard. Four at a time, to keep the
	// connections few.
	var wg sync.WaitGroup
	errs := make(chan error, cfg.accounts)
	sem := make(chan struct{}, 4)
	for a := range cfg.accounts {
		account := fmt.Sprintf("account-%d", a)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for seq := range cfg.deposits {
				err := router.Transaction(ctx, account, func(tx *gorm.DB, add shard.AddFunc) error {
					if err := tx.Create(&Deposit{Account: account, Seq: seq, Amount: int64(100 * (seq + 1))}).Error; err != nil {
						return err
					}
					return add(&outbox.Message{
						MessageID: fmt.Sprintf("%s-deposit-%d", account, seq),
						Topic:     subject, Type: "deposit.made",
						Payload: []byte(strconv.Itoa(seq)),
					})
				})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", account, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return err
	}
	total := cfg.accounts * cfg.deposits
	fmt.Fprintf(out, "wrote %d deposits of %d accounts to %d databases\n", total, cfg.accounts, shards)

	// A real relay runs for good; this one stops once both shards are
	// drained.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := router.WaitDrained(wctx, 50*time.Millisecond); err != nil {
		return err
	}
	for i, st := range relays.Stats() {
		var rows int64
		if err := router.At(i).DB.WithContext(ctx).Model(&Deposit{}).Count(&rows).Error; err != nil {
			return err
		}
		fmt.Fprintf(out, "shard %d: %d deposits, relay published %d messages\n", i, rows, st.Published)
	}
	moving := 0
	for a := range cfg.accounts {
		if to, _ := shard.Index(fmt.Sprintf("account-%d", a), shards+1); to == shards {
			moving++
		}
	}
	fmt.Fprintf(out, "a third shard would take %d of %d accounts; the others stay where they are\n", moving, cfg.accounts)

	read, dup, outOfOrder, err := readBack(ctx, js, total)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stream %s: %d messages, %d duplicates, %d out of order per account\n", streamName, read, dup, outOfOrder)
	if read != total || dup != 0 || outOfOrder != 0 {
		return fmt.Errorf("the stream does not hold each of the %d messages once and in order", total)
	}
	return nil
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// readBack reads the whole stream and returns the messages read, the
// repeats of a message id, and the messages that came before an earlier
// deposit of their account.
func readBack(ctx context.Context, js jetstream.JetStream, total int) (read, dup, outOfOrder int, err error) {
	s, err := js.Stream(ctx, streamName)
	if err != nil {
		return 0, 0, 0, err
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, 0, 0, err
	}
	seen := map[string]bool{}
	next := map[string]int{}
	for read < total {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return read, dup, outOfOrder, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			read++
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if seen[id] {
				dup++
			}
			seen[id] = true
			account := m.Headers().Get(natspub.HeaderPartitionKey)
			seq, _ := strconv.Atoi(string(m.Data()))
			if seq != next[account] {
				outOfOrder++
			}
			next[account] = seq + 1
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return read, dup, outOfOrder, err
		}
		if n == 0 {
			break
		}
	}
	return read, dup, outOfOrder, nil
}

// createDatabase creates a database with a random name on the server of
// dsn and returns a handle on it (at most 3 connections) and a function
// that closes the handle and drops the database.
func createDatabase(ctx context.Context, dsn string) (*gorm.DB, func() error, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, nil, fmt.Errorf("the DSN must be a postgres:// URL to name other databases on its server")
	}
	admin, err := sqlstore.Open(ctx, "postgres", dsn)
	if err != nil {
		return nil, nil, err
	}
	closeAdmin := func() {
		if s, err := admin.DB(); err == nil {
			s.Close()
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "claimstore_example_shard_" + hex.EncodeToString(b[:])
	// The name is made of a constant and hex digits; identifiers cannot be
	// bound parameters, so it is quoted.
	if err := admin.WithContext(ctx).Exec(`CREATE DATABASE "` + name + `"`).Error; err != nil {
		closeAdmin()
		return nil, nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		defer closeAdmin()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := admin.WithContext(dctx).Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`).Error; err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	db, err := sqlstore.Open(ctx, "postgres", u.String())
	if err != nil {
		return nil, nil, errors.Join(err, drop())
	}
	s, err := db.DB()
	if err != nil {
		return nil, nil, errors.Join(err, drop())
	}
	s.SetMaxOpenConns(3)
	return db, func() error { s.Close(); return drop() }, nil
}

// broker connects to the NATS server at natsURL, or starts one inside the
// process when it is empty, and returns its JetStream context and a
// function that closes the connection and stops an embedded server.
func broker(natsURL string) (jetstream.JetStream, func(), error) {
	stopServer := func() {}
	if natsURL == "" {
		dir, err := os.MkdirTemp("", "sharded-outbox-nats-")
		if err != nil {
			return nil, nil, err
		}
		srv, err := natsembed.Start(natsembed.Options{StoreDir: dir})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		natsURL = srv.URL()
		stopServer = func() { srv.Shutdown(); os.RemoveAll(dir) }
	}
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1))
	if err != nil {
		stopServer()
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		stopServer()
		return nil, nil, err
	}
	return js, func() { nc.Close(); stopServer() }, nil
}
