package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/leaktest"
	"github.com/claimstore/claimstore/outbox"
)

// write adds ms in transactions of up to 100 messages when db is set
// (through the caller-transaction path), directly otherwise; it returns the
// message ids.
func write(t *testing.T, r *outbox.Repository, db *gorm.DB, ms []*outbox.Message) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i := 0; i < len(ms); i += 100 {
		chunk := ms[i:min(i+100, len(ms))]
		var err error
		if db != nil {
			err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return r.Add(ctx, tx, chunk...) })
		} else {
			err = r.Add(ctx, nil, chunk...)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range chunk {
			out = append(out, m.MessageID)
		}
	}
	return out
}

func TestRelayConfigInvalid(t *testing.T) {
	s, _ := backends()[0].open(t)
	r := newRepo(t, s)
	pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) []error { return nil })
	for _, cfg := range []outbox.RelayConfig{
		{BatchSize: -1}, {Lease: -time.Second}, {Loops: -2}, {PollInterval: time.Second, MaxPollInterval: time.Millisecond},
		{TargetBroker: strings.Repeat("b", 100)}, {WorkerID: strings.Repeat("w", 200)},
	} {
		if _, err := outbox.NewRelay(r, pub, cfg); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", cfg, err)
		}
	}
	if _, err := outbox.NewRelay(nil, pub, outbox.RelayConfig{}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil repository: %v", err)
	}
	rl, err := outbox.NewRelay(r, pub, outbox.RelayConfig{Lease: 10 * time.Second, PublishTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c := rl.Config(); c.PublishTimeout != 5*time.Second || c.BatchSize != outbox.DefaultBatchSize || c.WorkerID == "" {
		t.Fatalf("defaults: %+v", c)
	}
}

// Several relays at once over one table, while messages are still being
// written: every message reaches the stream exactly once and none is lost.
func TestRelaysPublishEachMessageOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		const n, relays = 600, 3
		all := msgs("once", testSubject, n)
		var want []string
		want = append(want, write(t, repo, db, all[:n/2])...)
		var rs []*running
		for i := range relays {
			rs = append(rs, startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
				WorkerID: fmt.Sprintf("relay-%d", i), BatchSize: 25, Loops: 2, Lease: 5 * time.Second,
				PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
			}))
		}
		want = append(want, write(t, repo, db, all[n/2:])...)
		waitFor(t, 60*time.Second, "all messages published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
		var published, lost int64
		for _, r := range rs {
			r.stop(t)
			st := r.relay.Stats()
			published += st.Published
			lost += st.LeaseLost
			if st.Published == 0 {
				t.Errorf("relay %s published nothing: the load was not shared", r.relay.Config().WorkerID)
			}
		}
		if published != n || lost != 0 {
			t.Fatalf("relays marked %d messages published (lease lost on %d), want %d and 0", published, lost, n)
		}
		c := counts(t, repo)
		if c[outbox.StatusPublished] != n || c[outbox.StatusProcessing]+c[outbox.StatusPending]+c[outbox.StatusFailed]+c[outbox.StatusAbandoned] != 0 {
			t.Fatalf("counts %v", c)
		}
		nb.checkExactlyOnce(t, want)
	})
}

