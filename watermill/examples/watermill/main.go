// Command watermill runs a Watermill application on claimstore's outbox:
// orders are written each in one transaction with its message (the
// Publisher bound to the transaction), two consumer groups (billing and
// shipping) each handle every message through Watermill's Router, with
// two subscribers in the billing group sharing the work, and an outbox
// relay forwards the messages of a second target broker to another
// Watermill publisher (an in-process Go channel here; RabbitMQ, Kafka or
// Redis Streams in a real service).
//
// SQLite in a temporary directory by default; -backend postgres or mysql
// uses the local server ($CLAIMSTORE_POSTGRES_DSN, $CLAIMSTORE_MYSQL_DSN,
// or -dsn) and drops its tables at the end:
//
//	cd watermill && go run ./examples/watermill
//	cd watermill && go run ./examples/watermill -backend postgres -orders 50
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/mysql"
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// Order is the business row.
type Order struct {
	ID       int64
	Customer string `gorm:"size:64"`
}

const (
	orderTable   = "example_wm_orders"
	messageTable = "example_wm_outbox"
	topic        = "orders.created"
	// forwarded is the target broker of the messages the relay forwards.
	forwarded = "forward"
)

func main() {
	backend := flag.String("backend", "sqlite", "sqlite, postgres or mysql")
	dsn := flag.String("dsn", "", "database DSN (default: a temporary SQLite file, or the local server)")
	orders := flag.Int("orders", 20, "orders to write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := run(ctx, *backend, *dsn, *orders); err != nil {
		log.Fatal("watermill example: ", err)
	}
}

func run(ctx context.Context, backend, dsn string, orders int) (err error) {
	if dsn == "" {
		switch backend {
		case "sqlite":
			dir, err := os.MkdirTemp("", "claimstore-watermill")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			dsn = sqlstore.SQLiteDSN(filepath.Join(dir, "app.db"))
		case "postgres":
			dsn = env("CLAIMSTORE_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		case "mysql", "mariadb":
			dsn = env("CLAIMSTORE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC")
		}
	}
	db, err := sqlstore.Open(ctx, backend, dsn)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
		sqlDB.SetMaxOpenConns(8)
	}
	tables, err := cswm.TablesOf(messageTable)
	if err != nil {
		return err
	}
	defer func() { // the example leaves nothing behind
		for _, t := range []string{orderTable, tables.Messages, tables.Deliveries, tables.Groups} {
			err = errors.Join(err, db.Migrator().DropTable(t))
		}
	}()
	if err := db.Table(orderTable).AutoMigrate(&Order{}); err != nil {
		return err
	}
	if err := cswm.Migrate(ctx, db, messageTable); err != nil {
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

	// Consumer groups: register them before publishing (a group registered
	// later would start from the oldest message in the table anyway).
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	newSub := func(group string) (*cswm.Subscriber, error) {
		return cswm.NewSubscriber(db, cswm.SubscriberConfig{Table: messageTable, ConsumerGroup: group, PollInterval: 20 * time.Millisecond, Logger: logger})
	}
	billing1, err := newSub("billing")
	if err != nil {
		return err
	}
	billing2, err := newSub("billing")
	if err != nil {
		return err
	}
	shipping, err := newSub("shipping")
	if err != nil {
		return err
	}
	for _, s := range []*cswm.Subscriber{billing1, shipping} {
		if err := s.SubscribeInitialize(topic); err != nil {
			return err
		}
	}

	// Each order and its message in one transaction.
	pub, err := cswm.NewPublisher(repo, cswm.PublisherConfig{})
	if err != nil {
		return err
	}
	fwd, err := cswm.NewPublisher(repo, cswm.PublisherConfig{TargetBroker: forwarded})
	if err != nil {
		return err
	}
	for i := range orders {
		err := db.Transaction(func(tx *gorm.DB) error {
			o := Order{Customer: "customer-" + strconv.Itoa(i)}
			if err := tx.Table(orderTable).Create(&o).Error; err != nil {
				return err
			}
			msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf(`{"order":%d}`, o.ID)))
			msg.Metadata.Set("customer", o.Customer)
			if err := pub.WithTx(tx).Publish(topic, msg); err != nil {
				return err
			}
			// The same event, for the relay to forward to another broker.
			return fwd.WithTx(tx).Publish(topic, msg)
		})
		if err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d orders, each with its message in the same transaction\n", orders)

	// Handlers on Watermill's Router, one per subscriber.
	var mu sync.Mutex
	handled := map[string]map[string]int{"billing": {}, "shipping": {}}
	done := make(chan struct{})
	handler := func(group string) message.NoPublishHandlerFunc {
		return func(m *message.Message) error {
			mu.Lock()
			defer mu.Unlock()
			handled[group][m.UUID]++
			if len(handled["billing"]) == orders && len(handled["shipping"]) == orders {
				select {
				case <-done:
				default:
					close(done)
				}
			}
			return nil
		}
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	router.AddConsumerHandler("billing-1", topic, billing1, handler("billing"))
	router.AddConsumerHandler("billing-2", topic, billing2, handler("billing"))
	router.AddConsumerHandler("shipping", topic, shipping, handler("shipping"))

	// The relay forwards the "forward" messages to a Watermill publisher.
	channel := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	forwardedMsgs, err := channel.Subscribe(ctx, topic)
	if err != nil {
		return err
	}
	rp, err := cswm.NewRelayPublisher(channel, cswm.RelayPublisherConfig{})
	if err != nil {
		return err
	}
	relay, err := outbox.NewRelay(repo, rp, outbox.RelayConfig{TargetBroker: forwarded, PollInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		return err
	}
	rctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(rctx) })
	wg.Go(func() { _ = router.Run(rctx) })

	got := map[string]bool{}
	for len(got) < orders {
		select {
		case m := <-forwardedMsgs:
			got[m.UUID] = true
			m.Ack()
		case <-ctx.Done():
			return fmt.Errorf("forwarded %d of %d: %w", len(got), orders, ctx.Err())
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("handled billing %d, shipping %d of %d: %w", len(handled["billing"]), len(handled["shipping"]), orders, ctx.Err())
	}
	stopAll()
	wg.Wait()
	_ = router.Close()
	for _, s := range []*cswm.Subscriber{billing1, billing2, shipping} {
		_ = s.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range []string{"billing", "shipping"} {
		twice := 0
		for _, n := range handled[g] {
			if n > 1 {
				twice++
			}
		}
		fmt.Printf("%s handled %d of %d orders (%d more than once)\n", g, len(handled[g]), orders, twice)
	}
	fmt.Printf("the relay forwarded %d of %d messages to the Go channel publisher\n", len(got), orders)
	return nil
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
