package watermill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/batchloop"
	"github.com/claimstore/claimstore/internal/retry"
	"github.com/claimstore/claimstore/outbox"
)

// Subscriber defaults.
const (
	DefaultBatchSize       = 100
	DefaultFanOutBatchSize = 500
	DefaultPollInterval    = 100 * time.Millisecond
	DefaultMaxPollInterval = time.Second
	DefaultWriteTimeout    = 10 * time.Second
)

// DefaultMarkTimeout is DefaultWriteTimeout.
//
// Deprecated: use DefaultWriteTimeout.
const DefaultMarkTimeout = DefaultWriteTimeout

// The retries of the subscriber's store operations outside the batch loop
// (registering a group, copying and fanning out messages): up to
// storeTries tries while the error is one a retry can cure
// (dao.IsRetryable), the waits between them doubling up to storeWait.
const (
	storeTries = 20
	storeWait  = 500 * time.Millisecond
)

// RegisterTimeout bounds [Subscriber.SubscribeInitialize], which has no
// context of its caller: one minute.
const RegisterTimeout = time.Minute

// ErrNacked is the error kept as last_error of a delivery its handler
// nacked.
var ErrNacked = errors.New("watermill: message nacked by its handler")

// Column names of the message, delivery and group tables.
const (
	colID            = "id"
	colTopic         = "topic"
	colTargetBroker  = "target_broker"
	colMessageID     = "message_id"
	colConsumerGroup = "consumer_group"
	colBackfilled    = "backfilled"
)

// SubscriberConfig configures a [Subscriber]. Zero fields take their
// defaults; negative sizes and durations are invalid.
type SubscriberConfig struct {
	// Table is the message table ([outbox.DefaultTable] when empty); its
	// delivery and groups tables are named after it (see [TablesOf]) and
	// must exist (see [Migrate]).
	Table string
	// ConsumerGroup names the group this subscriber consumes for; every
	// group sees every message of a topic, the subscribers of one group
	// share them. The empty name is a group like any other. At most
	// [outbox.MaxNameLen] bytes.
	ConsumerGroup string
	// TargetBroker selects the messages of the message table this
	// subscriber fans out to the consumer groups: those written by a
	// [Publisher] with the same TargetBroker. Default
	// [DefaultTargetBroker].
	TargetBroker string
	// WorkerID names this subscriber in locked_by; default
	// outbox.DefaultWorkerID(). Each subscription (each call of
	// Subscribe) claims as WorkerID + "/<n>", so its marks are fenced on
	// their own.
	WorkerID string
	// BatchSize is the most deliveries one subscription claims at once;
	// default [DefaultBatchSize]. They are handed to the handler one at a
	// time and stay claimed by the subscription until each is acked or
	// nacked.
	BatchSize int
	// FanOutBatchSize is the most messages one fan-out step claims from
	// the message table; default [DefaultFanOutBatchSize].
	FanOutBatchSize int
	// PollInterval is the first wait after a poll that found nothing; the
	// wait doubles up to MaxPollInterval while nothing comes. Defaults
	// [DefaultPollInterval] and [DefaultMaxPollInterval].
	PollInterval, MaxPollInterval time.Duration
	// Lease is how long a claimed batch stays locked to its subscription;
	// default [outbox.DefaultLease]. A subscription stops handing out the
	// messages of a batch once three quarters of its lease have passed and
	// releases the rest, and a delivery whose handler has not acked it
	// when the lease ends may be delivered to another subscriber.
	Lease time.Duration
	// RetryPolicy decides when a nacked delivery comes back and after how
	// many nacks it is abandoned; default [outbox.DefaultRetryPolicy].
	RetryPolicy *outbox.RetryPolicy
	// WriteTimeout bounds the writes that end a batch (ack, nack and
	// release marks), which run even while the subscriber closes; default
	// [DefaultWriteTimeout].
	WriteTimeout time.Duration
	// MarkTimeout is read as WriteTimeout when WriteTimeout is zero.
	//
	// Deprecated: use WriteTimeout.
	MarkTimeout time.Duration
	// Logger receives the subscriber's logs; default slog.Default().
	Logger *slog.Logger
}

