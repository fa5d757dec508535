package watermill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// MaxTableLen is the longest message table name [Migrate] accepts: the
// delivery table's name, the message table's plus "_deliveries", must
// stay within the 63 bytes of [outbox.CheckTable].
const MaxTableLen = 63 - len("_deliveries")

// Tables names the three tables of a message table: the messages, the
// deliveries (one row per message and consumer group) and the consumer
// groups.
type Tables struct {
	// Messages is the outbox table a [Publisher] writes.
	Messages string
	// Deliveries holds one row per message and consumer group.
	Deliveries string
	// Groups lists the consumer groups of each topic.
	Groups string
}

// TablesOf returns the tables of the message table messages
// ([outbox.DefaultTable] when empty): messages, messages_deliveries and
// messages_groups. Errors: [dao.ErrInvalidArgument] for a name that
// [outbox.CheckTable] refuses or that is longer than [MaxTableLen].
func TablesOf(messages string) (Tables, error) {
	if messages == "" {
		messages = outbox.DefaultTable
	}
	if err := outbox.CheckTable(messages); err != nil {
		return Tables{}, err
	}
	if len(messages) > MaxTableLen {
		return Tables{}, fmt.Errorf("%w: table name %q is longer than %d bytes", dao.ErrInvalidArgument, messages, MaxTableLen)
	}
	return Tables{Messages: messages, Deliveries: messages + "_deliveries", Groups: messages + "_groups"}, nil
}

// Group is a consumer group of a topic: a row of the groups table. A
// [Subscriber] registers its group on a topic at its first Subscribe (or
// SubscribeInitialize); from then on the fan-out writes a delivery of
// every message of the topic for the group.
type Group struct {
	// ID is the surrogate primary key.
	ID int64 `gorm:"primaryKey;autoIncrement"`
	// Topic is the Watermill topic.
	Topic string `gorm:"size:255;not null;uniqueIndex:,composite:topic_group,priority:1"`
	// ConsumerGroup is the group's name.
	ConsumerGroup string `gorm:"size:191;not null;uniqueIndex:,composite:topic_group,priority:2"`
	// Backfilled is true once the messages of the topic written before
	// the group was registered have been copied to its deliveries.
	Backfilled bool `gorm:"not null"`
	// CreatedAt is when the group was registered.
	CreatedAt time.Time `gorm:"not null"`
}

// Migrate creates, if they do not exist, the message table named table
// ([outbox.DefaultTable] when empty) with [outbox.Migrate], its delivery
// table (the same shape, also with [outbox.Migrate]) and its groups table
// ([Group]), with their indexes. Running it again changes nothing.
//
// Errors: [dao.ErrInvalidArgument] for a bad table name (see
// [TablesOf]); the database's errors wrapped.
func Migrate(ctx context.Context, db *gorm.DB, table string) error {
	t, err := TablesOf(table)
	if err != nil {
		return fmt.Errorf("watermill: migrate: %w", err)
	}
	if err := outbox.Migrate(ctx, db, t.Messages); err != nil {
		return fmt.Errorf("watermill: migrate: %w", err)
	}
	if err := outbox.Migrate(ctx, db, t.Deliveries); err != nil {
		return fmt.Errorf("watermill: migrate: %w", err)
	}
	if err := db.WithContext(ctx).Table(t.Groups).AutoMigrate(&Group{}); err != nil {
		return fmt.Errorf("watermill: migrate: create table %s: %w", t.Groups, err)
	}
	return nil
}

// DeliveryKey returns the target_broker of the deliveries of topic for
// consumerGroup in the delivery table: "d:" and the first 40 hex digits of
// the SHA-256 of the group, a zero byte and the topic. A digest, because
// a group (up to 191 bytes) and a topic (up to 255) do not fit the 64
// bytes of the column; the group's name is kept in partition_key and the
// topic in topic.
func DeliveryKey(consumerGroup, topic string) string {
	h := sha256.New()
	h.Write([]byte(consumerGroup))
	h.Write([]byte{0})
	h.Write([]byte(topic))
	return deliveryKeyPrefix + hex.EncodeToString(h.Sum(nil))[:deliveryKeyDigits]
}

// The delivery key is deliveryKeyPrefix and the first deliveryKeyDigits
// hex digits of the hash (see [DeliveryKey]).
const (
	deliveryKeyPrefix = "d:"
	deliveryKeyDigits = 40
)