// A relay that dies after publishing a batch and before marking it: the
// batch stays processing until its lease expires, then another relay claims
// and publishes it again, and the stream keeps one copy of each message.
func TestRelayCrashLeavesBatchToAnother(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		const n, batch = 200, 50
		want := write(t, repo, db, msgs("crash", testSubject, n))
		real := nb.publisher(t, 5*time.Second)
		published := make(chan struct{})
		hold := make(chan struct{})
		var once sync.Once
		crashing := outbox.PublisherFunc(func(ctx context.Context, ms []outbox.Message) []error {
			errs := real.Publish(ctx, ms)
			once.Do(func() { close(published) })
			<-hold // the process dies before it can mark
			return errs
		})
		const lease = time.Second
		a, err := outbox.NewRelay(repo, crashing, outbox.RelayConfig{WorkerID: "doomed", BatchSize: batch, Lease: lease, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		outbox.CrashOnCancel(a)
		ra := runRelay(t, a)
		<-published
		ra.cancel()
		close(hold)
		ra.stop(t)
		stuck, err := repo.Processing(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(stuck) != batch {
			t.Fatalf("%d rows processing after the crash, want the batch of %d", len(stuck), batch)
		}
		for _, m := range stuck {
			if m.LockedBy != "doomed" {
				t.Fatalf("row %d locked by %q", m.ID, m.LockedBy)
			}
		}
		if a := nb.audit(t); a.Messages != batch {
			t.Fatalf("stream holds %d messages after the crash, want the published batch of %d", a.Messages, batch)
		}
		rb := startRelay(t, repo, real, outbox.RelayConfig{WorkerID: "survivor", BatchSize: batch, Lease: 5 * time.Second,
			PollInterval: 20 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond})
		waitFor(t, 30*time.Second, "all messages published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
		rb.stop(t)
		if got := rb.relay.Stats().Published; got != n {
			t.Fatalf("survivor published %d, want all %d including the dead relay's batch", got, n)
		}
		for _, m := range stuck {
			if got := get(t, s, m.ID); got.Status != outbox.StatusPublished || got.LockedBy != "survivor" {
				t.Fatalf("dead relay's row after recovery: %+v", got)
			}
		}
		nb.checkExactlyOnce(t, want)
	})
}

// The broker goes away for a while: messages fail with backoff, none is
// abandoned while retries remain, and all are published once it is back.
func TestRelaySurvivesBrokerOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		policy := outbox.RetryPolicy{BaseDelay: 50 * time.Millisecond, Multiplier: 2, MaxDelay: 400 * time.Millisecond, Jitter: 0.2, MaxRetries: 100}
		repo := newRepo(t, s, outbox.WithRetryPolicy(policy))
		want := write(t, repo, db, msgs("before", testSubject, 100))
		r := startRelay(t, repo, nb.publisher(t, 300*time.Millisecond), outbox.RelayConfig{
			BatchSize: 20, Lease: 2 * time.Second, PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		})
		waitFor(t, 30*time.Second, "first messages published", func() bool { return counts(t, repo)[outbox.StatusPublished] == 100 })
		nb.stop()
		want = append(want, write(t, repo, db, msgs("during", testSubject, 100))...)
		waitFor(t, 30*time.Second, "failed attempts while the broker is down", func() bool {
			return counts(t, repo)[outbox.StatusFailed] > 0
		})
		failed, err := repo.Failed(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range failed {
			if m.RetryCount < 1 || m.NextRetryAt == nil || m.LastError == "" || m.NextRetryAt.Before(*m.LastProcessedAt) {
				t.Fatalf("failed row without backoff state: %+v", m)
			}
		}
		time.Sleep(time.Second) // several retry rounds against a dead broker
		if c := counts(t, repo); c[outbox.StatusAbandoned] != 0 {
			t.Fatalf("abandoned while retries remain: %v", c)
		}
		nb.start()
		waitFor(t, 60*time.Second, "all messages published after the outage", func() bool {
			return counts(t, repo)[outbox.StatusPublished] == 200
		})
		r.stop(t)
		if st := r.relay.Stats(); st.Failed == 0 || st.Abandoned != 0 {
			t.Fatalf("relay stats %+v: want failed attempts and nothing abandoned", st)
		}
		nb.checkExactlyOnce(t, want)
	})
}

// A message the broker never accepts (no stream for its subject) is
// retried MaxRetries times, then abandoned with its error kept.
func TestRelayAbandonsAfterMaxRetries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		policy := outbox.RetryPolicy{BaseDelay: 10 * time.Millisecond, Multiplier: 2, MaxDelay: 50 * time.Millisecond, MaxRetries: 2}
		repo := newRepo(t, s, outbox.WithRetryPolicy(policy))
		const n = 20
		write(t, repo, db, msgs("lost", "nowhere.to.go", n))
		reader, mp := newMeter()
		r := startRelay(t, repo, nb.publisher(t, 2*time.Second), outbox.RelayConfig{
			BatchSize: n, Lease: 5 * time.Second, PollInterval: 10 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond, MeterProvider: mp,
		})
		waitFor(t, 60*time.Second, "messages abandoned", func() bool { return counts(t, repo)[outbox.StatusAbandoned] == n })
		r.stop(t)
		ab, err := repo.Abandoned(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ab {
			if m.RetryCount != 3 || !strings.Contains(m.LastError, "no response from stream") || m.NextRetryAt != nil || m.LockedUntil != nil {
				t.Fatalf("abandoned row %+v: want 3 attempts and the broker's error kept", m)
			}
		}
		got := collect(t, reader)
		if got.counter(outbox.MetricAbandoned) != n || got.counter(outbox.MetricFailed) != 2*n || got.counter(outbox.MetricPublished) != 0 {
			t.Fatalf("metrics: abandoned %d, failed %d, published %d; want %d, %d, 0", got.counter(outbox.MetricAbandoned),
				got.counter(outbox.MetricFailed), got.counter(outbox.MetricPublished), n, 2*n)
		}
		if a := nb.audit(t); a.Messages != 0 {
			t.Fatalf("stream holds %d messages", a.Messages)
		}
	})
}

