package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// relays are the run's relays, each running in a goroutine of its own.
type relays struct {
	all    []*outbox.Relay
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error // the relays' Run errors
}

// startRelays starts o.Relays relays, each on a NATS connection of its
// own. They run until stop or the end of Run.
func (r *run) startRelays(ctx context.Context) (*relays, error) {
	ctx, cancel := context.WithCancel(ctx)
	rl := &relays{cancel: cancel, errs: make(chan error, r.o.Relays)}
	r.onExit(func() { _ = rl.stop() })
	for i := range r.o.Relays {
		relay, err := r.newRelay(i)
		if err != nil {
			return nil, err
		}
		rl.all = append(rl.all, relay)
		rl.wg.Go(func() {
			if err := relay.Run(ctx); err != nil {
				rl.errs <- err
			}
		})
	}
	return rl, nil
}

// newRelay connects relay i to NATS and makes it.
func (r *run) newRelay(i int) (*outbox.Relay, error) {
	nc, err := outboxenv.ConnectNATS(r.broker.URL, fmt.Sprintf("claimstore demo relay %d", i))
	if err != nil {
		return nil, err
	}
	r.onExit(nc.Close)
	pub, err := natspub.New(nc, natspub.Config{MaxPending: max(8192, 2*r.o.Batch*r.o.Workers)})
	if err != nil {
		return nil, err
	}
	return outbox.NewRelay(r.env.Repo, pub, r.relayConfig(i))
}

// relayConfig returns the settings of demo relay i.
func (r *run) relayConfig(i int) outbox.RelayConfig {
	return outbox.RelayConfig{
		WorkerID: fmt.Sprintf("demo-relay-%d-%s", i, r.tag), BatchSize: r.o.Batch, Loops: r.o.Workers,
		Lease: r.o.Lease, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, Logger: r.o.Logger,
	}
}

// stop stops the relays, waits for them, and returns the first error one
// of them ended with (once).
func (rl *relays) stop() error {
	rl.cancel()
	rl.wg.Wait()
	select {
	case err := <-rl.errs:
		return err
	default:
		return nil
	}
}

// published returns the number of messages the relays have published.
func (rl *relays) published() int64 {
	var n int64
	for _, r := range rl.all {
		n += r.Stats().Published
	}
	return n
}
