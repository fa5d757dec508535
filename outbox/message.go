package outbox

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Status is the lifecycle state of a [Message].
type Status string

// The states of a message. A message is written pending; a relay claims it
// (processing), then marks it published, or failed (to be retried after its
// next retry time), or abandoned once its retries are used up.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusPublished  Status = "published"
	StatusFailed     Status = "failed"
	StatusAbandoned  Status = "abandoned"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusPending, StatusProcessing, StatusPublished, StatusFailed, StatusAbandoned}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusProcessing, StatusPublished, StatusFailed, StatusAbandoned:
		return true
	}
	return false
}

// NoRetry is a [Message.MaxRetries] value for a message that must not be
// retried: its first failure abandons it. (A zero MaxRetries takes the
// repository's default.)
const NoRetry = -1

// Column size limits of the message table, in bytes.
const (
	MaxMessageIDLen = 191 // message_id: fits a unique index under utf8mb4 on MySQL
	MaxTopicLen     = 255
	MaxNameLen      = 191 // type, partition_key, correlation_id, causation_id, locked_by
	MaxBrokerLen    = 64  // target_broker
	MaxErrorLen     = 2000
)

// Message is one outbox row: a message to publish to a broker, written in
// the same transaction as the business change it announces. It is a GORM
// model; the default table name is outbox_messages (see [DefaultTable]), and
// a repository may use any other table of the same shape.
type Message struct {
	// ID is the surrogate primary key, assigned on insert.
	ID int64 `gorm:"primaryKey;autoIncrement"`
	// MessageID is the idempotency key, unique per TargetBroker. The relay
	// hands it to the broker (Nats-Msg-Id on JetStream) so that a message
	// published twice is stored once.
	MessageID string `gorm:"size:191;not null;uniqueIndex:,composite:msgid_broker,priority:1"`
	// Topic is where the message goes: a subject on NATS, a topic elsewhere.
	Topic string `gorm:"size:255;not null"`
	// Type names the kind of event, e.g. "order.created".
	Type string `gorm:"size:191;not null"`
	// Payload is the message body, opaque to the outbox.
	Payload []byte
	// Headers are sent with the message as broker headers.
	Headers Headers
	// TargetBroker names the broker a relay publishes to; a relay claims only
	// the messages of its own target broker.
	TargetBroker string `gorm:"size:64;not null;uniqueIndex:,composite:msgid_broker,priority:2"`
	// PartitionKey orders or shards messages on brokers that support it; it
	// is sent as the Outbox-Partition-Key header on NATS.
	PartitionKey string `gorm:"size:191;not null"`
	// Priority: higher is claimed first; messages of equal priority are
	// claimed oldest first.
	Priority int `gorm:"not null"`
	// Status is the lifecycle state.
	Status Status `gorm:"size:16;not null"`
	// RetryCount is the number of failed publish attempts so far.
	RetryCount int `gorm:"not null"`
	// MaxRetries is the number of retries allowed after the first failed
	// attempt; once RetryCount would exceed it the message is abandoned.
	MaxRetries int `gorm:"not null"`
	// NextRetryAt is when a failed message becomes claimable again.
	NextRetryAt *time.Time
	// LockedBy is the worker that claimed the message last. It is kept after
	// the worker marks the message, as a record of who handled it.
	LockedBy string `gorm:"size:191;not null"`
	// LockedUntil is the end of the current claim's lease; NULL when the
	// message is not being processed.
	LockedUntil *time.Time
	// LastError is the error of the last failed attempt, kept when the
	// message is abandoned.
	LastError string `gorm:"size:2000;not null"`
	// CreatedAt is when the message was added.
	CreatedAt time.Time `gorm:"not null"`
	// PublishedAt is when the broker acknowledged the message.
	PublishedAt *time.Time
	// LastProcessedAt is when a worker last claimed or marked the message.
	LastProcessedAt *time.Time
	// CorrelationID ties the message to a business flow; sent as a header.
	CorrelationID string `gorm:"size:191;not null"`
	// CausationID names the message or command that caused this one; sent
	// as a header.
	CausationID string `gorm:"size:191;not null"`
}

// DefaultTable is the table name of [Message] when no other is given.
const DefaultTable = "outbox_messages"

// TableName returns [DefaultTable]; GORM and every claimstore adapter use it
// unless a store is given another table name.
func (Message) TableName() string { return DefaultTable }

// Headers are string key/value pairs sent with a message. They are stored
// as a JSON object in a text column.
type Headers map[string]string

// Value encodes h as a JSON object, or NULL when h is nil. It implements
// [driver.Valuer].
func (h Headers) Value() (driver.Value, error) {
	if h == nil {
		return nil, nil
	}
	b, err := json.Marshal(map[string]string(h))
	if err != nil {
		return nil, fmt.Errorf("outbox: encode headers: %w", err)
	}
	return string(b), nil
}

// Scan decodes a JSON object (string or []byte) or NULL into h. It
// implements [database/sql.Scanner].
func (h *Headers) Scan(src any) error {
	var b []byte
	switch x := src.(type) {
	case nil:
		*h = nil
		return nil
	case string:
		b = []byte(x)
	case []byte:
		b = x
	default:
		return fmt.Errorf("outbox: scan headers from %T", src)
	}
	if len(b) == 0 {
		*h = nil
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("outbox: decode headers: %w", err)
	}
	*h = m
	return nil
}

// GormDataType makes GORM store Headers in a text column.
func (Headers) GormDataType() string { return "string" }