// Cancelling the relay mid-run: it finishes its batches and returns,
// leaving no row processing under its lock; what it marked published is
// exactly what the stream holds.
func TestRelayGracefulShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		n := int64(2000)
		if b.name == "memory" || b.name == "sqlite" {
			n = 600 // slower claims: fewer rows keep the test short and still mid-run
		}
		want := write(t, repo, db, msgs("grace", testSubject, int(n)))
		r := startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
			WorkerID: "graceful", BatchSize: 20, Loops: 2, Lease: 10 * time.Second, DrainTimeout: 5 * time.Second,
		})
		waitFor(t, 30*time.Second, "some messages published", func() bool { return r.relay.Stats().Published >= 100 })
		r.stop(t)
		c := counts(t, repo)
		if c[outbox.StatusProcessing] != 0 || c[outbox.StatusPublished]+c[outbox.StatusPending] != n {
			t.Fatalf("after shutdown: %v; want no row processing, the rest pending", c)
		}
		if c[outbox.StatusPublished] == n {
			t.Fatal("the relay published everything before it was stopped; the test did not stop it mid-run")
		}
		if st := r.relay.Stats(); st.Published != c[outbox.StatusPublished] {
			t.Fatalf("relay stats %+v, table %v", st, c)
		}
		if a := nb.audit(t); a.Messages != uint64(c[outbox.StatusPublished]) || a.Duplicates() != 0 {
			t.Fatalf("stream holds %d (%d duplicates), table says %d published", a.Messages, a.Duplicates(), c[outbox.StatusPublished])
		}
		// The rest is published by the next relay.
		r2 := startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{BatchSize: 50, Loops: 2})
		waitFor(t, 60*time.Second, "the rest published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
		r2.stop(t)
		nb.checkExactlyOnce(t, want)
	})
}

// A relay stopped while its batch cannot be acknowledged (the broker is
// gone) waits DrainTimeout, then releases the batch back to pending
// without counting an attempt.
func TestRelayShutdownReleasesUnfinished(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		const n = 30
		write(t, repo, db, msgs("rel", testSubject, n))
		pub := nb.publisher(t, time.Minute)
		nb.stop()
		r := startRelay(t, repo, pub, outbox.RelayConfig{
			WorkerID: "stuck", BatchSize: n, Lease: 2 * time.Minute, DrainTimeout: 300 * time.Millisecond,
		})
		waitFor(t, 10*time.Second, "the batch claimed", func() bool { return r.relay.Stats().Claimed == n })
		time.Sleep(100 * time.Millisecond)
		r.stop(t)
		if live := leaktest.Remaining("claimstore/outbox.("); len(live) > 0 {
			t.Fatalf("%d goroutines of the relay alive after Run returned:\n%s", len(live), strings.Join(live, "\n\n"))
		}
		if r.took < 300*time.Millisecond || r.took > 5*time.Second {
			t.Fatalf("shutdown took %v; want the 300ms shutdown timeout plus the release", r.took)
		}
		if st := r.relay.Stats(); st.Released != n || st.Published != 0 || st.Failed != 0 {
			t.Fatalf("relay stats %+v: want all %d released", st, n)
		}
		pending, err := repo.Unprocessed(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != n {
			t.Fatalf("%d rows pending after release, want %d", len(pending), n)
		}
		for _, m := range pending {
			if m.Status != outbox.StatusPending || m.RetryCount != 0 || m.LockedBy != "" || m.LockedUntil != nil {
				t.Fatalf("released row %+v", m)
			}
		}
	})
}

