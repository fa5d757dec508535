package watermill

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/outbox"
)

// LogPublisherConfig configures a [LogPublisher].
type LogPublisherConfig struct {
	// KeyMetadata names the metadata entry whose value is a message's
	// ordering key (its partition); a message without it is keyed by its
	// topic, so that a topic's messages keep their order. Default: none
	// (every message keyed by its topic).
	KeyMetadata string
}

// LogPublisher is a Watermill Publisher that appends messages to an
// outbox log ([outbox.Log]): one insert per message, in the transaction
// given to [LogPublisher.WithTx] when there is one. The message id is
// [MessageID] of the message's UUID and topic.
type LogPublisher struct {
	log    *outbox.Log
	cfg    LogPublisherConfig
	tx     *gorm.DB
	closed *atomic.Bool
}

var _ message.Publisher = (*LogPublisher)(nil)

// NewLogPublisher returns a publisher to log. Errors wrap
// [dao.ErrInvalidArgument] for a nil log.
func NewLogPublisher(log *outbox.Log, cfg LogPublisherConfig) (*LogPublisher, error) {
	if log == nil {
		return nil, fmt.Errorf("watermill: new log publisher: %w: nil log", dao.ErrInvalidArgument)
	}
	return &LogPublisher{log: log, cfg: cfg, closed: new(atomic.Bool)}, nil
}

// WithTx returns a publisher that writes inside tx, the caller's open
// GORM transaction; it shares p's Close.
func (p *LogPublisher) WithTx(tx *gorm.DB) *LogPublisher {
	c := *p
	c.tx = tx
	return &c
}

