package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// ErrPartitionStopped is wrapped by the error that stops a partition of a
// [LogRelay] configured with StopOnRefusal, when the broker keeps
// refusing a message.
var ErrPartitionStopped = errors.New("outbox: log partition stopped")

// LogRelayConfig configures a [LogRelay].
type LogRelayConfig struct {
	// LogReaderConfig names the relay's cursor (Reader, e.g. "relay-nats")
	// and its leases; see [LogReaderConfig].
	LogReaderConfig
	// Retry decides the pause between the attempts at a refused message
	// and how many retries it gets (MaxRetries) before it goes to the
	// dead letters; default [DefaultRetryPolicy].
	Retry RetryPolicy
	// StopOnRefusal stops the partition, instead of moving the message to
	// the dead letters, when a message has used its retries or the broker
	// refused it for good: the partition's later messages wait until an
	// operator acts, and the reason is logged and reported by Stopped.
	StopOnRefusal bool
	// TrimEvery, when > 0, trims the log behind the slowest cursor at
	// that interval, TrimBatch records per partition per round.
	TrimEvery time.Duration
	// TrimBatch bounds one trim's deletion per partition; default 10,000.
	TrimBatch int
}

// LogRelay publishes the log to a broker, partition by partition, each
// batch in log order with the message id as the broker's de-duplication
// id (Nats-Msg-Id with outbox/natspub): at least once, and effectively
// once in a stream that drops duplicates inside its window. A message the
// broker refuses is tried again after the retry policy's delay, holding
// back its partition's later messages; past its retries, or at once when
// the error is [Permanent], it goes to the dead letters and the cursor
// moves on (or, with StopOnRefusal, the partition stops). Nothing is
// skipped in silence.
//
// Order: within a partition messages are published in log order and the
// cursor never moves past an unpublished one. When the broker refuses one
// message of a batch but accepts a later one (not the usual failure: a
// broker that is down refuses them all), the later one is already in the
// stream when the refused one is published again.
type LogRelay struct {
	log *Log
	pub Publisher
	cfg LogRelayConfig
	c   *LogConsumer

	mu       sync.Mutex
	attempts map[driver.LogPosition]int
}

// NewLogRelay returns a relay of log to pub. Errors wrap
// [dao.ErrInvalidArgument] for a nil log or publisher or a bad
// configuration.
func NewLogRelay(log *Log, pub Publisher, cfg LogRelayConfig) (*LogRelay, error) {
	if log == nil || pub == nil {
		return nil, fmt.Errorf("outbox: log relay: %w: nil log or publisher", dao.ErrInvalidArgument)
	}
	if cfg.Retry == (RetryPolicy{}) {
		cfg.Retry = DefaultRetryPolicy()
	}
	if err := cfg.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: log relay: %w", err)
	}
	if cfg.TrimBatch == 0 {
		cfg.TrimBatch = 10000
	}
	if cfg.TrimEvery < 0 || cfg.TrimBatch < 1 {
		return nil, fmt.Errorf("outbox: log relay: %w: trim every %v, batch %d", dao.ErrInvalidArgument, cfg.TrimEvery, cfg.TrimBatch)
	}
	r := &LogRelay{log: log, pub: pub, cfg: cfg, attempts: map[driver.LogPosition]int{}}
	c, err := log.Consumer(cfg.LogReaderConfig, r.handle)
	if err != nil {
		return nil, fmt.Errorf("outbox: log relay: %w", err)
	}
	r.c, r.cfg.LogReaderConfig = c, c.cfg
	return r, nil
}

// Run relays until ctx ends, then releases its partitions and returns
// nil. See [Log.Consume].
func (r *LogRelay) Run(ctx context.Context) error {
	if r.cfg.TrimEvery > 0 {
		var wg sync.WaitGroup
		tctx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(r.cfg.TrimEvery)
			defer t.Stop()
			for {
				select {
				case <-tctx.Done():
					return
				case <-t.C:
				}
				if _, err := r.log.Trim(tctx, r.cfg.TrimBatch); err != nil && tctx.Err() == nil {
					r.cfg.Logger.Warn("outbox: log relay: trim", "err", err)
				}
			}
		}()
		defer func() { cancel(); wg.Wait() }()
	}
	return r.c.Run(ctx)
}

// Stopped returns the partitions this relay stopped, with why.
func (r *LogRelay) Stopped() map[int]error { return r.c.Stopped() }

// handle publishes one batch and decides how far the cursor moves.
func (r *LogRelay) handle(ctx context.Context, part int, recs []LogRecord) (int, []LogDeadLetter, error) {
	msgs := make([]Message, len(recs))
	var pre []error
	for i, rec := range recs {
		m, err := MessageOf(rec)
		if err != nil {
			if pre == nil {
				pre = make([]error, len(recs))
			}
			pre[i] = Permanent(err)
		}
		msgs[i] = m
	}
	errs := r.pub.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		return 0, nil, fmt.Errorf("outbox: log relay: publisher returned %d results for %d messages", len(errs), len(msgs))
	}
	var dead []LogDeadLetter
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, err := range errs {
		if pre != nil && pre[i] != nil {
			err = pre[i]
		}
		if err == nil {
			delete(r.attempts, recs[i].Position)
			continue
		}
		if ctx.Err() != nil {
			return i, dead, nil
		}
		n := r.attempts[recs[i].Position]
		if !errors.Is(err, ErrPermanent) && n < r.cfg.Retry.MaxRetries {
			r.attempts[recs[i].Position] = n + 1
			delay := r.cfg.Retry.Delay(n, rand.Float64())
			r.cfg.Logger.Warn("outbox: log relay: publish refused, will retry", "reader", r.cfg.Reader, "partition", part,
				"message_id", recs[i].MessageID, "attempt", n+1, "delay", delay, "err", err)
			r.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			r.mu.Lock()
			return i, dead, nil
		}
		delete(r.attempts, recs[i].Position)
		if r.cfg.StopOnRefusal {
			return i, dead, fmt.Errorf("%w: partition %d: message %q refused after %d attempts: %w", ErrPartitionStopped, part, recs[i].MessageID, n+1, err)
		}
		r.cfg.Logger.Error("outbox: log relay: message moved to the dead letters", "reader", r.cfg.Reader, "partition", part,
			"message_id", recs[i].MessageID, "attempts", n+1, "err", err)
		dead = append(dead, LogDeadLetter{Reader: r.cfg.Reader, Record: recs[i], LastError: err.Error()})
	}
	return len(recs), dead, nil
}