// A relay publishes only the messages of its target broker.
func TestRelayTargetBroker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		mine := msgs("mine", testSubject, 30)
		theirs := msgs("theirs", testSubject, 20)
		for _, m := range mine {
			m.TargetBroker = "nats-east"
		}
		for _, m := range theirs {
			m.TargetBroker = "kafka"
		}
		want := write(t, repo, db, mine)
		write(t, repo, db, theirs)
		r := startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{TargetBroker: "nats-east", BatchSize: 7, PollInterval: 10 * time.Millisecond})
		waitFor(t, 30*time.Second, "the broker's messages published", func() bool { return r.relay.Stats().Published == 30 })
		time.Sleep(100 * time.Millisecond) // a few more polls
		r.stop(t)
		broker := "kafka"
		left, err := repo.List(context.Background(), outbox.Filter{TargetBroker: &broker})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range left {
			if m.Status != outbox.StatusPending {
				t.Fatalf("another broker's message was touched: %+v", m)
			}
		}
		if len(left) != 20 {
			t.Fatalf("%d messages of the other broker, want 20", len(left))
		}
		nb.checkExactlyOnce(t, want)
	})
}

// An idle relay polls less and less often: the wait doubles from
// PollInterval up to MaxPollInterval. The claim count comes from the claim
// latency histogram, which records every claim.
func TestRelayIdleBackoff(t *testing.T) {
	s, _ := backends()[0].open(t)
	repo := newRepo(t, s)
	pub := outbox.PublisherFunc(func(_ context.Context, ms []outbox.Message) []error { return make([]error, len(ms)) })
	claims := func(poll, maxPoll time.Duration) uint64 {
		reader, mp := newMeter()
		r := startRelay(t, repo, pub, outbox.RelayConfig{PollInterval: poll, MaxPollInterval: maxPoll, MeterProvider: mp})
		time.Sleep(time.Second)
		r.stop(t)
		n, _ := collect(t, reader).histogram(outbox.MetricClaimDuration)
		return n
	}
	// Fixed 10 ms polling claims about 100 times a second (a little more:
	// each wait is shortened by up to 20 % at random).
	if fixed := claims(10*time.Millisecond, 10*time.Millisecond); fixed < 50 {
		t.Fatalf("fixed 10ms polling claimed %d times in 1s, want about 100", fixed)
	}
	// Doubling from 10 ms to 320 ms: about 10+20+40+80+160+320+320 ms, so 7
	// or 8 claims in a second.
	if adaptive := claims(10*time.Millisecond, 320*time.Millisecond); adaptive < 4 || adaptive > 12 {
		t.Fatalf("adaptive polling claimed %d times in 1s, want 4..12", adaptive)
	}
	// Work resets the backoff: a message added to an idle relay is
	// published within about one maximum interval.
	r := startRelay(t, repo, pub, outbox.RelayConfig{PollInterval: 10 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := repo.Add(context.Background(), nil, msgs("wake", "t", 1)...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the message published", func() bool { return r.relay.Stats().Published == 1 })
	if took := time.Since(start); took > time.Second {
		t.Fatalf("an idle relay took %v to pick up a new message, want <= about 200ms", took)
	}
	r.stop(t)
}

// skewedClock reads the real time shifted by skew: the clock of a host that
// is ahead of (skew > 0) or behind (skew < 0) the database and the other
// relays.
func skewedClock(skew time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(skew) }
}

// waitSettled waits until every one of n messages is published, or until a
// publish has failed or a message was abandoned (which the skew tests
// forbid, so there is no point waiting for the retries).
func waitSettled(t *testing.T, repo *outbox.Repository, n int64) {
	t.Helper()
	waitFor(t, 60*time.Second, "all messages published (or a failure)", func() bool {
		c := counts(t, repo)
		return c[outbox.StatusPublished] == n || c[outbox.StatusFailed]+c[outbox.StatusAbandoned] > 0
	})
}

// A relay whose repository clock is off by far more than the lease, behind
// or ahead of the real time, publishes every message once: the publish
// deadline comes from the local monotonic clock, never from the lease time
// the skewed clock wrote, so no publish times out, nothing fails, nothing is
// abandoned and no mark is refused.
func TestRelaySkewedClockPublishes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, skew := range []time.Duration{-time.Hour, time.Hour} {
			t.Run(fmt.Sprintf("skew=%v", skew), func(t *testing.T) {
				s, db := b.open(t)
				nb := startBroker(t)
				repo := newRepo(t, s, outbox.WithClock(skewedClock(skew)))
				const n = 100
				want := write(t, repo, db, msgs("skew", testSubject, n))
				r := startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
					WorkerID: "skewed", BatchSize: 20, Loops: 2, Lease: 2 * time.Second,
					PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
				})
				waitSettled(t, repo, n)
				r.stop(t)
				c := counts(t, repo)
				st := r.relay.Stats()
				t.Logf("skew %v: counts %v, relay %+v", skew, c, st)
				if c[outbox.StatusPublished] != n || c[outbox.StatusFailed] != 0 || c[outbox.StatusAbandoned] != 0 {
					t.Fatalf("counts %v: want all %d published, none failed or abandoned", c, n)
				}
				if st.Published != n || st.Failed != 0 || st.Abandoned != 0 || st.LeaseLost != 0 || st.MarkErrors != 0 {
					t.Fatalf("relay stats %+v: want %d published and no failure, abandonment or refused mark", st, n)
				}
				nb.checkExactlyOnce(t, want)
			})
		}
	})
}

