package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/argerr"
)

// Errors of the log mode, the driver's sentinels under this package's
// names.
var (
	// ErrCursorBehind: retention deleted records a reader has not read.
	ErrCursorBehind = driver.ErrCursorBehind
	// ErrLogRewound: the database's transaction counter went below a
	// reader's cursor (a restored dump); the reader stops and says so.
	ErrLogRewound = driver.ErrLogRewound
	// ErrCursorFenced: another reader holds the partition in a later
	// term.
	ErrCursorFenced = driver.ErrCursorFenced
)

// LogStore is the store of an ordered log (sqlstore.NewLog).
type LogStore = driver.LogStore

// LogRecord is one message read from the log.
type LogRecord = driver.LogRecord

// LogCursor is where one reader is in one partition.
type LogCursor = driver.LogCursor

// LogDeadLetter is a record a reader gave up on.
type LogDeadLetter = driver.LogDeadLetter

// MaxLogPartitions is the most partitions a [Log] may have.
const MaxLogPartitions = 4096

// Log is the outbox's log mode: an append-only message table written once
// per message, in the caller's transaction, and read in commit order per
// partition by readers that keep a cursor each (see [Log.Consume] and
// [LogRelay]). Messages hash by their PartitionKey to one of N
// partitions, so each key's messages stay in order while N readers run in
// parallel. Every writer and reader of one log must use the same N:
// changing it moves keys between partitions.
//
// Compared with the row-status outbox ([Repository], [Relay]), a message
// costs one insert and no write after it, and leaves in the order it was
// committed, key by key; but it has no per-message state to inspect or
// requeue, and a message the broker keeps refusing goes to a dead-letter
// table (or stops its partition) rather than waiting for its retries.
type Log struct {
	store LogStore
	parts int
	now   func() time.Time
}

// NewLog returns the log over store with partitions partitions (1 to
// [MaxLogPartitions]). Errors wrap [dao.ErrInvalidArgument] for a nil
// store or a partition count out of range.
func NewLog(store LogStore, partitions int) (*Log, error) {
	if store == nil {
		return nil, fmt.Errorf("outbox: log: %w: nil store", dao.ErrInvalidArgument)
	}
	if partitions < 1 || partitions > MaxLogPartitions {
		return nil, fmt.Errorf("outbox: log: %w: %d partitions (1 to %d)", dao.ErrInvalidArgument, partitions, MaxLogPartitions)
	}
	return &Log{store: store, parts: partitions, now: time.Now}, nil
}

// Partitions returns the log's number of partitions.
func (l *Log) Partitions() int { return l.parts }

// Store returns the log's store.
func (l *Log) Store() LogStore { return l.store }

// PartitionOf returns the partition of key: FNV-1a of the key modulo the
// number of partitions.
func (l *Log) PartitionOf(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(l.parts))
}

// Write appends msgs to the log inside tx, the caller's open GORM
// transaction, so that they commit or roll back with the business
// change; with a nil tx in a transaction of their own. Each message's
// partition comes from its PartitionKey, or from its MessageID when the
// key is empty (such messages are in no order relative to each other).
// Only MessageID, Topic, Type (sent as the Outbox-Type header), Payload,
// Headers, PartitionKey, CorrelationID, CausationID and CreatedAt are
// kept; Priority and the processing fields are ignored. CreatedAt
// defaults to now. Errors wrap [dao.ErrInvalidArgument] for a nil
// message, an empty MessageID or Topic or a field over its size, or the
// store's error.
func (l *Log) Write(ctx context.Context, tx *gorm.DB, msgs ...*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := l.now().UTC()
	recs := make([]driver.LogRecord, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("outbox: log write: %w: nil message", dao.ErrInvalidArgument)
		}
		rec, err := l.record(m, now)
		if err != nil {
			return fmt.Errorf("outbox: log write: %w", err)
		}
		recs[i] = rec
	}
	var txArg any
	if tx != nil {
		txArg = tx
	}
	if err := l.store.Append(ctx, txArg, recs); err != nil {
		return fmt.Errorf("outbox: log write: %w", err)
	}
	return nil
}

func (l *Log) record(m *Message, now time.Time) (driver.LogRecord, error) {
	if m.MessageID == "" || m.Topic == "" {
		return driver.LogRecord{}, argerr.Errorf("message %q: empty message id or topic", m.MessageID)
	}
	for _, c := range []struct {
		name, v string
		max     int
	}{
		{"message id", m.MessageID, MaxMessageIDLen}, {"topic", m.Topic, MaxTopicLen},
		{"partition key", m.PartitionKey, MaxNameLen},
	} {
		if err := checkLen(c.name, c.v, c.max); err != nil {
			return driver.LogRecord{}, err
		}
	}
	h := m.Headers
	if m.Type != "" || m.CorrelationID != "" || m.CausationID != "" {
		h = make(Headers, len(m.Headers)+3)
		for k, v := range m.Headers {
			h[k] = v
		}
		for k, v := range map[string]string{logHeaderType: m.Type, logHeaderCorrelation: m.CorrelationID, logHeaderCausation: m.CausationID} {
			if v != "" {
				h[k] = v
			}
		}
	}
	var hb []byte
	if h != nil {
		var err error
		if hb, err = json.Marshal(map[string]string(h)); err != nil {
			return driver.LogRecord{}, argerr.Errorf("message %q: headers: %v", m.MessageID, err)
		}
	}
	key := m.PartitionKey
	part := l.PartitionOf(cmp.Or(key, m.MessageID))
	created := now
	if !m.CreatedAt.IsZero() {
		created = m.CreatedAt.UTC()
	}
	return driver.LogRecord{Partition: part, MessageID: m.MessageID, Topic: m.Topic, Key: key, Payload: m.Payload, Headers: hb, CreatedAt: created}, nil
}

// Headers under which a log record keeps the message fields the log has
// no column for.
const (
	logHeaderType        = "Outbox-Type"
	logHeaderCorrelation = "Outbox-Correlation-Id"
	logHeaderCausation   = "Outbox-Causation-Id"
)

// MessageOf returns rec as a [Message] for a [Publisher]: MessageID,
// Topic, Payload, Headers, PartitionKey, CreatedAt, and Type,
// CorrelationID and CausationID from their headers. A record whose
// headers are not a JSON object of strings is an error.
func MessageOf(rec LogRecord) (Message, error) {
	m := Message{MessageID: rec.MessageID, Topic: rec.Topic, Payload: rec.Payload, PartitionKey: rec.Key, CreatedAt: rec.CreatedAt, Status: StatusProcessing}
	if rec.Headers != nil {
		if err := m.Headers.Scan(rec.Headers); err != nil {
			return Message{}, err
		}
		m.Type, m.CorrelationID, m.CausationID = m.Headers[logHeaderType], m.Headers[logHeaderCorrelation], m.Headers[logHeaderCausation]
		delete(m.Headers, logHeaderType)
		delete(m.Headers, logHeaderCorrelation)
		delete(m.Headers, logHeaderCausation)
	}
	return m, nil
}
