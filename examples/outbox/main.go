// Command outbox is the transactional outbox with PostgreSQL and NATS
// JetStream: it writes orders, each in one transaction with its message,
// runs a relay until every message is published, and reads the stream's
// count back.
//
// It needs a PostgreSQL server ($CLAIMSTORE_POSTGRES_DSN, default the local
// one, database test) and a NATS server with JetStream ($CLAIMSTORE_NATS_URL,
// default nats://127.0.0.1:4222, e.g. started with nats-server -js):
//
//	go run ./examples/outbox
//	go run ./examples/outbox -orders 100
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	_ "github.com/claimstore/claimstore/adapters/postgres"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// Order is the business row.
type Order struct {
	ID       int64
	Customer string
	Total    int64 // cents
}

// TableName is the table of the orders.
func (Order) TableName() string { return "example_orders" }

const (
	messageTable = "example_outbox"
	streamName   = "EXAMPLE_ORDERS"
	subject      = "example.orders.created"
)

func main() {
	orders := flag.Int("orders", 10, "orders to write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, env("CLAIMSTORE_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		env("CLAIMSTORE_NATS_URL", nats.DefaultURL), *orders); err != nil {
		log.Fatal("outbox: ", err)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, dsn, natsURL string, orders int) error {
	// Broker first: nothing is written when it cannot be reached.
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", natsURL, err)
	}
	defer nc.Close()
	relayCfg := outbox.RelayConfig{
		PollInterval: 100 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	// The relay may publish a message again (a lost ack, a relay that died
	// before its mark) for up to its retry horizon: the stream remembers
	// message ids that long, so a repeat is not stored twice, and the
	// publisher warns about any stream that remembers them for less.
	horizon := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), relayCfg)
	pub, err := natspub.New(nc, natspub.Config{MinDuplicateWindow: horizon})
	if err != nil {
		return err
	}
	// Every subject the relay publishes must belong to a stream. The
	// example's stream keeps a day of messages, so repeated runs do not
	// grow it without bound.
	stream, err := pub.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{subject}, MaxAge: 24 * time.Hour, Duplicates: horizon,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", streamName, err)
	}

	db, err := sqlstore.Open(ctx, "postgres", dsn)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	if err := db.WithContext(ctx).AutoMigrate(&Order{}); err != nil {
		return err
	}
	if err := outbox.Migrate(ctx, db, messageTable); err != nil {
		return err
	}
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(messageTable))
	if err != nil {
		return err
	}
	repo, err := outbox.New(store)
	if err != nil {
		return err
	}

	// The business write and its message commit together or not at all.
	for i := range orders {
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			order := Order{Customer: fmt.Sprintf("customer-%d", i%3), Total: int64(1000 + i)}
			if err := tx.Create(&order).Error; err != nil {
				return err
			}
			payload, err := json.Marshal(order)
			if err != nil {
				return err
			}
			return repo.Add(ctx, tx, &outbox.Message{
				MessageID: fmt.Sprintf("order-%d-created", order.ID),
				Topic:     subject, Payload: payload,
			})
		})
		if err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d orders, each with its message in table %s\n", orders, messageTable)

	relay, err := outbox.NewRelay(repo, pub, relayCfg)
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()

	// A real relay runs for good; this one stops when the table is drained.
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts, err := repo.Counts(ctx)
		if err != nil {
			stopRelay()
			return errors.Join(err, <-relayDone)
		}
		left := counts[outbox.StatusPending] + counts[outbox.StatusProcessing] + counts[outbox.StatusFailed]
		if left == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stopRelay()
			return errors.Join(fmt.Errorf("%d messages still unpublished", left), <-relayDone)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopRelay()
	if err := <-relayDone; err != nil {
		return err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("relay published %d messages; stream %s holds %d messages\n",
		relay.Stats().Published, streamName, info.State.Msgs)
	return nil
}
