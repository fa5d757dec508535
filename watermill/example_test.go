package watermill_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// Publishing in the business transaction and consuming as a consumer
// group, on an SQLite file.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, _ := os.MkdirTemp("", "watermill-example")
	defer os.RemoveAll(dir)
	db, _ := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "app.db")))
	_ = cswm.Migrate(ctx, db, outbox.DefaultTable)
	store, _ := sqlstore.New[outbox.Message](db)
	repo, _ := outbox.New(store)
	pub, _ := cswm.NewPublisher(repo, cswm.PublisherConfig{})
	sub, _ := cswm.NewSubscriber(db, cswm.SubscriberConfig{ConsumerGroup: "billing", PollInterval: 10 * time.Millisecond})
	defer sub.Close()
	msgs, _ := sub.Subscribe(ctx, "orders.created")

	_ = db.Transaction(func(tx *gorm.DB) error { // the business writes on tx, then:
		msg := message.NewMessage("4b1d7c1e-8f61-4a4e-9a59-3f0c2c3f1d42", []byte(`{"order":42}`))
		msg.Metadata.Set("customer", "c-7")
		return pub.WithTx(tx).Publish("orders.created", msg)
	})

	m := <-msgs
	fmt.Println(m.UUID, m.Metadata.Get("customer"), string(m.Payload))
	m.Ack()
	// Output: 4b1d7c1e-8f61-4a4e-9a59-3f0c2c3f1d42 c-7 {"order":42}
}
