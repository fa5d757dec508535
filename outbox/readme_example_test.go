package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/testutil/readme"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// Order is the business row of the README's outbox example.
type Order struct {
	ID    int64
	Total int64
}

// placeOrder is the README's outbox example: an order and its message in
// one transaction, then a relay that publishes the message to JetStream
// until ctx ends.
func placeOrder(ctx context.Context, dsn, natsURL string) error {
	db, err := sqlstore.Open(ctx, "postgres", dsn)
	if err != nil {
		return err
	}
	if err := db.WithContext(ctx).AutoMigrate(&Order{}); err != nil {
		return err
	}
	if err := outbox.Migrate(ctx, db, outbox.DefaultTable); err != nil {
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

	order := Order{Total: 4200}
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&order).Error; err != nil { // the business write
			return err
		}
		payload, err := json.Marshal(order)
		if err != nil {
			return err
		}
		return repo.Add(ctx, tx, &outbox.Message{
			MessageID: fmt.Sprintf("order-%d-created", order.ID),
			Topic:     "orders.created", Payload: payload,
		})
	})
	if err != nil {
		return err
	}

	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	// The relay may publish a message again for up to its retry horizon
	// (21 min 46 s with the defaults): the stream must remember message
	// ids that long to store a repeat only once.
	cfg := outbox.RelayConfig{}
	horizon := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), cfg)
	pub, err := natspub.New(nc, natspub.Config{MinDuplicateWindow: horizon})
	if err != nil {
		return err
	}
	// Every subject the relay publishes must belong to a stream.
	_, err = pub.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: horizon,
	})
	if err != nil {
		return err
	}
	relay, err := outbox.NewRelay(repo, pub, cfg)
	if err != nil {
		return err
	}
	return relay.Run(ctx) // stops claiming on cancel, finishes or releases its batch
}

// The outbox on PostgreSQL and a NATS server (compiled, not run: it needs
// both servers).
func Example_postgres() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	err := placeOrder(ctx, "postgres://postgres@127.0.0.1:5432/test", nats.DefaultURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// The README shows placeOrder and Order exactly as this file defines them.
func TestREADMEOutboxSnippet(t *testing.T) {
	readme.Holds(t, "../README.md", "readme_example_test.go", "type Order struct", "func placeOrder(")
}
