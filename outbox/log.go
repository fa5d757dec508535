package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/poolwatch"
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

// CursorLag is one reader's cursor on one partition and how far it is
// behind (see [Log.Lags]).
type CursorLag struct {
	LogCursor
	// Behind is the number of records after the cursor, counted up to
	// the limit given to [Log.Lags]; AtLeast says the count stopped
	// there (there may be more).
	Behind  int64
	AtLeast bool
	// Oldest is when the oldest of them was written; zero when none.
	Oldest time.Time
}

// Age returns how long the oldest record behind the cursor has waited at
// now: 0 when the reader is caught up.
func (c CursorLag) Age(now time.Time) time.Duration {
	if c.Behind == 0 {
		return 0
	}
	return max(now.Sub(c.Oldest), 0)
}

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

// Trim deletes the records every reader is done with, up to batch (>= 1)
// records per partition per call, oldest first, and moves each trimmed
// partition's retention mark. A partition no reader has a cursor on keeps
// everything. It returns how many records it deleted; call it again
// while it returns a full batch. Several servers may trim at once.
func (l *Log) Trim(ctx context.Context, batch int) (int64, error) {
	if batch < 1 {
		return 0, fmt.Errorf("outbox: log trim: %w: batch %d", dao.ErrInvalidArgument, batch)
	}
	cs, err := l.store.Cursors(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: log trim: %w", err)
	}
	slowest := map[int]driver.LogPosition{}
	for _, c := range cs {
		if c.Reader == driver.LogRetentionReader {
			continue
		}
		if p, ok := slowest[c.Partition]; !ok || c.Position.Less(p) {
			slowest[c.Partition] = c.Position
		}
	}
	var total int64
	for part, upTo := range slowest {
		if upTo == (driver.LogPosition{}) {
			continue
		}
		n, err := l.store.Trim(ctx, part, upTo, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: log trim: %w", err)
		}
	}
	return total, nil
}

// Lags returns every reader's cursor on every partition, ordered by
// reader and partition, with how far it is behind: the records after it,
// counted up to limit (>= 1) per cursor so that a reader far behind costs
// a bounded read, and the oldest one's time. Retention marks are not
// listed. Errors wrap [dao.ErrInvalidArgument] for a limit below 1, or
// the store's failure.
func (l *Log) Lags(ctx context.Context, limit int) ([]CursorLag, error) {
	if limit < 1 {
		return nil, fmt.Errorf("outbox: log lags: %w: limit %d", dao.ErrInvalidArgument, limit)
	}
	cs, err := l.store.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: log lags: %w", err)
	}
	var out []CursorLag
	for _, c := range cs {
		if c.Reader == driver.LogRetentionReader {
			continue
		}
		lag, err := l.store.Lag(ctx, c.Partition, c.Position, limit)
		if err != nil {
			return nil, fmt.Errorf("outbox: log lags: %w", err)
		}
		out = append(out, CursorLag{LogCursor: c, Behind: lag.Behind, AtLeast: lag.Behind >= int64(limit), Oldest: lag.Oldest})
	}
	return out, nil
}

// LogStatus is what an operator reads of a log: every reader's cursor
// with its lag, and the first dead letters (see [Log.Status]).
type LogStatus struct {
	Cursors     []CursorLag
	DeadLetters []LogDeadLetter
	// MoreDead says that more dead letters follow those listed.
	MoreDead bool
}

// Status returns the log's cursors with their lags, each counted up to
// lagLimit (>= 1) records, and its first deadLimit (>= 0) dead letters
// in id order. Errors wrap [dao.ErrInvalidArgument] for a limit out of
// range, or the store's failure.
func (l *Log) Status(ctx context.Context, lagLimit, deadLimit int) (LogStatus, error) {
	var st LogStatus
	if deadLimit < 0 {
		return st, fmt.Errorf("outbox: log status: %w: dead-letter limit %d", dao.ErrInvalidArgument, deadLimit)
	}
	var err error
	if st.Cursors, err = l.Lags(ctx, lagLimit); err != nil {
		return st, err
	}
	if deadLimit == 0 {
		return st, nil
	}
	dead, err := l.store.DeadLetters(ctx, 0, deadLimit+1)
	if err != nil {
		return st, fmt.Errorf("outbox: log status: %w", err)
	}
	if len(dead) > deadLimit {
		st.MoreDead, dead = true, dead[:deadLimit]
	}
	st.DeadLetters = dead
	return st, nil
}

