package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// gatedPublisher publishes with next once the test opens its gate, and
// records how many batches each loop (the LockedBy of the batch) has in
// its Publish at once.
type gatedPublisher struct {
	next outbox.Publisher
	gate chan struct{} // closed by the test

	mu       sync.Mutex
	inFlight map[string]int
	msgs     int // messages in Publish
	peak     map[string]int
	acked    map[string]bool // message ids the broker acknowledged
}

func newGatedPublisher(next outbox.Publisher) *gatedPublisher {
	return &gatedPublisher{next: next, gate: make(chan struct{}), inFlight: map[string]int{}, peak: map[string]int{}, acked: map[string]bool{}}
}

func (p *gatedPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	w := msgs[0].LockedBy
	p.mu.Lock()
	p.inFlight[w]++
	p.msgs += len(msgs)
	p.peak[w] = max(p.peak[w], p.inFlight[w])
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight[w]--
		p.msgs -= len(msgs)
		p.mu.Unlock()
	}()
	select {
	case <-p.gate:
	case <-ctx.Done():
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	}
	errs := p.next.Publish(ctx, msgs)
	p.mu.Lock()
	for i, err := range errs {
		if err == nil {
			p.acked[msgs[i].MessageID] = true
		}
	}
	p.mu.Unlock()
	return errs
}

// loopsFull reports whether each of the loops has exactly window batches
// in its Publish.
func (p *gatedPublisher) loopsFull(loops, window int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	full := 0
	for _, n := range p.inFlight {
		if n == window {
			full++
		}
	}
	return full == loops
}

// held returns the number of messages in Publish.
func (p *gatedPublisher) held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.msgs)
}

func (p *gatedPublisher) peaks() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.peak {
		out[k] = v
	}
	return out
}

func TestRelayWindowConfig(t *testing.T) {
	s, _ := backends()[0].open(t)
	r := newRepo(t, s)
	pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) []error { return nil })
	for _, w := range []int{-1, outbox.MaxWindow + 1} {
		if _, err := outbox.NewRelay(r, pub, outbox.RelayConfig{Window: w}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("window %d: %v, want ErrInvalidArgument", w, err)
		}
	}
	rl, err := outbox.NewRelay(r, pub, outbox.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rl.Config().Window; got != 1 {
		t.Fatalf("default window %d, want 1", got)
	}
}

// Each loop claims batches until its window is full and no further while
// their publishes are held: the relay never holds more than Concurrency ×
// Window batches. Once the publishes go on, every message is published
// once.
func TestRelayWindowBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		const loops, window, batch = 2, 3, 10
		const n = loops * window * batch * 3
		want := write(t, repo, db, msgs("window", testSubject, n))
		pub := newGatedPublisher(nb.publisher(t, 5*time.Second))
		r := startRelay(t, repo, pub, outbox.RelayConfig{
			WorkerID: "win", BatchSize: batch, Loops: loops, Window: window, Lease: time.Minute,
			PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		})
		waitFor(t, 30*time.Second, "every loop's window full", func() bool { return pub.loopsFull(loops, window) })
		// Held there, the loops claim nothing more: what they claimed is
		// what their windows hold. (A portable claim that lost races to
		// the other loop returns a short batch, so a full window may hold
		// fewer than window × batch messages.)
		time.Sleep(200 * time.Millisecond)
		held := pub.held()
		if st := r.relay.Stats(); st.Claimed != held || held > loops*window*batch {
			t.Fatalf("claimed %d with every window full, %d in the windows (at most %d)", st.Claimed, held, loops*window*batch)
		}
		if c := counts(t, repo); c[outbox.StatusProcessing] != held {
			t.Fatalf("counts %v with every window full, want %d processing", c, held)
		}
		close(pub.gate)
		waitFor(t, 60*time.Second, "all messages published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
		r.stop(t)
		for w, peak := range pub.peaks() {
			if peak > window {
				t.Errorf("loop %s had %d batches in flight, window %d", w, peak, window)
			}
		}
		if st := r.relay.Stats(); st.Published != n || st.LeaseLost != 0 || st.MarkErrors != 0 {
			t.Fatalf("stats %+v, want %d published", st, n)
		}
		nb.checkExactlyOnce(t, want)
	})
}

