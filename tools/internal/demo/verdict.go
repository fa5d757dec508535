package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// wait prints a progress line every half second until every message is
// published or abandoned, a write fails or ctx ends, and returns how long
// the writes took from start.
func (r *run) wait(ctx context.Context, w *outboxenv.Writers, rl *relays, start time.Time) (time.Duration, error) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	writersDone := w.Done
	var writeDone time.Duration
	for {
		select {
		case err := <-w.Errs:
			return 0, fmt.Errorf("write: %w", err)
		case <-ctx.Done():
			return 0, fmt.Errorf("demo: %d of %d messages published when it gave up: %w", rl.published(), r.o.Messages, ctx.Err())
		case <-writersDone:
			writersDone = nil
			writeDone = time.Since(start)
		case <-tick.C:
			el := time.Since(start).Seconds()
			fmt.Fprintf(r.o.Progress, "  %5.1fs  written %d/%d  published %d  (%.0f msg/s)\n",
				el, w.Written.Load(), r.o.Messages, rl.published(), float64(rl.published())/el)
			if writersDone != nil {
				continue
			}
			c, err := r.env.Repo.Counts(ctx)
			if err != nil {
				return 0, err
			}
			if c[outbox.StatusPublished]+c[outbox.StatusAbandoned] == int64(r.o.Messages) {
				return writeDone, nil
			}
		}
	}
}

// verdict reads the stream back and prints the verdict; it returns an
// error unless every message is in the stream exactly once.
func (r *run) verdict(ctx context.Context, rl *relays, elapsed, writeDone time.Duration) error {
	counts, err := r.env.Repo.Counts(ctx)
	if err != nil {
		return err
	}
	audit, err := natspub.Audit(ctx, r.js, r.stream)
	if err != nil {
		return err
	}
	lost := 0
	for i := range r.o.Messages {
		if audit.IDs[fmt.Sprintf("order-%s-%d-created", r.tag, i)] == 0 {
			lost++
		}
	}
	r.writeRelays(rl)
	out, n := r.out, r.o.Messages
	fmt.Fprintf(out, "table:  %d published, %d abandoned, %d pending, %d failed, %d processing\n",
		counts[outbox.StatusPublished], counts[outbox.StatusAbandoned], counts[outbox.StatusPending], counts[outbox.StatusFailed], counts[outbox.StatusProcessing])
	fmt.Fprintf(out, "stream: %d messages, %d distinct message ids, %d duplicates, %d lost\n",
		audit.Messages, audit.Distinct(), audit.Duplicates(), lost)
	fmt.Fprintf(out, "busy:   %d writes found the database locked by another writer and were retried\n", r.busy.Load())
	fmt.Fprintf(out, "throughput: %d messages written in %v, all published in %v: %.0f msg/s end to end (write, claim, publish with ack, mark)\n",
		n, writeDone.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	ok := lost == 0 && audit.Duplicates() == 0 && audit.Messages == uint64(n) && audit.Distinct() == n &&
		counts[outbox.StatusPublished] == int64(n)
	if !ok {
		fmt.Fprintln(out, "verdict: FAILED")
		return errors.New("demo: the stream does not hold every message exactly once")
	}
	fmt.Fprintln(out, "verdict: OK: every message is in the stream exactly once")
	return nil
}

// writeRelays prints each relay's totals.
func (r *run) writeRelays(rl *relays) {
	fmt.Fprintf(r.out, "\nrelays:\n")
	for _, relay := range rl.all {
		st := relay.Stats()
		fmt.Fprintf(r.out, "  %-28s published %6d  failed %d  abandoned %d  lease lost %d\n",
			relay.Config().WorkerID, st.Published, st.Failed, st.Abandoned, st.LeaseLost)
	}
}
