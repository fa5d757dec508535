package watermill

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// DefaultTargetBroker is the target broker a [Publisher] writes messages
// for, and whose messages a [Subscriber] fans out, unless configured
// otherwise.
const DefaultTargetBroker = "watermill"

// ErrClosed is returned by a [Publisher] or [Subscriber] used after Close.
var ErrClosed = errors.New("watermill: closed")

// PublisherConfig configures a [Publisher].
type PublisherConfig struct {
	// TargetBroker is written into every message (outbox
	// Message.TargetBroker): a [Subscriber] with the same TargetBroker
	// consumes them, or an outbox relay with that TargetBroker moves them
	// to a broker. Default [DefaultTargetBroker].
	TargetBroker string
}

// Publisher is a Watermill message.Publisher that writes messages into a
// claimstore outbox table. See the package documentation.
type Publisher struct {
	repo   *outbox.Repository
	cfg    PublisherConfig
	tx     *gorm.DB
	closed *atomic.Bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher that adds messages through repo, a
// repository over the outbox table (see [Migrate]). Errors: an error
// wrapping [dao.ErrInvalidArgument] for a nil repo or a TargetBroker
// longer than [outbox.MaxBrokerLen] bytes.
func NewPublisher(repo *outbox.Repository, cfg PublisherConfig) (*Publisher, error) {
	if repo == nil {
		return nil, fmt.Errorf("watermill: new publisher: %w: nil repository", dao.ErrInvalidArgument)
	}
	if cfg.TargetBroker == "" {
		cfg.TargetBroker = DefaultTargetBroker
	}
	if len(cfg.TargetBroker) > outbox.MaxBrokerLen {
		return nil, fmt.Errorf("watermill: new publisher: %w: target broker is %d bytes, the limit is %d", dao.ErrInvalidArgument, len(cfg.TargetBroker), outbox.MaxBrokerLen)
	}
	return &Publisher{repo: repo, cfg: cfg, closed: new(atomic.Bool)}, nil
}

// WithTx returns a publisher that writes inside tx, an open GORM
// transaction (the argument of db.Transaction, or db.Begin()), so that the
// messages commit or roll back with the caller's other writes in tx. It
// shares the receiver's configuration and its closed state. A nil tx
// gives a publisher that writes on its own, as the receiver does without
// a transaction.
func (p *Publisher) WithTx(tx *gorm.DB) *Publisher {
	c := *p
	c.tx = tx
	return &c
}

// Publish adds msgs to the outbox for topic, in one or more INSERTs of up
// to 500 rows, all inside the publisher's transaction when it has one.
// Each Watermill message becomes an outbox message: UUID → MessageID
// (with the topic's digest, see [MessageID]),
// Metadata → Headers, Payload → Payload, topic → Topic, and the
// publisher's TargetBroker. The context of the first message (Watermill's
// message.Message.Context) bounds the writes.
//
// Errors: [ErrClosed] after Close; an error wrapping
// [dao.ErrInvalidArgument] for a nil message, an empty topic or UUID or a
// field over its size limit (see [outbox.Repository.Add]); one wrapping
// dao.ErrDuplicate when a UUID was already published for this target
// broker (on PostgreSQL that aborts the caller's transaction); the
// store's errors otherwise. Nothing is written when an error is returned
// without a transaction, except that a publish of more than 500 messages
// may have written its first INSERTs.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if len(msgs) == 0 {
		return nil
	}
	rows := make([]*outbox.Message, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("watermill: publish: %w: nil message", dao.ErrInvalidArgument)
		}
		if m.UUID == "" {
			return fmt.Errorf("watermill: publish: %w: message without a UUID", dao.ErrInvalidArgument)
		}
		rows[i] = toOutbox(topic, p.cfg.TargetBroker, m)
	}
	if err := p.repo.Add(msgs[0].Context(), p.tx, rows...); err != nil {
		return fmt.Errorf("watermill: publish to %q: %w", topic, err)
	}
	return nil
}

// Close makes the publisher (and every publisher WithTx derived from it)
// refuse further publishes; it holds no resource of its own, so it
// always returns nil.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	return nil
}

// toOutbox returns the outbox message of a Watermill message.
func toOutbox(topic, broker string, m *message.Message) *outbox.Message {
	var h outbox.Headers
	if len(m.Metadata) > 0 {
		h = outbox.Headers(maps.Clone(map[string]string(m.Metadata)))
	}
	return &outbox.Message{
		MessageID:    MessageID(m.UUID, topic),
		Topic:        topic,
		Payload:      m.Payload,
		Headers:      h,
		TargetBroker: broker,
	}
}

// MessageID returns the outbox MessageID of the Watermill message uuid
// published to topic: uuid, "@" and the first 16 hex digits of the
// SHA-256 of topic. Watermill lets one message (one UUID) be published to
// several topics, while the outbox keeps one message id once per target
// broker: with the topic's digest in it, the id is unique per topic, and
// a UUID published twice to one topic is refused as a duplicate.
func MessageID(uuid, topic string) string {
	return uuid + topicSuffix(topic)
}

func topicSuffix(topic string) string {
	h := sha256.Sum256([]byte(topic))
	return "@" + hex.EncodeToString(h[:8])
}

// UUID returns the Watermill UUID of an outbox message: its MessageID
// without the topic's suffix (see [MessageID]) when it has it, else the
// MessageID unchanged (a message not written by a [Publisher]).
func UUID(m *outbox.Message) string {
	return strings.TrimSuffix(m.MessageID, topicSuffix(m.Topic))
}

// toWatermill returns the Watermill message of an outbox message (or a
// delivery): [UUID] → UUID, Headers → Metadata, Payload → Payload.
func toWatermill(m *outbox.Message) *message.Message {
	wm := message.NewMessage(UUID(m), m.Payload)
	for k, v := range m.Headers {
		wm.Metadata.Set(k, v)
	}
	return wm
}
