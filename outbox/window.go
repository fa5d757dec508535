package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// window holds the batches one loop has claimed and not yet marked, at
// most RelayConfig.Window: a slot is taken before each claim and given back
// when the batch is marked (or when the claim returned nothing). Each
// claimed batch publishes in a goroutine of its own; one marker goroutine
// marks the outcomes in the order their publishes end, all outcomes that
// are waiting together.
type window struct {
	r      *Relay
	ctx    context.Context
	log    *slog.Logger
	worker string
	slots  chan struct{} // one token per batch claimed and not yet marked
	done   chan outcome  // ended publishes, for the marker; never full
	pubs   sync.WaitGroup
	marker sync.WaitGroup
}

// newWindow starts the marker of the loop worker, whose context is ctx.
func (r *Relay) newWindow(ctx context.Context, log *slog.Logger, worker string) *window {
	w := &window{
		r: r, ctx: ctx, log: log, worker: worker,
		slots: make(chan struct{}, r.cfg.Window),
		done:  make(chan outcome, r.cfg.Window),
	}
	w.marker.Go(w.markLoop)
	return w
}

// acquire waits for a free slot and takes it; false, with no slot taken,
// when ctx ends first.
func (w *window) acquire(ctx context.Context) bool {
	select {
	case w.slots <- struct{}{}:
		if ctx.Err() != nil {
			w.free(1)
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

// free gives back n slots.
func (w *window) free(n int) {
	for range n {
		<-w.slots
	}
}

// publish publishes batch, which holds a slot, in a goroutine of its own
// and hands the outcome to the marker, which frees the slot.
func (w *window) publish(batch []Message, leaseEnd time.Time) {
	w.pubs.Go(func() {
		o, crashed := w.r.publish(w.ctx, w.log, batch, leaseEnd)
		if crashed {
			w.free(1)
			return
		}
		w.done <- o // never blocks: at most Window outcomes hold slots
	})
}

// markLoop marks outcomes until drain closes done: each round takes every
// outcome waiting, marks them together and frees their slots.
func (w *window) markLoop() {
	for o := range w.done {
		outs := []outcome{o}
	more:
		for {
			select {
			case o, ok := <-w.done:
				if !ok {
					break more
				}
				outs = append(outs, o)
			default:
				break more
			}
		}
		if !(w.r.hardStop && w.ctx.Err() != nil) { // a crash marks nothing
			w.r.mark(w.ctx, w.log, w.worker, outs)
		}
		w.free(len(outs))
	}
}

// drain waits for the publishes in flight to end and for their outcomes
// to be marked. Call it once, after the loop's last publish.
func (w *window) drain() {
	w.pubs.Wait()
	close(w.done)
	w.marker.Wait()
}
