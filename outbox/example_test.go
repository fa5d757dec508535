package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "github.com/claimstore/claimstore/adapters/sqlite"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// The outbox in use: a message added in the business transaction, and a
// relay that publishes it to NATS JetStream (here an embedded server and an
// SQLite file, so the example needs nothing installed).
func Example() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, _ := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "app.db")))
	_ = outbox.Migrate(ctx, db, outbox.DefaultTable)
	store, _ := sqlstore.New[outbox.Message](db)
	repo, _ := outbox.New(store)
	_ = db.Transaction(func(tx *gorm.DB) error { // the business writes on tx, then:
		return repo.Add(ctx, tx, &outbox.Message{MessageID: "order-42-created", Topic: "orders.created", Payload: []byte(`{"order":42}`)})
	})

	srv, _ := natsembed.Start(natsembed.Options{StoreDir: dir})
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, _ := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	pub, _ := natspub.New(nc, natspub.Config{})
	relay, _ := outbox.NewRelay(repo, pub, outbox.RelayConfig{PollInterval: 10 * time.Millisecond})
	go relay.Run(ctx)
	for relay.Stats().Published == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	msg, _ := stream.GetMsg(ctx, 1)
	fmt.Println(msg.Subject, msg.Header.Get("Nats-Msg-Id"), string(msg.Data))
	// Output: orders.created order-42-created {"order":42}
}
