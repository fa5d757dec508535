package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/argerr"
	"github.com/claimstore/claimstore/internal/poolwatch"
)

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
	// WorkerID identifies this process among the readers of one name
	// (the holder of the partitions' leases); default [DefaultWorkerID].
	WorkerID string
	// Holder is read as WorkerID when WorkerID is empty.
	//
	// Deprecated: use WorkerID.
	Holder string
	// Leases keeps the partitions' leases (sqlstore.NewLeases,
	// memstore.NewLeases); required. The lease of partition p of reader
	// r of log t is named "log:<t>:<r>:<p>", where t is LogTable.
	Leases driver.LeaseStore
	// LogTable names the log in the lease names; default "log".
	LogTable string
	// Lease is how long a partition stays held without a renewal;
	// renewed every Lease/3. Default 15 s.
	Lease time.Duration
	// LeaseTTL is read as Lease when Lease is zero.
	//
	// Deprecated: use Lease.
	LeaseTTL time.Duration
	// Batch is the most records read at once; default 500.
	Batch int
	// PollInterval is the pause after an empty read; default 50 ms.
	PollInterval time.Duration
	// Poll is read as PollInterval when PollInterval is zero.
	//
	// Deprecated: use PollInterval.
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
	c.WorkerID = cmp.Or(c.WorkerID, c.Holder)
	if c.WorkerID == "" {
		c.WorkerID = DefaultWorkerID()
	}
	c.LogTable = cmp.Or(c.LogTable, "log")
	c.Lease = cmp.Or(c.Lease, c.LeaseTTL, 15*time.Second)
	c.Batch = cmp.Or(c.Batch, 500)
	c.PollInterval = cmp.Or(c.PollInterval, c.Poll, 50*time.Millisecond)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.MeterProvider == nil {
		c.MeterProvider = noop.NewMeterProvider()
	}
	if c.Batch < 1 || c.PollInterval <= 0 {
		return argerr.Errorf("log reader %q: batch %d, poll interval %v", c.Reader, c.Batch, c.PollInterval)
	}
	return driver.CheckLease(c.Lease)
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
			if _, err := c.cfg.Leases.ReleaseLease(rctx, c.leaseName(part), c.cfg.WorkerID, h.term); err != nil {
				c.cfg.Logger.Warn("outbox: log reader: release lease", "reader", c.cfg.Reader, "partition", part, "err", err)
			}
		}
	}()
	// Each partition held reads on a connection of its own, and the
	// leases take one more.
	pool := poolwatch.New(poolwatch.Of(c.l.store), c.cfg.Logger, c.l.parts+1)
	tick := time.NewTicker(c.cfg.Lease / 3)
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
			lease, ok, err := c.cfg.Leases.AcquireLease(ctx, c.leaseName(part), c.cfg.WorkerID, c.cfg.Lease)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return nil
				}
				c.cfg.Logger.Warn("outbox: log reader: lease", "reader", c.cfg.Reader, "partition", part, "err", err)
				if h != nil && time.Since(h.renewed) > c.cfg.Lease*2/3 {
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
				pause = c.cfg.PollInterval * 10
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
			open, pause = true, c.cfg.PollInterval*10
			continue
		}
		commit = nil
		c.held.Record(ctx, batch.HeldBack, attrs)
		if len(batch.Records) == 0 {
			pause = c.cfg.PollInterval
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
