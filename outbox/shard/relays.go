package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// Relays is a relay group per shard: PerShard [outbox.Relay]s over each
// shard's repository, run, stopped and drained together. Each relay
// claims only from its own shard's database, so shards relay
// independently: a shard whose database is down stalls only its own keys.
type Relays struct {
	relays [][]*outbox.Relay // [shard][relay]

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// NewRelays returns perShard relays for each shard of r (perShard 0 means
// 1), all publishing with pub and configured with cfg. When cfg.WorkerID is
// set, relay j of shard i is named cfg.WorkerID + "/s<i>r<j>"; when empty,
// each relay draws its own default id. Each relay logs to cfg.Logger
// (default slog.Default()) with the attribute shard=<i>.
//
// Per-key order on a shard holds only with one relay of Loops 1 and
// Window 1 per shard and target broker (see the package documentation);
// more relays per shard, Loops > 1 or Window > 1 publish more in
// parallel and give that order up.
//
// Errors wrap [dao.ErrInvalidArgument] for a nil router or publisher or a
// negative perShard, and are otherwise those of [outbox.NewRelay].
func NewRelays(r *Router, pub outbox.Publisher, cfg outbox.RelayConfig, perShard int) (*Relays, error) {
	if r == nil || pub == nil {
		return nil, fmt.Errorf("shard: new relays: %w: nil router or publisher", dao.ErrInvalidArgument)
	}
	if perShard < 0 {
		return nil, fmt.Errorf("shard: new relays: %w: %d relays per shard", dao.ErrInvalidArgument, perShard)
	}
	if perShard == 0 {
		perShard = 1
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	g := &Relays{relays: make([][]*outbox.Relay, r.Len())}
	for i, s := range r.shards {
		for j := range perShard {
			c := cfg
			if cfg.WorkerID != "" {
				c.WorkerID = fmt.Sprintf("%s/s%dr%d", cfg.WorkerID, i, j)
			}
			c.Logger = logger.With("shard", i)
			rel, err := outbox.NewRelay(s.Outbox, pub, c)
			if err != nil {
				return nil, fmt.Errorf("shard: new relays: shard %d: %w", i, err)
			}
			g.relays[i] = append(g.relays[i], rel)
		}
	}
	return g, nil
}

// Relay returns relay j of shard i; it panics for indexes out of range.
func (g *Relays) Relay(i, j int) *outbox.Relay { return g.relays[i][j] }

// Stats returns, per shard, the sum of the running totals of its relays.
func (g *Relays) Stats() []outbox.RelayStats {
	out := make([]outbox.RelayStats, len(g.relays))
	for i, rs := range g.relays {
		for _, r := range rs {
			s := r.Stats()
			o := &out[i]
			o.Claimed += s.Claimed
			o.Published += s.Published
			o.Failed += s.Failed
			o.Abandoned += s.Abandoned
			o.Released += s.Released
			o.LeaseLost += s.LeaseLost
			o.MarkErrors += s.MarkErrors
		}
	}
	return out
}

// Run runs every relay until ctx ends, then lets each drain as
// [outbox.Relay.Run] does — stop claiming, finish in-flight batches for up
// to DrainTimeout, mark what was acknowledged, release the rest — and
// returns when all have stopped. When one relay fails (Run returns an
// error only for a misconfiguration the store rejects), the others are
// stopped and drained too. It returns the relays' errors joined, each
// wrapped with its shard, or nil.
func (g *Relays) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, rs := range g.relays {
		for _, r := range rs {
			wg.Go(func() {
				if err := r.Run(ctx); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
					mu.Unlock()
					cancel()
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ErrAlreadyRunning is wrapped, with [dao.ErrInvalidArgument], by the
// error [Relays.Start] returns while the group is running; its text is
// "already running", after the call's own prefix.
var ErrAlreadyRunning = errors.New("already running")

// Start runs the group in the background (see [Relays.Run]) until
// [Relays.Stop] or the end of ctx. Errors wrap [dao.ErrInvalidArgument]
// and [ErrAlreadyRunning] when the group is already running.
func (g *Relays) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done != nil {
		return fmt.Errorf("shard: start relays: %w: %w", dao.ErrInvalidArgument, ErrAlreadyRunning)
	}
	ctx, g.cancel = context.WithCancel(ctx)
	g.done = make(chan error, 1)
	done := g.done
	go func() { done <- g.Run(ctx) }()
	return nil
}

// Stop ends a group started with [Relays.Start], waits until every relay
// has drained and stopped, and returns the error of [Relays.Run]. Stop on
// a group that is not running returns nil.
func (g *Relays) Stop() error {
	g.mu.Lock()
	cancel, done := g.cancel, g.done
	g.cancel, g.done = nil, nil
	g.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	return <-done
}