// LogHandler handles one batch of one partition, in log order. It
// returns how many records from the start of recs it is done with (the
// cursor moves past them), the dead letters among those, and an error
// that stops the partition (after the records done are committed). A
// handler that returns done < len(recs) and no error gets the rest again
// in the next batch.
type LogHandler func(ctx context.Context, part int, recs []LogRecord) (done int, dead []LogDeadLetter, err error)

// LogReaderConfig configures [Log.Consume].
type LogReaderConfig struct {
	// Reader names the cursor (a relay, a consumer group): readers with
	// one name share the partitions, each partition read by one at a
	// time. Required, at most 191 bytes.
	Reader string
	// Holder identifies this process among the readers of one name;
	// default [DefaultWorkerID].
	Holder string
	// Leases keeps the partitions' leases (sqlstore.NewLeases,
	// memstore.NewLeases); required. The lease of partition p of reader
	// r of log t is named "log:<t>:<r>:<p>", where t is LogTable.
	Leases driver.LeaseStore
	// LogTable names the log in the lease names; default "log".
	LogTable string
	// LeaseTTL is how long a partition stays held without a renewal;
	// renewed every LeaseTTL/3. Default 15 s.
	LeaseTTL time.Duration
	// Batch is the most records read at once; default 500.
	Batch int
	// Poll is the pause after an empty read; default 50 ms.
	Poll time.Duration
	// Topic, when not "", reads only that topic's records.
	Topic string
	// Logger receives the reader's logs; default slog.Default().
	Logger *slog.Logger
	// MeterProvider receives the hold-back gauge [MetricLogHeldBack];
	// default none.
	MeterProvider metric.MeterProvider
}

// MetricLogHeldBack is the gauge of the records of a partition, already
// committed, that a reader cannot read yet because a transaction with a
// smaller id is still running (PostgreSQL): a long transaction holds
// back every message written after it began. Attributes: outbox.log.reader
// and outbox.log.partition.
const MetricLogHeldBack = "outbox.log.held_back"

func (c *LogReaderConfig) defaults() error {
	if err := driver.CheckLeaseID("reader", c.Reader); err != nil {
		return err
	}
	if c.Leases == nil {
		return argerr.Errorf("log reader %q: no lease store", c.Reader)
	}
	if c.Holder == "" {
		c.Holder = DefaultWorkerID()
	}
	c.LogTable = cmp.Or(c.LogTable, "log")
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 15*time.Second)
	c.Batch = cmp.Or(c.Batch, 500)
	c.Poll = cmp.Or(c.Poll, 50*time.Millisecond)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.MeterProvider == nil {
		c.MeterProvider = noop.NewMeterProvider()
	}
	if c.Batch < 1 || c.Poll <= 0 {
		return argerr.Errorf("log reader %q: batch %d, poll %v", c.Reader, c.Batch, c.Poll)
	}
	return driver.CheckLeaseTTL(c.LeaseTTL)
}

