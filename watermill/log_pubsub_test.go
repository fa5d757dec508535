package watermill_test

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// logFeatures are what the LogPublisher and LogSubscriber promise.
var logFeatures = tests.Features{
	// Every group reads the whole log through its own cursor; the
	// subscribers of one group share the partitions.
	ConsumerGroups: true,
	// The log is a table: a group's cursor stays where it was.
	Persistent: true,
	// At least once: a subscriber that stops mid-batch leaves the unacked
	// rest to the next one.
	ExactlyOnceDelivery: false,
	// Each partition is read by one subscriber of a group at a time, one
	// message at a time, a nacked message delivered again before the
	// next; a topic's messages share one partition unless keyed.
	GuaranteedOrder:                     true,
	GuaranteedOrderWithSingleSubscriber: true,
	// A new subscriber of a group reads from the group's cursor, not from
	// the oldest message kept.
	NewSubscriberReceivesOldMessages: false,
	ContextPreserved:                 false,
	ForceShort:                       os.Getenv("CLAIMSTORE_WATERMILL_LONG") == "",
}

// TestLogPubSub runs Watermill's universal Pub/Sub suite on the outbox log,
// with order declared, on PostgreSQL and SQLite (MySQL and MariaDB do not
// offer the log).
func TestLogPubSub(t *testing.T) {
	for _, b := range []testdb.Backend{{Name: "postgres", Open: testdb.Postgres}, {Name: "sqlite", Open: testdb.SQLite}} {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			sqlDB.SetMaxOpenConns(16)
			lg, err := outbox.NewLog(sqlstoretest.Log(t, db), 8)
			if err != nil {
				t.Fatal(err)
			}
			leases := sqlstoretest.Leases(t, db)
			constructor := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
				return newLogPubSub(t, db, lg, leases, group)
			}
			tests.TestPubSub(t, logFeatures,
				func(t *testing.T) (message.Publisher, message.Subscriber) { return constructor(t, "") },
				constructor)
		})
	}
}

func newLogPubSub(t *testing.T, _ *gorm.DB, lg *outbox.Log, leases driver.LeaseStore, group string) (message.Publisher, message.Subscriber) {
	t.Helper()
	pub, err := cswm.NewLogPublisher(lg, cswm.LogPublisherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cswm.NewLogSubscriber(lg, cswm.LogSubscriberConfig{ConsumerGroup: group, Leases: leases,
		PollInterval: 10 * time.Millisecond, Lease: 3 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The universal suite leaves some subscribers open: closed here, their
	// subscriptions end with the test that made them.
	t.Cleanup(func() { _ = sub.Close() })
	return pub, sub
}