// Subscriber is a Watermill message.Subscriber over a claimstore outbox
// table, with consumer groups kept in a delivery table. See the package
// documentation for the tables and the guarantees.
type Subscriber struct {
	cfg        SubscriberConfig
	tables     Tables
	messages   *outbox.Repository
	deliveries *outbox.Repository
	groups     dao.Store[Group]
	log        *slog.Logger
	// fast is the one-statement fan-out on PostgreSQL, nil elsewhere.
	fast *pgFanOut
	// maxRetries is what [outbox.Repository.Add] gives a new delivery.
	maxRetries int

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup
	subs    atomic.Int64
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber returns a subscriber over the tables of cfg.Table on db,
// a handle on PostgreSQL, MySQL/MariaDB or SQLite whose claimstore
// backend package is linked (import
// github.com/claimstore/claimstore/adapters/postgres, …/mysql or
// …/sqlite). It does no I/O: the tables must exist ([Migrate]).
//
// Errors: an error wrapping [dao.ErrInvalidArgument] for a nil db, a bad
// table name, a setting out of range or an invalid retry policy; the
// store constructor's error for a backend that is not linked.
func NewSubscriber(db *gorm.DB, cfg SubscriberConfig) (*Subscriber, error) {
	if db == nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w: nil db", dao.ErrInvalidArgument)
	}
	if cfg.BatchSize < 0 || cfg.FanOutBatchSize < 0 || cfg.PollInterval < 0 || cfg.MaxPollInterval < 0 || cfg.Lease < 0 || cfg.WriteTimeout < 0 || cfg.MarkTimeout < 0 {
		return nil, fmt.Errorf("watermill: new subscriber: %w: negative setting", dao.ErrInvalidArgument)
	}
	if len(cfg.ConsumerGroup) > outbox.MaxNameLen {
		return nil, fmt.Errorf("watermill: new subscriber: %w: consumer group is %d bytes, the limit is %d", dao.ErrInvalidArgument, len(cfg.ConsumerGroup), outbox.MaxNameLen)
	}
	t, err := TablesOf(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w", err)
	}
	cfg.Table = t.Messages
	if cfg.TargetBroker == "" {
		cfg.TargetBroker = DefaultTargetBroker
	}
	if len(cfg.TargetBroker) > outbox.MaxBrokerLen {
		return nil, fmt.Errorf("watermill: new subscriber: %w: target broker is %d bytes, the limit is %d", dao.ErrInvalidArgument, len(cfg.TargetBroker), outbox.MaxBrokerLen)
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = outbox.DefaultWorkerID()
	}
	if len(cfg.WorkerID) > outbox.MaxNameLen-21 {
		return nil, fmt.Errorf("watermill: new subscriber: %w: worker id is %d bytes, the limit is %d", dao.ErrInvalidArgument, len(cfg.WorkerID), outbox.MaxNameLen-21)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.FanOutBatchSize == 0 {
		cfg.FanOutBatchSize = DefaultFanOutBatchSize
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxPollInterval == 0 {
		cfg.MaxPollInterval = max(DefaultMaxPollInterval, cfg.PollInterval)
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		return nil, fmt.Errorf("watermill: new subscriber: %w: max poll interval %v below poll interval %v", dao.ErrInvalidArgument, cfg.MaxPollInterval, cfg.PollInterval)
	}
	if cfg.Lease == 0 {
		cfg.Lease = outbox.DefaultLease
	}
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, cfg.MarkTimeout, DefaultWriteTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	policy := outbox.DefaultRetryPolicy()
	if cfg.RetryPolicy != nil {
		policy = *cfg.RetryPolicy
	}
	msgStore, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(t.Messages))
	if err != nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w", err)
	}
	dlvStore, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(t.Deliveries))
	if err != nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w", err)
	}
	groups, err := sqlstore.New[Group](db, sqlstore.WithTable(t.Groups))
	if err != nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w", err)
	}
	msgs, err := outbox.New(msgStore, outbox.WithLease(cfg.Lease))
	if err != nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w", err)
	}
	dlvs, err := outbox.New(dlvStore, outbox.WithLease(cfg.Lease), outbox.WithRetryPolicy(policy))
	if err != nil {
		return nil, fmt.Errorf("watermill: new subscriber: %w", err)
	}
	return &Subscriber{
		cfg:        cfg,
		tables:     t,
		messages:   msgs,
		deliveries: dlvs,
		groups:     groups,
		fast:       newPGFanOut(db, t),
		maxRetries: policy.MaxRetries,
		log:        cfg.Logger.With("component", "watermill.subscriber", "worker", cfg.WorkerID, "consumer_group", cfg.ConsumerGroup),
		closing:    make(chan struct{}),
	}, nil
}

