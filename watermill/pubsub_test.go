package watermill_test

import (
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"gorm.io/gorm"

	cswm "github.com/claimstore/claimstore/watermill"
)

// Features are what the Publisher and Subscriber promise, as Watermill's
// universal suite reads them.
var features = tests.Features{
	// Every consumer group sees every message; the subscribers of one
	// group share them.
	ConsumerGroups: true,
	// Messages are rows of the database: a new subscriber of a group
	// receives what the group has not consumed.
	Persistent: true,
	// At least once: a message whose ack mark is lost, or whose handler
	// outlasts the lease, is delivered again.
	ExactlyOnceDelivery: false,
	// No order: the subscribers of a group run in parallel, batches of
	// one subscriber are claimed oldest first, but a nacked message comes
	// back after later ones.
	GuaranteedOrder:                     false,
	GuaranteedOrderWithSingleSubscriber: false,
	// A new subscriber of a group does not receive what the group already
	// consumed (a new group does start from the oldest message kept).
	NewSubscriberReceivesOldMessages: false,
	// The context of a published message is not stored.
	ContextPreserved: false,
	// The suite's long form (thousands of messages per test) runs with
	// CLAIMSTORE_WATERMILL_LONG=1; CI runs the short form.
	ForceShort: os.Getenv("CLAIMSTORE_WATERMILL_LONG") == "",
}

// TestPubSub runs Watermill's universal Pub/Sub suite on PostgreSQL,
// MySQL/MariaDB and SQLite.
func TestPubSub(t *testing.T) {
	eachBackend(t, 8, func(t *testing.T, db *gorm.DB) {
		tables := newTables(t, db)
		constructor := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return newPublisher(t, db, tables.Messages), newSubscriber(t, db, tables.Messages, group, cswm.SubscriberConfig{})
		}
		tests.TestPubSub(t, features,
			func(t *testing.T) (message.Publisher, message.Subscriber) { return constructor(t, "") },
			constructor)
	})
}