// Relays whose clocks disagree by far more than the lease share one table:
// one an hour behind, one on time, one an hour ahead. Their leases are
// judged by different clocks, so a relay may take over a batch another
// still works on; the fences keep every row's final state the new owner's,
// no publish fails, nothing is abandoned, and the stream holds each message
// once.
func TestRelaysWithSkewedClocksShareATable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		const n = 150
		var want []string
		var rs []*running
		var repos []*outbox.Repository
		for i, skew := range []time.Duration{-time.Hour, 0, time.Hour} {
			repo := newRepo(t, s, outbox.WithClock(skewedClock(skew)))
			repos = append(repos, repo)
			if i == 0 {
				want = write(t, repo, db, msgs("mixed", testSubject, n))
			}
			rs = append(rs, startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
				WorkerID: fmt.Sprintf("skew%+d", int(skew.Hours())), BatchSize: 10, Lease: 2 * time.Second,
				PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
			}))
		}
		waitSettled(t, repos[1], n)
		var published, lost int64
		for _, r := range rs {
			r.stop(t)
			st := r.relay.Stats()
			t.Logf("relay %s: %+v", r.relay.Config().WorkerID, st)
			published += st.Published
			lost += st.LeaseLost
			// A mark may fail when two relays mark the same rows at once
			// (a deadlock between them); its rows are claimed again after
			// their lease, so that is not asserted.
			if st.Failed != 0 || st.Abandoned != 0 {
				t.Errorf("relay %s: %+v; want no failure or abandonment", r.relay.Config().WorkerID, st)
			}
		}
		c := counts(t, repos[1])
		t.Logf("counts %v; marked published %d, marks refused by the fence %d", c, published, lost)
		if c[outbox.StatusPublished] != n || published != n {
			t.Fatalf("counts %v, relays marked %d published; want all %d, each marked once", c, published, n)
		}
		nb.checkExactlyOnce(t, want)
	})
}

// Relays on hosts whose wall clocks are an hour behind, right and an hour
// ahead share one table on the database clock (the repositories' default
// over a SQL store): they agree on every lease, so no relay takes over
// another's batch, no mark is refused, nothing fails and the stream holds
// each message once.
func TestRelaysOnDatabaseClockIgnoreHostSkew(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.name == "memory" {
			t.Skip("memstore's database clock is this host's")
		}
		s, db := b.open(t)
		nb := startBroker(t)
		const n = 150
		var want []string
		var rs []*running
		var repo *outbox.Repository
		for i, skew := range []time.Duration{-time.Hour, 0, time.Hour} {
			repo = newRepo(t, s)
			if !outbox.SetHostClock(repo, skewedClock(skew)) {
				t.Fatal("the repository does not read the database clock")
			}
			if i == 0 {
				want = write(t, repo, db, msgs("dbclock", testSubject, n))
			}
			rs = append(rs, startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
				WorkerID: fmt.Sprintf("host%+d", int(skew.Hours())), BatchSize: 10, Lease: 2 * time.Second,
				PollInterval: 10 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
			}))
		}
		waitSettled(t, repo, n)
		var published int64
		for _, r := range rs {
			r.stop(t)
			st := r.relay.Stats()
			t.Logf("relay %s: %+v", r.relay.Config().WorkerID, st)
			published += st.Published
			if st.Failed != 0 || st.Abandoned != 0 || st.LeaseLost != 0 || st.MarkErrors != 0 {
				t.Errorf("relay %s: %+v; want no failure, abandonment, refused mark or mark error", r.relay.Config().WorkerID, st)
			}
		}
		if c := counts(t, repo); c[outbox.StatusPublished] != n || published != n {
			t.Fatalf("counts %v, relays marked %d published; want all %d, each marked once", c, published, n)
		}
		nb.checkExactlyOnce(t, want)
	})
}
