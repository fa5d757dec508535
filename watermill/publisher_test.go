package watermill_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	cswm "github.com/claimstore/claimstore/watermill"
)

var errRollback = errors.New("roll back")

// TestPublishInCallersTransaction: messages published with WithTx commit
// and roll back with the caller's transaction, and arrive with their
// UUID, metadata and payload unchanged.
func TestPublishInCallersTransaction(t *testing.T) {
	eachBackend(t, 4, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		tables := newTables(t, db)
		repo := repository(t, db, tables.Messages)
		pub := newPublisher(t, db, tables.Messages)
		sub := newSubscriber(t, db, tables.Messages, "g", cswm.SubscriberConfig{})
		if err := sub.SubscribeInitialize("orders"); err != nil {
			t.Fatal(err)
		}

		rolledBack := message.NewMessage(watermill.NewUUID(), []byte("never"))
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := pub.WithTx(tx).Publish("orders", rolledBack); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		if n, err := repo.Store().Count(ctx, dao.Criteria{}); err != nil || n != 0 {
			t.Fatalf("after rollback: %d messages, %v", n, err)
		}

		payload := make([]byte, 256)
		for i := range payload {
			payload[i] = byte(i)
		}
		sent := message.NewMessage(watermill.NewUUID(), payload)
		sent.Metadata.Set("trace", "abc-1")
		sent.Metadata.Set("name", "Zoë ✓")
		sent.Metadata.Set("empty", "")
		err = db.Transaction(func(tx *gorm.DB) error {
			return pub.WithTx(tx).Publish("orders", sent)
		})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := repo.Store().Find(ctx, dao.Query{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("after commit: %d messages, %v", len(rows), err)
		}
		if rows[0].MessageID != cswm.MessageID(sent.UUID, "orders") || cswm.UUID(&rows[0]) != sent.UUID || rows[0].TargetBroker != cswm.DefaultTargetBroker {
			t.Fatalf("stored message id %q, broker %q", rows[0].MessageID, rows[0].TargetBroker)
		}

		msgs, err := sub.Subscribe(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-msgs:
			got.Ack()
			if got.UUID != sent.UUID || string(got.Payload) != string(payload) || !maps.Equal(got.Metadata, sent.Metadata) || len(got.Metadata) != 3 {
				t.Fatalf("received %s %q %v, sent %s %v", got.UUID, got.Payload, got.Metadata, sent.UUID, sent.Metadata)
			}
		case <-ctx.Done():
			t.Fatal("nothing received")
		}
	})
}

// TestPublishRefusesBadInput: a UUID published twice to one topic is a
// duplicate (to another topic it is not), bad messages are invalid, and a
// closed publisher refuses to publish; none of them writes anything.
func TestPublishRefusesBadInput(t *testing.T) {
	eachBackend(t, 2, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		tables := newTables(t, db)
		repo := repository(t, db, tables.Messages)
		pub := newPublisher(t, db, tables.Messages)
		m := message.NewMessage(watermill.NewUUID(), []byte("x"))
		if err := pub.Publish("a", m); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish("b", m); err != nil {
			t.Fatalf("the same message to another topic: %v", err)
		}
		if err := pub.Publish("a", m); !errors.Is(err, dao.ErrDuplicate) {
			t.Fatalf("again to the same topic: %v, want ErrDuplicate", err)
		}
		for name, bad := range map[string]func() error{
			"nil message": func() error { return pub.Publish("a", nil) },
			"empty uuid":  func() error { return pub.Publish("a", message.NewMessage("", nil)) },
			"empty topic": func() error { return pub.Publish("", message.NewMessage(watermill.NewUUID(), nil)) },
		} {
			if err := bad(); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
			}
		}
		if err := pub.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish("a", message.NewMessage(watermill.NewUUID(), nil)); !errors.Is(err, cswm.ErrClosed) {
			t.Fatalf("after close: %v", err)
		}
		if n, err := repo.Store().Count(ctx, dao.Criteria{}); err != nil || n != 2 {
			t.Fatalf("%d messages, %v; want 2", n, err)
		}
	})
}
