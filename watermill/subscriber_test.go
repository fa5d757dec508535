package watermill_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/leaktest"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// publishN publishes n messages to topic and returns their UUIDs.
func publishN(t *testing.T, pub message.Publisher, topic string, n int) map[string]bool {
	t.Helper()
	ids := make(map[string]bool, n)
	var msgs []*message.Message
	for i := range n {
		m := message.NewMessage(watermill.NewUUID(), []byte(strconv.Itoa(i)))
		ids[m.UUID] = true
		msgs = append(msgs, m)
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestGroupsShareAndEachSeesEveryMessage: eight subscribers of one group
// consume in parallel and handle every message exactly once between them
// (none twice: no lease runs out); a second group, registered like the
// first before the messages were published, sees every message too; a
// third group, registered after, starts from the oldest message.
func TestGroupsShareAndEachSeesEveryMessage(t *testing.T) {
	eachBackend(t, 8, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		tables := newTables(t, db)
		const topic, messages, parallel = "events", 600, 8
		var shared, other []*cswm.Subscriber
		for range parallel {
			shared = append(shared, newSubscriber(t, db, tables.Messages, "shared", cswm.SubscriberConfig{BatchSize: 20}))
		}
		other = append(other, newSubscriber(t, db, tables.Messages, "other", cswm.SubscriberConfig{}))
		for _, s := range append(shared, other...) {
			if err := s.SubscribeInitialize(topic); err != nil {
				t.Fatal(err)
			}
		}
		want := publishN(t, newPublisher(t, db, tables.Messages), topic, messages)
		late := newSubscriber(t, db, tables.Messages, "late", cswm.SubscriberConfig{})

		consume := func(subs []*cswm.Subscriber) (map[string]int, []int) {
			counts := map[string]int{}
			per := make([]int, len(subs))
			total := 0
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			ackAll(t, cctx, subs, topic, func(i int, uuid string) {
				counts[uuid]++
				per[i]++
				total++
				if total == messages {
					// Every message handled: a repeat would come within
					// the next moment.
					time.AfterFunc(500*time.Millisecond, stop)
				}
			})()
			return counts, per
		}
		for name, subs := range map[string][]*cswm.Subscriber{"shared": shared, "other": other, "late": {late}} {
			counts, per := consume(subs)
			if ctx.Err() != nil {
				t.Fatalf("group %s: %v", name, ctx.Err())
			}
			for id := range want {
				if counts[id] != 1 {
					t.Errorf("group %s: message %s handled %d times", name, id, counts[id])
				}
			}
			if len(counts) != len(want) {
				t.Errorf("group %s: %d distinct messages, want %d", name, len(counts), len(want))
			}
			t.Logf("group %s: messages per subscriber %v", name, per)
		}
		c, err := shared[0].Deliveries().Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c[outbox.StatusPublished] != 3*messages {
			t.Errorf("deliveries: %v, want %d done", c, 3*messages)
		}
	})
}

// TestNackGoesThroughTheRetryLadder: a nacked message comes back after
// the retry policy's delay, and after MaxRetries more nacks it is
// abandoned with its error kept, while the other message is acked.
func TestNackGoesThroughTheRetryLadder(t *testing.T) {
	eachBackend(t, 4, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		tables := newTables(t, db)
		policy := outbox.RetryPolicy{BaseDelay: 200 * time.Millisecond, Multiplier: 1, MaxDelay: 200 * time.Millisecond, MaxRetries: 2}
		sub := newSubscriber(t, db, tables.Messages, "g", cswm.SubscriberConfig{RetryPolicy: &policy})
		if err := sub.SubscribeInitialize("t"); err != nil {
			t.Fatal(err)
		}
		pub := newPublisher(t, db, tables.Messages)
		bad := message.NewMessage(watermill.NewUUID(), []byte("bad"))
		good := message.NewMessage(watermill.NewUUID(), []byte("good"))
		if err := pub.Publish("t", bad, good); err != nil {
			t.Fatal(err)
		}
		ch, err := sub.Subscribe(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		var nacks []time.Time
		for len(nacks) < policy.MaxRetries+1 {
			select {
			case m := <-ch:
				if m.UUID == good.UUID {
					m.Ack()
					continue
				}
				nacks = append(nacks, time.Now())
				m.Nack()
			case <-ctx.Done():
				t.Fatalf("after %d nacks: %v", len(nacks), ctx.Err())
			}
		}
		for i := 1; i < len(nacks); i++ {
			if d := nacks[i].Sub(nacks[i-1]); d < policy.BaseDelay-20*time.Millisecond {
				t.Errorf("nack %d came back after %v, before the retry delay %v", i, d, policy.BaseDelay)
			}
		}
		select {
		case m := <-ch:
			t.Fatalf("message %s delivered after its retries were used up", m.UUID)
		case <-time.After(3 * policy.MaxDelay):
		}
		abandoned, err := sub.Deliveries().List(ctx, outbox.Filter{Statuses: []outbox.Status{outbox.StatusAbandoned}})
		if err != nil {
			t.Fatal(err)
		}
		if len(abandoned) != 1 || cswm.UUID(&abandoned[0]) != bad.UUID || abandoned[0].LastError != cswm.ErrNacked.Error() {
			t.Fatalf("abandoned: %+v", abandoned)
		}
		published, err := sub.Deliveries().List(ctx, outbox.Filter{Statuses: []outbox.Status{outbox.StatusPublished}})
		if err != nil || len(published) != 1 || cswm.UUID(&published[0]) != good.UUID {
			t.Fatalf("done: %+v, %v", published, err)
		}
	})
}

// TestDeadSubscribersMessageComesBackAfterLease: a subscriber whose
// handler never answers holds its message for the lease; then another
// subscriber of the group receives it, and the first one's late release
// changes nothing.
func TestDeadSubscribersMessageComesBackAfterLease(t *testing.T) {
	eachBackend(t, 4, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		tables := newTables(t, db)
		const lease = time.Second
		stuck := newSubscriber(t, db, tables.Messages, "g", cswm.SubscriberConfig{Lease: lease})
		alive := newSubscriber(t, db, tables.Messages, "g", cswm.SubscriberConfig{Lease: lease})
		if err := stuck.SubscribeInitialize("t"); err != nil {
			t.Fatal(err)
		}
		sent := message.NewMessage(watermill.NewUUID(), []byte("x"))
		if err := newPublisher(t, db, tables.Messages).Publish("t", sent); err != nil {
			t.Fatal(err)
		}
		stuckCh, err := stuck.Subscribe(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		var first *message.Message
		select {
		case first = <-stuckCh: // never acked
		case <-ctx.Done():
			t.Fatal("nothing received")
		}
		took := time.Now()
		aliveCh, err := alive.Subscribe(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-aliveCh:
			if m.UUID != sent.UUID {
				t.Fatalf("received %s, want %s", m.UUID, sent.UUID)
			}
			if d := time.Since(took); d < lease-100*time.Millisecond {
				t.Fatalf("received again after %v, within the lease %v", d, lease)
			}
			m.Ack()
		case <-ctx.Done():
			t.Fatal("the message did not come back after the lease")
		}
		_ = first
		if err := stuck.Close(); err != nil { // its release is refused by the fence
			t.Fatal(err)
		}
		if err := alive.Close(); err != nil {
			t.Fatal(err)
		}
		c, err := alive.Deliveries().Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c[outbox.StatusPublished] != 1 || c[outbox.StatusPending] != 0 {
			rows, _ := alive.Deliveries().List(ctx, outbox.Filter{})
			for _, r := range rows {
				t.Logf("%+v", r)
			}
			t.Fatalf("deliveries: %v, want the one message done", c)
		}
	})
}

// TestSubscriberRefusesBadInput: bad topics and settings are invalid,
// and a closed subscriber refuses to subscribe.
func TestSubscriberRefusesBadInput(t *testing.T) {
	db := backends[2].open(t)
	tables := newTables(t, db)
	sub := newSubscriber(t, db, tables.Messages, "g", cswm.SubscriberConfig{})
	if _, err := sub.Subscribe(t.Context(), ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("empty topic: %v", err)
	}
	for name, cfg := range map[string]cswm.SubscriberConfig{
		"negative batch": {BatchSize: -1},
		"bad table":      {Table: "no-dashes"},
		"poll order":     {PollInterval: time.Second, MaxPollInterval: time.Millisecond},
	} {
		if _, err := cswm.NewSubscriber(db, cfg); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := cswm.NewSubscriber(nil, cswm.SubscriberConfig{}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil db: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(t.Context(), "t"); !errors.Is(err, cswm.ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

// TestCloseOutlivesTheSubscriptions: Close returns only once every
// goroutine of the subscriber's subscriptions has ended, those ended by
// their context and those ended by Close alike.
func TestCloseOutlivesTheSubscriptions(t *testing.T) {
	db := backends[2].open(t)
	tables := newTables(t, db)
	sub := newSubscriber(t, db, tables.Messages, "g", cswm.SubscriberConfig{})
	ended, cancel := context.WithCancel(t.Context())
	first, err := sub.Subscribe(ended, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	cancel()
	for range first {
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// This subscriber's goroutines: those of other tests' subscribers
	// (a LogSubscriber of the universal suite, say) are not its own.
	if live := leaktest.Remaining("claimstore/watermill.(*Subscriber)"); len(live) > 0 {
		t.Fatalf("%d goroutines of the subscriber alive after Close returned:\n%s", len(live), strings.Join(live, "\n\n"))
	}
}