// A publish that fails for some messages while other batches of the same
// window are acknowledged: only the acknowledged messages are marked
// published, though their marks are written together; the others are
// failed, with their error, and not in the stream.
func TestRelayWindowPublishFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s, outbox.WithRetryPolicy(outbox.RetryPolicy{BaseDelay: time.Hour, Multiplier: 1, MaxDelay: time.Hour, MaxRetries: 3}))
		const n = 200
		all := write(t, repo, db, msgs("winfail", testSubject, n))
		// Every 7th message, and every message of one whole batch, fails.
		failing := func(id string) bool {
			var i int
			_, _ = fmt.Sscanf(id, "winfail-%d", &i)
			return i%7 == 3 || (i >= 100 && i < 110)
		}
		next := nb.publisher(t, 5*time.Second)
		pub := newGatedPublisher(outbox.PublisherFunc(func(ctx context.Context, ms []outbox.Message) []error {
			var ok []outbox.Message
			var at []int
			errs := make([]error, len(ms))
			for i := range ms {
				if failing(ms[i].MessageID) {
					errs[i] = errors.New("refused by the test")
				} else {
					ok = append(ok, ms[i])
					at = append(at, i)
				}
			}
			for j, err := range next.Publish(ctx, ok) {
				errs[at[j]] = err
			}
			return errs
		}))
		close(pub.gate)
		r := startRelay(t, repo, pub, outbox.RelayConfig{
			WorkerID: "winfail", BatchSize: 10, Loops: 2, Window: 4, Lease: time.Minute,
			PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		})
		var wantOK []string
		for _, id := range all {
			if !failing(id) {
				wantOK = append(wantOK, id)
			}
		}
		waitFor(t, 60*time.Second, "every message published or failed", func() bool {
			c := counts(t, repo)
			return c[outbox.StatusPublished]+c[outbox.StatusFailed] == n
		})
		r.stop(t)
		ms, err := repo.Store().Find(context.Background(), dao.Query{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			switch {
			case failing(m.MessageID):
				if m.Status != outbox.StatusFailed || m.RetryCount != 1 || !strings.Contains(m.LastError, "refused by the test") || m.PublishedAt != nil {
					t.Errorf("failed message %s: status %s, retries %d, error %q", m.MessageID, m.Status, m.RetryCount, m.LastError)
				}
			case m.Status != outbox.StatusPublished || !pub.acked[m.MessageID]:
				t.Errorf("message %s: status %s, acknowledged %v", m.MessageID, m.Status, pub.acked[m.MessageID])
			}
		}
		if st := r.relay.Stats(); st.Published != int64(len(wantOK)) || st.Failed != int64(n-len(wantOK)) {
			t.Fatalf("stats %+v, want %d published and %d failed", st, len(wantOK), n-len(wantOK))
		}
		nb.checkExactlyOnce(t, wantOK)
	})
}

// A relay stopped with full windows lets every batch in them finish its
// publish within DrainTimeout, marks them all published, and leaves the
// messages it had not claimed pending.
func TestRelayWindowShutdownDrains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		const loops, window, batch = 2, 3, 10
		const n = loops * window * batch * 2
		write(t, repo, db, msgs("windrain", testSubject, n))
		pub := newGatedPublisher(nb.publisher(t, 5*time.Second))
		r := startRelay(t, repo, pub, outbox.RelayConfig{
			WorkerID: "drain", BatchSize: batch, Loops: loops, Window: window, Lease: time.Minute,
			DrainTimeout: 20 * time.Second, PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		})
		waitFor(t, 30*time.Second, "every loop's window full", func() bool { return pub.loopsFull(loops, window) })
		inWindow := pub.held()
		if st := r.relay.Stats(); st.Claimed != inWindow {
			t.Fatalf("claimed %d, %d in the windows", st.Claimed, inWindow)
		}
		stopped := make(chan struct{})
		go func() { r.stop(t); close(stopped) }()
		time.Sleep(100 * time.Millisecond) // the relay is told to stop while the publishes are held
		select {
		case <-stopped:
			t.Fatal("Run returned while its window still published")
		default:
		}
		close(pub.gate)
		<-stopped
		c := counts(t, repo)
		if c[outbox.StatusPublished] != inWindow || c[outbox.StatusPending] != n-inWindow || c[outbox.StatusProcessing] != 0 {
			t.Fatalf("after shutdown: %v; want the %d messages of the windows published, the rest pending", c, inWindow)
		}
		if st := r.relay.Stats(); st.Published != inWindow || st.Released != 0 {
			t.Fatalf("stats %+v", st)
		}
		if a := nb.audit(t); a.Messages != uint64(inWindow) || a.Duplicates() != 0 {
			t.Fatalf("stream holds %d (%d duplicates), want %d", a.Messages, a.Duplicates(), inWindow)
		}
	})
}