// Config returns the subscriber's configuration with defaults filled in.
func (s *Subscriber) Config() SubscriberConfig { return s.cfg }

// Deliveries returns the repository over the delivery table: its
// inspection methods (Counts, List, Requeue, Purge) work on the
// deliveries of every group.
func (s *Subscriber) Deliveries() *outbox.Repository { return s.deliveries }

// SubscribeInitialize registers the subscriber's consumer group on topic
// (see [Subscriber.Subscribe]) without consuming: messages published from
// then on are kept for the group until it consumes them. It implements
// message.SubscribeInitializer, which takes no context: the registration
// gives up after [RegisterTimeout] (a first registration copies the
// topic's messages, and on SQLite it waits for the database's one writer
// behind every other subscriber's writes).
//
// Errors: as [Subscriber.Subscribe]'s, and an error wrapping
// context.DeadlineExceeded after RegisterTimeout.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), RegisterTimeout)
	defer cancel()
	return s.register(ctx, topic)
}

// Subscribe registers the consumer group on topic, if it is not yet, and
// returns the channel of its messages: claimed deliveries of the topic for
// the group, one at a time, each sent only after the previous one was
// acked or nacked. When the group is registered for the first time the
// messages of the topic already in the message table are copied to its
// deliveries first, so a new group starts from the oldest message kept.
//
// The channel is closed when ctx ends or the subscriber is closed, after
// the subscription marked what its handler acked and nacked and released
// the messages it had claimed and not handed out.
//
// Errors: [ErrClosed] after Close; an error wrapping
// [dao.ErrInvalidArgument] for an empty topic or one longer than
// [outbox.MaxTopicLen]; the store's errors while registering.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	if err := s.register(ctx, topic); err != nil {
		s.wg.Done()
		return nil, err
	}
	out := make(chan *message.Message)
	worker := fmt.Sprintf("%s/%d", s.cfg.WorkerID, s.subs.Add(1))
	runCtx, cancel := context.WithCancel(ctx)
	// Close waits for both goroutines of the subscription.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.closing:
			cancel()
		case <-runCtx.Done():
		}
	}()
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer cancel()
		s.consume(runCtx, topic, worker, out)
	}()
	return out, nil
}