// Consume reads the log as reader cfg.Reader until ctx ends: it takes the
// lease of every partition no other holder has, and for each partition
// it holds runs handle on batch after batch, in log order, advancing the
// cursor past the records handle is done with in the transaction that
// reads the next batch. A partition whose lease is lost (not renewed in
// time, or taken by another holder) stops at once; its cursor is fenced
// by the lease's term, so a reader that lost it cannot move it. On return
// the held leases are released so that another reader takes over at
// once. Delivery is at least once: records handled but not yet committed
// when a reader dies are handled again by the next one, in the same
// order.
//
// Each partition held reads on a connection of its own, so a reader may
// use as many connections at once as the log has partitions, plus one
// for its leases: keep as many idle in the store's pool (sqlstore.Open
// keeps 16; database/sql 2), or connections are closed and opened again
// on every batch. When the store runs on a database/sql pool (it answers
// As(**sql.DB) or As(**gorm.DB)) the reader logs a WARN, once per run,
// after the pool has closed more than 100 connections for want of idle
// slots.
//
// Consume returns nil when ctx ends, or an error wrapping
// [dao.ErrInvalidArgument] for a bad configuration. Errors of a
// partition ([ErrCursorBehind], [ErrLogRewound], a handler's error) stop
// that partition, keep its lease so no other reader takes it over in
// silence, and are logged and reported by [LogConsumer.Stopped].
func (l *Log) Consume(ctx context.Context, cfg LogReaderConfig, handle LogHandler) error {
	c, err := l.Consumer(cfg, handle)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// LogConsumer is a reader of the log; see [Log.Consume].
type LogConsumer struct {
	l      *Log
	cfg    LogReaderConfig
	handle LogHandler
	held   metric.Int64Gauge

	mu      sync.Mutex
	stopped map[int]error
}

// Consumer returns the reader [Log.Consume] runs, so that its state can
// be read while it runs.
func (l *Log) Consumer(cfg LogReaderConfig, handle LogHandler) (*LogConsumer, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("outbox: log reader: %w", err)
	}
	if handle == nil {
		return nil, fmt.Errorf("outbox: log reader: %w: nil handler", dao.ErrInvalidArgument)
	}
	held, err := cfg.MeterProvider.Meter(MeterName).Int64Gauge(MetricLogHeldBack, metric.WithUnit("{message}"),
		metric.WithDescription("Committed log records a reader cannot read yet because an older transaction is still running."))
	if err != nil {
		return nil, fmt.Errorf("outbox: log reader: %w", err)
	}
	return &LogConsumer{l: l, cfg: cfg, handle: handle, held: held, stopped: map[int]error{}}, nil
}

// Stopped returns the partitions this reader stopped, with why.
func (c *LogConsumer) Stopped() map[int]error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]error, len(c.stopped))
	for k, v := range c.stopped {
		out[k] = v
	}
	return out
}

type heldPart struct {
	term    int64
	cancel  context.CancelFunc
	done    chan struct{}
	renewed time.Time
}

func (c *LogConsumer) leaseName(part int) string {
	return "log:" + c.cfg.LogTable + ":" + c.cfg.Reader + ":" + strconv.Itoa(part)
}

// Run runs the reader until ctx ends; see [Log.Consume]. It returns once
// the reader of every partition it started has returned, those of the
// partitions whose lease it lost meanwhile included.
func (c *LogConsumer) Run(ctx context.Context) error {
	held := map[int]*heldPart{}
	// readers counts the partition readers, whether held or let go.
	var readers sync.WaitGroup
	defer readers.Wait()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for part, h := range held {
			h.cancel()
			<-h.done
			if _, err := c.cfg.Leases.ReleaseLease(rctx, c.leaseName(part), c.cfg.Holder, h.term); err != nil {
				c.cfg.Logger.Warn("outbox: log reader: release lease", "reader", c.cfg.Reader, "partition", part, "err", err)
			}
		}
	}()
	// Each partition held reads on a connection of its own, and the
	// leases take one more.
	pool := poolwatch.New(poolwatch.Of(c.l.store), c.cfg.Logger, c.l.parts+1)
	tick := time.NewTicker(c.cfg.LeaseTTL / 3)
	defer tick.Stop()
	// Start at a random partition so that readers starting together
	// spread over the partitions.
	first := rand.IntN(c.l.parts)
	for {
		for i := range c.l.parts {
			part := (first + i) % c.l.parts
			h := held[part]
			if h != nil {
				select {
				case <-h.done:
					// The partition's loop ended: lease lost or a stop.
					if c.Stopped()[part] == nil {
						delete(held, part)
						h = nil
					}
				default:
				}
			}
			if ctx.Err() != nil {
				return nil
			}
			lease, ok, err := c.cfg.Leases.AcquireLease(ctx, c.leaseName(part), c.cfg.Holder, c.cfg.LeaseTTL)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return nil
				}
				c.cfg.Logger.Warn("outbox: log reader: lease", "reader", c.cfg.Reader, "partition", part, "err", err)
				if h != nil && time.Since(h.renewed) > c.cfg.LeaseTTL*2/3 {
					h.cancel()
				}
				continue
			case !ok:
				if h != nil {
					h.cancel()
					delete(held, part)
				}
				continue
			}
			if h != nil && h.term == lease.Term {
				h.renewed = time.Now()
				continue
			}
			if h != nil {
				h.cancel()
				<-h.done
			}
			pctx, cancel := context.WithCancel(ctx)
			h = &heldPart{term: lease.Term, cancel: cancel, done: make(chan struct{}), renewed: time.Now()}
			held[part] = h
			c.mu.Lock()
			delete(c.stopped, part)
			c.mu.Unlock()
			readers.Go(func() {
				defer close(h.done)
				if err := c.runPartition(pctx, part, h.term); err != nil && pctx.Err() == nil {
					c.cfg.Logger.Error("outbox: log reader: partition stopped", "reader", c.cfg.Reader, "partition", part, "err", err)
					c.mu.Lock()
					c.stopped[part] = err
					c.mu.Unlock()
				}
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		pool.Check()
	}
}

