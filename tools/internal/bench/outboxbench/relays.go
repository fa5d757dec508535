package outboxbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// relays are a variant's relays, made before they start.
type relays struct {
	all    []*outbox.Relay
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newRelays makes o.Relays relays over the variant's repository, each on
// a NATS connection of its own. They run from start until stop or the end
// of the variant.
func (v *variant) newRelays(ctx context.Context) (*relays, error) {
	rl := &relays{}
	rl.ctx, rl.cancel = context.WithCancel(ctx)
	v.onExit(rl.stop)
	for i := range v.o.Relays {
		nc, err := outboxenv.ConnectNATS(v.broker.URL, fmt.Sprintf("claimstore bench relay %d", i))
		if err != nil {
			return nil, err
		}
		v.onExit(nc.Close)
		cfg := v.relayConfig(i)
		pub, err := natspub.New(nc, natspub.Config{MaxPending: max(8192, 2*v.o.Batch*v.o.Workers*max(1, cfg.Window))})
		if err != nil {
			return nil, err
		}
		r, err := outbox.NewRelay(v.repo, pub, cfg)
		if err != nil {
			return nil, err
		}
		rl.all = append(rl.all, r)
	}
	return rl, nil
}

// relayConfig returns the settings of relay i of the variant: the
// earlier variant runs without a publish window.
func (v *variant) relayConfig(i int) outbox.RelayConfig {
	window := v.o.Window
	if v.name == VariantEarlier {
		window = 1
	}
	return outbox.RelayConfig{
		WorkerID: fmt.Sprintf("bench-%s-%d", v.tag, i), BatchSize: v.o.Batch, Loops: v.o.Workers, Window: window, Lease: v.o.Lease,
		PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond, WriteTimeout: v.o.Lease, Logger: v.o.Logger,
	}
}

// start starts every relay; call it once.
func (rl *relays) start() {
	for _, r := range rl.all {
		rl.wg.Go(func() { _ = r.Run(rl.ctx) })
	}
}

// stop stops the relays and waits for them.
func (rl *relays) stop() {
	rl.cancel()
	rl.wg.Wait()
}

// published returns the number of messages the relays have published.
func (rl *relays) published() int64 {
	var n int64
	for _, r := range rl.all {
		n += r.Stats().Published
	}
	return n
}