// Close stops every subscription, waits until each has marked what its
// handler acked or nacked and released what it still held, and closes
// their channels. It returns nil; later calls do nothing.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// register adds the consumer group of s on topic to the groups table and,
// unless an earlier registration finished it, copies the messages of the
// topic already in the message table to the group's deliveries.
func (s *Subscriber) register(ctx context.Context, topic string) error {
	if topic == "" {
		return fmt.Errorf("watermill: subscribe: %w: empty topic", dao.ErrInvalidArgument)
	}
	if len(topic) > outbox.MaxTopicLen {
		return fmt.Errorf("watermill: subscribe: %w: topic is %d bytes, the limit is %d", dao.ErrInvalidArgument, len(topic), outbox.MaxTopicLen)
	}
	this := dao.And(dao.Eq(colTopic, topic), dao.Eq(colConsumerGroup, s.cfg.ConsumerGroup))
	err := retry.Do(ctx, storeTries, storeWait, func() error {
		return s.groups.Create(ctx, &Group{Topic: topic, ConsumerGroup: s.cfg.ConsumerGroup, CreatedAt: time.Now().UTC()})
	})
	if errors.Is(err, dao.ErrDuplicate) {
		var rows []Group
		err = retry.Do(ctx, storeTries, storeWait, func() (err error) {
			rows, err = s.groups.Find(ctx, dao.Query{Where: this, Limit: 1})
			return err
		})
		if err == nil && len(rows) == 1 && rows[0].Backfilled {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("watermill: subscribe: register group %q on %q: %w", s.cfg.ConsumerGroup, topic, err)
	}
	if err := s.backfill(ctx, topic); err != nil {
		return fmt.Errorf("watermill: subscribe: copy the messages of %q for group %q: %w", topic, s.cfg.ConsumerGroup, err)
	}
	err = retry.Do(ctx, storeTries, storeWait, func() error {
		_, err := s.groups.Update(ctx, this, dao.Set{colBackfilled: true})
		return err
	})
	if err != nil {
		return fmt.Errorf("watermill: subscribe: register group %q on %q: %w", s.cfg.ConsumerGroup, topic, err)
	}
	return nil
}

// backfillPage is the number of messages one step of a backfill reads.
const backfillPage = 500

// backfill copies every message of topic in the message table (whatever
// its status) to the deliveries of the group, skipping those it has.
func (s *Subscriber) backfill(ctx context.Context, topic string) error {
	var last int64
	for {
		var page []outbox.Message
		err := retry.Do(ctx, storeTries, storeWait, func() (err error) {
			page, err = s.messages.Store().Find(ctx, dao.Query{
				Where:   dao.And(dao.Eq(colTopic, topic), dao.Eq(colTargetBroker, s.cfg.TargetBroker), dao.Gt(colID, last)),
				OrderBy: []dao.Order{dao.Asc(colID)},
				Limit:   backfillPage,
			})
			return err
		})
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		last = page[len(page)-1].ID
		copies := make([]copyOf, len(page))
		for i := range page {
			copies[i] = copyOf{msg: &page[i], group: s.cfg.ConsumerGroup}
		}
		if err := s.addDeliveries(ctx, copies, true); err != nil {
			return err
		}
		if len(page) < backfillPage {
			return nil
		}
	}
}

// copyOf is a delivery to write: message msg for consumer group group.
type copyOf struct {
	msg   *outbox.Message
	group string
}

// delivery returns the delivery row of c.
func (c copyOf) delivery() *outbox.Message {
	m := c.msg
	return &outbox.Message{
		MessageID:     m.MessageID,
		Topic:         m.Topic,
		Type:          m.Type,
		Payload:       m.Payload,
		Headers:       m.Headers,
		TargetBroker:  DeliveryKey(c.group, m.Topic),
		PartitionKey:  c.group,
		Priority:      m.Priority,
		CreatedAt:     m.CreatedAt,
		CorrelationID: m.CorrelationID,
		CausationID:   m.CausationID,
	}
}

// addDeliveries writes the deliveries of copies that do not exist yet.
// With check it first reads which exist; without, it tries to insert them
// all and reads only when one already exists (the message was fanned out
// before, by a subscriber that died before its mark, or copied by a
// group's backfill).
func (s *Subscriber) addDeliveries(ctx context.Context, copies []copyOf, check bool) error {
	if len(copies) == 0 {
		return nil
	}
	if !check {
		rows := make([]*outbox.Message, len(copies))
		for i, c := range copies {
			rows[i] = c.delivery()
		}
		err := retry.Do(ctx, storeTries, storeWait, func() error { return s.deliveries.Add(ctx, nil, rows...) })
		if err == nil || !errors.Is(err, dao.ErrDuplicate) {
			return err
		}
	}
	// Which deliveries exist, by target broker (the group and topic).
	byKey := map[string][]any{}
	for _, c := range copies {
		k := DeliveryKey(c.group, c.msg.Topic)
		byKey[k] = append(byKey[k], c.msg.MessageID)
	}
	have := map[[2]string]bool{}
	for k, ids := range byKey {
		var rows []outbox.Message
		err := retry.Do(ctx, storeTries, storeWait, func() (err error) {
			rows, err = s.deliveries.Store().Find(ctx, dao.Query{Where: dao.And(dao.Eq(colTargetBroker, k), dao.In(colMessageID, ids...))})
			return err
		})
		if err != nil {
			return err
		}
		for _, r := range rows {
			have[[2]string{r.TargetBroker, r.MessageID}] = true
		}
	}
	var missing []*outbox.Message
	for _, c := range copies {
		if d := c.delivery(); !have[[2]string{d.TargetBroker, d.MessageID}] {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := retry.Do(ctx, storeTries, storeWait, func() error { return s.deliveries.Add(ctx, nil, missing...) })
	if err == nil || !errors.Is(err, dao.ErrDuplicate) {
		return err
	}
	// Another subscriber wrote some of them meanwhile: one at a time.
	for _, c := range copies {
		d := c.delivery()
		if have[[2]string{d.TargetBroker, d.MessageID}] {
			continue
		}
		err := retry.Do(ctx, storeTries, storeWait, func() error { return s.deliveries.Add(ctx, nil, d) })
		if err != nil && !errors.Is(err, dao.ErrDuplicate) {
			return err
		}
	}
	return nil
}

// oneStatement reports whether the subscriber fans out in one statement
// (see [pgFanOut]): on PostgreSQL 11 or later, asked once per subscriber.
// An error asking means no for the subscription that asked.
func (s *Subscriber) oneStatement(ctx context.Context) (bool, error) {
	if s.fast == nil {
		return false, nil
	}
	return s.fast.usable(ctx)
}

// fanOut claims up to FanOutBatchSize messages of the target broker from
// the message table, writes a delivery of each for every group of its
// topic, and marks them published. It returns how many it claimed.
//
// When fast (see [Subscriber.oneStatement]) it does so in one statement,
// claims at most own messages when own > 0, and inserts the deliveries of
// the subscription's group on topic (up to own) already claimed by
// worker, which it returns; the same statement marks published the
// deliveries acked by the subscription's handler, and the run says how
// many it marked. Otherwise it returns no delivery, and acked must be
// empty.
func (s *Subscriber) fanOut(ctx context.Context, fast bool, worker, topic string, own int, acked []int64) (fanOutRun, error) {
	cctx, cancel := batchloop.ClaimContext(ctx, batchloop.ClaimTimeout)
	defer cancel()
	if fast {
		return s.fanOutPostgres(cctx, worker, topic, own, acked)
	}
	n, err := s.fanOutPortable(ctx, cctx, worker)
	return fanOutRun{claimed: n}, err
}

// fanOutPostgres is fanOut's one statement, retried on a retryable
// error. What a failed try returned is kept (its statement may have
// committed before its answer was lost): the next try claims fewer, and
// marks none of the acks twice (they are no longer processing).
func (s *Subscriber) fanOutPostgres(ctx context.Context, worker, topic string, own int, acked []int64) (fanOutRun, error) {
	limit := s.cfg.FanOutBatchSize
	if own > 0 {
		limit = min(limit, own)
	}
	var done fanOutRun
	err := retry.Do(ctx, storeTries, storeWait, func() error {
		r, err := s.fast.run(ctx, s.cfg.TargetBroker, limit, worker, s.cfg.ConsumerGroup, topic, max(own-len(done.mine), 0), s.cfg.Lease, s.maxRetries, acked)
		done.claimed += r.claimed
		done.acked += r.acked
		done.mine = append(done.mine, r.mine...)
		return err
	})
	done.claimed = max(done.claimed, len(done.mine))
	if err != nil {
		err = fmt.Errorf("fan out: %w", err)
	}
	return done, err
}

// fanOutPortable claims the messages with the outbox claim, reads the
// groups, writes the deliveries and marks the messages, each its own
// statement; cctx bounds the claim and the deliveries, ctx's values serve
// the mark.
func (s *Subscriber) fanOutPortable(ctx, cctx context.Context, worker string) (int, error) {
	batch, err := s.messages.ClaimBatch(cctx, worker, s.cfg.FanOutBatchSize, s.cfg.TargetBroker)
	if len(batch) == 0 {
		return 0, err
	}
	ids := make([]int64, len(batch))
	seen := map[string]bool{}
	var topics []any
	for i, m := range batch {
		ids[i] = m.ID
		if !seen[m.Topic] {
			seen[m.Topic] = true
			topics = append(topics, m.Topic)
		}
	}
	// The groups are read after the claim: a group registered before it
	// is seen here; one registered later copies these messages itself,
	// since they are committed by now (see register).
	var groups []Group
	gerr := retry.Do(cctx, storeTries, storeWait, func() (err error) {
		groups, err = s.groups.Find(cctx, dao.Query{Where: dao.In(colTopic, topics...)})
		return err
	})
	var copies []copyOf
	if gerr == nil {
		byTopic := map[string][]string{}
		for _, g := range groups {
			byTopic[g.Topic] = append(byTopic[g.Topic], g.ConsumerGroup)
		}
		for i := range batch {
			for _, g := range byTopic[batch[i].Topic] {
				copies = append(copies, copyOf{msg: &batch[i], group: g})
			}
		}
		gerr = s.addDeliveries(cctx, copies, false)
	}
	if gerr != nil {
		_, _ = batchloop.Write(ctx, s.cfg.WriteTimeout, func(mctx context.Context) ([]int64, error) { return s.messages.Release(mctx, worker, ids...) })
		return len(batch), errors.Join(err, fmt.Errorf("fan out: %w", gerr))
	}
	_, merr := batchloop.Write(ctx, s.cfg.WriteTimeout, func(mctx context.Context) ([]int64, error) { return s.messages.MarkPublished(mctx, worker, ids...) })
	if merr != nil {
		// The deliveries are written; a message claimed again after its
		// lease finds them and writes nothing twice.
		err = errors.Join(err, fmt.Errorf("fan out: mark: %w", merr))
	}
	return len(batch), err
}

// consume is the loop of one subscription.
//
// Each turn claims a batch of the group's deliveries of topic and fans
// out messages. Portably the fan-out comes first, so the deliveries it
// wrote are claimed in the same turn. On PostgreSQL the delivery claim
// comes first (so nacked and released deliveries are never starved) and
// the fan-out fills the rest of the batch with deliveries it inserts
// already claimed; after a delivery claim that found nothing the next
// waits a poll interval, while the fan-out keeps the batches full. There
// the acks of a batch whose every message was acked are marked by the
// next turn's fan-out statement when one is due; otherwise, and
// portably, a batch's marks are written while the next batch is claimed
// and handled.
func (s *Subscriber) consume(ctx context.Context, topic, worker string, out chan<- *message.Message) {
	key := DeliveryKey(s.cfg.ConsumerGroup, topic)
	log := s.log.With("topic", topic, "subscription", worker)
	// After a fan-out (or, on PostgreSQL, a delivery claim) that found
	// nothing, the next waits a poll interval: a busy subscription then
	// does not spend a statement on an empty claim before each batch.
	var nextFanOut, nextClaim time.Time
	// marked is closed once the marks written in the background are;
	// the loop waits for it before the next batch's marks, and before it
	// returns. acks are the acked deliveries whose mark goes with the next
	// fan-out statement.
	var marked chan struct{}
	var acks []int64
	flush := func(o outcome) {
		if marked != nil {
			<-marked
		}
		done := make(chan struct{})
		marked = done
		go func() {
			defer close(done)
			s.mark(ctx, log, worker, o)
		}()
	}
	defer func() {
		if len(acks) > 0 {
			flush(outcome{Done: acks})
		}
		if marked != nil {
			<-marked
		}
	}()
	// Whether the fan-out inserts claimed deliveries: PostgreSQL 11 or
	// later, asked once per subscriber; an error asking means no for this
	// subscription.
	fast, err := s.oneStatement(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("fan-out: one-statement fan-out not used", "err", err)
	}
	claim := func() ([]outbox.Message, error) {
		cctx, cancel := batchloop.ClaimContext(ctx, batchloop.ClaimTimeout)
		defer cancel()
		return s.deliveries.ClaimBatch(cctx, worker, s.cfg.BatchSize, key)
	}
	// One turn of the loop claims and hands out one batch; its claim and
	// fan-out errors, joined, are the turn's error (logged once per
	// episode of failures by the loop).
	turn := func(ctx context.Context) (batchloop.Next, error) {
		var batch []outbox.Message
		var err error
		now := time.Now()
		if fast && !now.Before(nextClaim) {
			if batch, err = claim(); len(batch) == 0 {
				nextClaim = now.Add(s.cfg.PollInterval)
			}
		}
		fanned := 0
		if !now.Before(nextFanOut) {
			// Room for claimed deliveries only when the loop runs in the
			// PostgreSQL order (the portable claim below replaces batch).
			room := 0
			if fast {
				room = s.cfg.BatchSize - len(batch)
			}
			r, ferr := s.fanOut(ctx, fast, worker, topic, room, acks)
			if len(acks) > 0 && (ferr != nil || r.acked != len(acks)) {
				// Not all marked (a failed statement, or a lease lost):
				// the ordinary mark writes the rest and reports the fence.
				flush(outcome{Done: acks})
			}
			acks = nil
			if fanned = r.claimed; fanned == 0 {
				nextFanOut = now.Add(s.cfg.PollInterval)
			}
			batch = append(batch, r.mine...)
			err = errors.Join(err, ferr)
		}
		if !fast {
			var cerr error
			batch, cerr = claim()
			err = errors.Join(err, cerr)
		}
		if len(batch) > 0 {
			o := s.handle(ctx, log, batch, out)
			if fast && len(o.Failed) == 0 && len(o.Released) == 0 && ctx.Err() == nil && !time.Now().Before(nextFanOut) {
				acks = o.Done
			} else {
				flush(o)
			}
			return batchloop.Again, err
		}
		if fanned > 0 && err == nil {
			return batchloop.Again, nil
		}
		return batchloop.Idle, err
	}
	b := batchloop.Backoff{PollInterval: s.cfg.PollInterval, Max: s.cfg.MaxPollInterval}
	loop := batchloop.Loop{Log: log, Claim: turn, Wait: b.Wait}
	if err := loop.Run(ctx); err != nil {
		log.Error("subscription stopped: the store refused its claim or fan-out", "err", err)
	}
}

// outcome is what a subscription's handler did with a batch: the
// deliveries it acked (Done) and nacked (Failed), and those not handed
// out (Released).
type outcome = batchloop.Outcome[outbox.Failure]

// handle hands the deliveries of batch to the subscription's channel one
// at a time, waiting for each to be acked or nacked, and returns what the
// handler did; see [Subscriber.mark] for how each outcome is written.
func (s *Subscriber) handle(ctx context.Context, log *slog.Logger, batch []outbox.Message, out chan<- *message.Message) outcome {
	start := time.Now()
	var o outcome
	stop := func(i int) {
		for j := i; j < len(batch); j++ {
			o.Released = append(o.Released, batch[j].ID)
		}
	}
loop:
	for i := range batch {
		m := &batch[i]
		if ctx.Err() != nil || time.Since(start) > s.cfg.Lease*3/4 {
			stop(i)
			break
		}
		// Each message's context ends once it is acked or nacked, or
		// when the subscription stops.
		wm := toWatermill(m)
		msgCtx, cancel := context.WithCancel(ctx)
		wm.SetContext(msgCtx)
		select {
		case out <- wm:
		case <-ctx.Done():
			cancel()
			stop(i)
			break loop
		}
		select {
		case <-wm.Acked():
		case <-wm.Nacked():
		case <-ctx.Done():
		}
		cancel()
		// An answer given as the subscription stopped still counts: the
		// select above picks at random among ready cases.
		select {
		case <-wm.Acked():
			o.Done = append(o.Done, m.ID)
		case <-wm.Nacked():
			o.Failed = append(o.Failed, outbox.Failed(m, ErrNacked))
		default:
			stop(i)
			break loop
		}
	}
	return o
}

// mark writes the outcomes of one handled batch, all within one
// WriteTimeout from its start, even when ctx has ended (batchloop.Write,
// given the time left of that timeout): acked → published (done for
// the group), nacked → failed through the retry policy, not handed out →
// released. A mark's error is logged by batchloop.LogMark: a lease lost
// to another subscriber (which now holds the messages) at INFO, any other
// at WARN (the messages come back when their lease ends).
func (s *Subscriber) mark(ctx context.Context, log *slog.Logger, worker string, o outcome) {
	logMark := func(op string, n int, refused []int64, err error) {
		batchloop.LogMark(log, slog.LevelInfo, slog.LevelWarn, outbox.ErrLeaseLost, op, n, len(refused), err)
	}
	deadline := time.Now().Add(s.cfg.WriteTimeout)
	if len(o.Done) > 0 {
		refused, err := batchloop.Write(ctx, time.Until(deadline), func(ctx context.Context) ([]int64, error) {
			return s.deliveries.MarkPublished(ctx, worker, o.Done...)
		})
		logMark("ack", len(o.Done), refused, err)
	}
	if len(o.Failed) > 0 {
		res, err := batchloop.Write(ctx, time.Until(deadline), func(ctx context.Context) (outbox.FailResult, error) {
			return s.deliveries.MarkFailed(ctx, worker, o.Failed...)
		})
		logMark("nack", len(o.Failed), res.NotApplied, err)
	}
	if len(o.Released) > 0 {
		refused, err := batchloop.Write(ctx, time.Until(deadline), func(ctx context.Context) ([]int64, error) {
			return s.deliveries.Release(ctx, worker, o.Released...)
		})
		logMark("release", len(o.Released), refused, err)
	}
}