// Publish appends msgs to topic in one statement per 1,000 messages.
// Errors wrap [ErrClosed] after Close, or the log's error.
func (p *LogPublisher) Publish(topic string, msgs ...*message.Message) error {
	if p.closed.Load() {
		return fmt.Errorf("watermill: log publish: %w", ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	out := make([]*outbox.Message, len(msgs))
	ctx := context.Background()
	for i, m := range msgs {
		key := topic
		if p.cfg.KeyMetadata != "" {
			if k := m.Metadata.Get(p.cfg.KeyMetadata); k != "" {
				key = k
			}
		}
		var h outbox.Headers
		if len(m.Metadata) > 0 {
			h = outbox.Headers(maps.Clone(map[string]string(m.Metadata)))
		}
		if len(key) > outbox.MaxNameLen {
			sum := sha256.Sum256([]byte(key))
			key = hex.EncodeToString(sum[:])
		}
		out[i] = &outbox.Message{MessageID: MessageID(m.UUID, topic), Topic: topic, Payload: m.Payload, Headers: h, PartitionKey: key}
		if i == 0 && m.Context() != nil {
			ctx = m.Context()
		}
	}
	if err := p.log.Write(ctx, p.tx, out...); err != nil {
		return fmt.Errorf("watermill: log publish to %q: %w", topic, err)
	}
	return nil
}

// Close makes later Publish calls fail with [ErrClosed].
func (p *LogPublisher) Close() error {
	p.closed.Store(true)
	return nil
}

// LogSubscriberConfig configures a [LogSubscriber].
type LogSubscriberConfig struct {
	// ConsumerGroup names the group: the subscribers of one group share
	// the log's partitions, each partition read by one of them at a time
	// through the group's cursor; every group reads every message, with
	// no copy per group. Default "default".
	ConsumerGroup string
	// Leases keeps the partitions' leases; required.
	Leases driver.LeaseStore
	// LogTable names the log in the lease names (see
	// outbox.LogReaderConfig.LogTable).
	LogTable string
	// Batch is the most records read at once; default 100.
	Batch int
	// PollInterval is the pause after an empty read; default 50 ms.
	PollInterval time.Duration
	// Poll is read as PollInterval when PollInterval is zero.
	//
	// Deprecated: use PollInterval.
	Poll time.Duration
	// Lease is how long a partition stays with a subscriber that
	// stopped renewing; default 10 s (a closed subscriber hands its
	// partitions over at once).
	Lease time.Duration
	// LeaseTTL is read as Lease when Lease is zero.
	//
	// Deprecated: use Lease.
	LeaseTTL time.Duration
	// NackDelay is the pause before a nacked message is delivered again;
	// default 10 ms. The partition's later messages wait behind it.
	NackDelay time.Duration
	// Logger receives the subscriber's logs; default slog.Default().
	Logger *slog.Logger
}

// LogSubscriber is a Watermill Subscriber that reads an outbox log by
// cursor: a subscription to a topic reads, for its consumer group, the
// partitions whose lease it holds, and delivers each partition's
// messages one at a time in log order, waiting for each Ack; a Nack
// delivers the same message again after NackDelay. The group's cursor
// moves past a batch once every message of it was acked, in the
// transaction that reads the next batch. Delivery is at least once: a
// subscriber that stops mid-batch leaves the unacked rest, in order, to
// the next one.
type LogSubscriber struct {
	log *outbox.Log
	cfg LogSubscriberConfig

	mu     sync.Mutex
	closed bool
	cancel []context.CancelFunc
	wg     sync.WaitGroup
}

var _ message.Subscriber = (*LogSubscriber)(nil)

// NewLogSubscriber returns a subscriber of log. Errors wrap
// [dao.ErrInvalidArgument] for a nil log or lease store.
func NewLogSubscriber(log *outbox.Log, cfg LogSubscriberConfig) (*LogSubscriber, error) {
	if log == nil || cfg.Leases == nil {
		return nil, fmt.Errorf("watermill: new log subscriber: %w: nil log or lease store", dao.ErrInvalidArgument)
	}
	if cfg.ConsumerGroup == "" {
		cfg.ConsumerGroup = "default"
	}
	if cfg.Batch == 0 {
		cfg.Batch = 100
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, cfg.Poll)
	cfg.Lease = cmp.Or(cfg.Lease, cfg.LeaseTTL, 10*time.Second)
	if cfg.NackDelay == 0 {
		cfg.NackDelay = 10 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &LogSubscriber{log: log, cfg: cfg}, nil
}

// readerName is the cursor name of group's subscription to topic: both
// names, or a digest when they are too long for a cursor name.
func readerName(group, topic string) string {
	name := group + "|" + topic
	if len(name) > driver.MaxLeaseID {
		sum := sha256.Sum256([]byte(name))
		name = hex.EncodeToString(sum[:])
	}
	return name
}

// Subscribe reads topic for the subscriber's consumer group until ctx
// ends or the subscriber is closed, then closes the channel. Errors wrap
// [ErrClosed] after Close, or [dao.ErrInvalidArgument] for a bad
// configuration.
func (s *LogSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("watermill: log subscribe: %w", ErrClosed)
	}
	out := make(chan *message.Message)
	ctx, cancel := context.WithCancel(ctx)
	c, err := s.log.Consumer(outbox.LogReaderConfig{Reader: readerName(s.cfg.ConsumerGroup, topic), Leases: s.cfg.Leases,
		LogTable: s.cfg.LogTable, Lease: s.cfg.Lease, Batch: s.cfg.Batch, PollInterval: s.cfg.PollInterval, Topic: topic, Logger: s.cfg.Logger},
		func(ctx context.Context, part int, recs []outbox.LogRecord) (int, []outbox.LogDeadLetter, error) {
			return s.deliver(ctx, recs, out), nil, nil
		})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watermill: log subscribe to %q: %w", topic, err)
	}
	s.cancel = append(s.cancel, cancel)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		_ = c.Run(ctx)
	}()
	return out, nil
}

// deliver hands recs to out one at a time, waiting for each one's Ack
// and delivering a nacked one again, and returns how many were acked
// before ctx ended.
func (s *LogSubscriber) deliver(ctx context.Context, recs []outbox.LogRecord, out chan<- *message.Message) int {
	for i, rec := range recs {
		m, err := outbox.MessageOf(rec)
		if err != nil {
			s.cfg.Logger.Error("watermill: log subscriber: undecodable message, skipped", "message_id", rec.MessageID, "err", err)
			continue
		}
		for {
			wm := toWatermill(&m)
			// The message's context ends once it is acked or nacked.
			mctx, mcancel := context.WithCancel(ctx)
			wm.SetContext(mctx)
			select {
			case <-ctx.Done():
				mcancel()
				return i
			case out <- wm:
			}
			var nacked bool
			select {
			case <-ctx.Done():
			case <-wm.Acked():
			case <-wm.Nacked():
				nacked = true
			}
			mcancel()
			if ctx.Err() != nil {
				return i
			}
			if nacked {
				select {
				case <-ctx.Done():
					return i
				case <-time.After(s.cfg.NackDelay):
				}
				continue
			}
			break
		}
	}
	return len(recs)
}

// Close ends every subscription, waits for their channels to close and
// hands their partitions over.
func (s *LogSubscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, c := range s.cancel {
		c()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
