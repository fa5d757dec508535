package watermill

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// Metadata keys the relay's publisher adds to a message for the outbox
// fields that have no place in a Watermill message, when they are set and
// the message's headers do not already hold the key. They are the header
// names package outbox/natspub uses on NATS.
const (
	MetadataType          = "Outbox-Type"
	MetadataCorrelationID = "Outbox-Correlation-Id"
	MetadataCausationID   = "Outbox-Causation-Id"
	MetadataPartitionKey  = "Outbox-Partition-Key"
)

// RelayPublisher is an [outbox.Publisher] that publishes through a
// Watermill message.Publisher, so that an [outbox.Relay] moves outbox
// messages to any broker Watermill supports. Make it with
// [NewRelayPublisher].
type RelayPublisher struct {
	pub message.Publisher
	cfg RelayPublisherConfig
}

// RelayPublisherConfig configures a [RelayPublisher].
type RelayPublisherConfig struct {
	// MaxPending is the most messages of one batch published at once,
	// each with its own call of the Watermill publisher (which must be
	// safe for concurrent use, as Watermill's publishers are); default 1.
	// A publisher that waits for the broker's confirmation of every
	// message (watermill-amqp with Publish.ConfirmDelivery) publishes one
	// message per round trip, so a batch of 100 takes 100 round trips
	// with MaxPending 1; give such a publisher a channel or connection
	// pool at least this large (watermill-amqp: Publish.ChannelPoolSize).
	// With MaxPending above 1 the messages of a batch reach the broker in
	// any order. The name is natspub.Config.MaxPending's: publishes not
	// yet acknowledged.
	MaxPending int
	// Concurrency is read as MaxPending when MaxPending is zero.
	//
	// Deprecated: use MaxPending. Concurrency names a dispatch worker's
	// handler slots.
	Concurrency int
}

var _ outbox.Publisher = (*RelayPublisher)(nil)

// NewRelayPublisher returns an [outbox.Publisher] over pub. Each outbox
// message becomes a Watermill message published to its Topic: UUID = the
// message's [UUID] (its MessageID, without the topic's digest that a
// [Publisher] adds), so that consumers and brokers that drop duplicates
// by message id keep one copy of a message the relay published twice;
// Metadata = its Headers plus the Metadata* keys for Type, CorrelationID,
// CausationID and PartitionKey when set; Payload unchanged. The
// message's context is the relay's publish context.
//
// What "acknowledged" means is pub's: a publisher that returns before the
// broker stored the message (watermill-amqp without
// Publish.ConfirmDelivery, for one) can lose a message the relay then
// marks published. Errors: an error wrapping [dao.ErrInvalidArgument]
// for a nil pub.
func NewRelayPublisher(pub message.Publisher, cfg RelayPublisherConfig) (*RelayPublisher, error) {
	if pub == nil {
		return nil, fmt.Errorf("watermill: new relay publisher: %w: nil publisher", dao.ErrInvalidArgument)
	}
	if cfg.MaxPending < 0 || cfg.Concurrency < 0 {
		return nil, fmt.Errorf("watermill: new relay publisher: %w: negative max pending %d (concurrency %d)", dao.ErrInvalidArgument, cfg.MaxPending, cfg.Concurrency)
	}
	cfg.MaxPending = cmp.Or(cfg.MaxPending, cfg.Concurrency, 1)
	return &RelayPublisher{pub: pub, cfg: cfg}, nil
}

// Publish publishes msgs, up to MaxPending at once, each with one call
// of the Watermill publisher, and returns its error for each (nil when
// the publisher returned nil). Once ctx ends the messages not yet started
// are not published and get an error wrapping ctx.Err(). It implements
// [outbox.Publisher].
func (p *RelayPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	sem := make(chan struct{}, p.cfg.MaxPending)
	var wg sync.WaitGroup
	for i := range msgs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			for j := i; j < len(msgs); j++ {
				errs[j] = fmt.Errorf("watermill: relay publish: %w", err)
			}
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = p.publish(ctx, &msgs[i])
		})
	}
	wg.Wait()
	return errs
}

// publish publishes one message.
func (p *RelayPublisher) publish(ctx context.Context, m *outbox.Message) error {
	wm := toWatermill(m)
	for k, v := range map[string]string{
		MetadataType: m.Type, MetadataCorrelationID: m.CorrelationID,
		MetadataCausationID: m.CausationID, MetadataPartitionKey: m.PartitionKey,
	} {
		if _, ok := wm.Metadata[k]; !ok && v != "" {
			wm.Metadata.Set(k, v)
		}
	}
	wm.SetContext(ctx)
	if err := p.pub.Publish(m.Topic, wm); err != nil {
		return fmt.Errorf("watermill: relay publish %q to %q: %w", m.MessageID, m.Topic, err)
	}
	return nil
}