// runPartition reads one partition held in term until ctx ends or an
// error stops it. It returns nil when ctx ended or the cursor was fenced
// by a later term.
func (c *LogConsumer) runPartition(ctx context.Context, part int, term int64) error {
	st := c.l.store
	attrs := metric.WithAttributes(attribute.String("outbox.log.reader", c.cfg.Reader), attribute.Int("outbox.log.partition", part))
	var (
		after  driver.LogPosition
		commit *driver.LogCommit
		open   = true
		pause  time.Duration
	)
	for {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause):
			}
			pause = 0
		}
		if ctx.Err() != nil {
			return nil
		}
		if open {
			cur, err := st.OpenCursor(ctx, c.cfg.Reader, part, term)
			switch {
			case errors.Is(err, driver.ErrCursorFenced) || ctx.Err() != nil:
				return nil
			case errors.Is(err, driver.ErrCursorBehind):
				return err
			case err != nil:
				c.cfg.Logger.Warn("outbox: log reader: open cursor", "reader", c.cfg.Reader, "partition", part, "err", err)
				pause = c.cfg.Poll * 10
				continue
			}
			after, commit, open = cur.Position, nil, false
		}
		batch, err := st.Next(ctx, driver.LogNext{Reader: c.cfg.Reader, Partition: part, Term: term, After: after,
			Commit: commit, Topic: c.cfg.Topic, Limit: c.cfg.Batch})
		switch {
		case errors.Is(err, driver.ErrCursorFenced) || (err != nil && ctx.Err() != nil):
			return nil
		case errors.Is(err, driver.ErrLogRewound):
			return err
		case err != nil:
			// The commit may or may not have happened: read the cursor
			// again before going on.
			c.cfg.Logger.Warn("outbox: log reader: read", "reader", c.cfg.Reader, "partition", part, "err", err)
			open, pause = true, c.cfg.Poll*10
			continue
		}
		commit = nil
		c.held.Record(ctx, batch.HeldBack, attrs)
		if len(batch.Records) == 0 {
			pause = c.cfg.Poll
			continue
		}
		done, dead, herr := c.handle(ctx, part, batch.Records)
		done = min(max(done, 0), len(batch.Records))
		if done > 0 {
			to := batch.Records[done-1].Position
			commit = &driver.LogCommit{From: after, To: to, Dead: dead}
			after = to
		}
		if herr != nil || ctx.Err() != nil {
			if commit != nil {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_, err := st.Next(cctx, driver.LogNext{Reader: c.cfg.Reader, Partition: part, Term: term, After: after, Commit: commit, Limit: 1})
				cancel()
				if err != nil && herr == nil {
					c.cfg.Logger.Warn("outbox: log reader: commit on stop", "reader", c.cfg.Reader, "partition", part, "err", err)
				}
			}
			return herr
		}
	}
}

// LogCommit moves a reader's cursor over a batch it is done with (see
// [LogStore.Next]).
type LogCommit = driver.LogCommit

// LogNext asks a [LogStore] for a partition's next batch.
type LogNext = driver.LogNext

// LogNextRequest returns the request of up to limit records of partition
// part for reader in term after position after, with no commit.
func LogNextRequest(reader string, part int, term int64, after driver.LogPosition, limit int) LogNext {
	return LogNext{Reader: reader, Partition: part, Term: term, After: after, Limit: limit}
}
