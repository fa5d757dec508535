package watermill_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	cswm "github.com/claimstore/claimstore/watermill"
)

// TestPostgresFanOutWritesWhatThePortableOneWrites is differential: the
// same messages (NULL-heavy, random priorities, topics and groups with
// non-ASCII names) are fanned out by the one-statement PostgreSQL fan-out
// into one set of tables and by the portable steps into another. Both
// leave the same deliveries, field by field, with the delivery keys
// [cswm.DeliveryKey] gives; the one-statement fan-out inserts the
// subscription's own deliveries claimed (at most the room it was given,
// oldest first) and returns exactly those; acks sent with the next step
// mark them published, and acks of deliveries another worker holds mark
// nothing.
func TestPostgresFanOutWritesWhatThePortableOneWrites(t *testing.T) {
	db := testdb.Postgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	topics := []string{"orders", "トピック", "a b/c"}
	groups := []string{"billing", "", "グループ-ü"}
	const own = 7
	for round := range 3 {
		rng := rand.New(rand.NewPCG(uint64(round), 42))
		msgs := randomMessages(rng, topics, 60)
		fast, slow := newTables(t, db), newTables(t, db)
		var subs [2]*cswm.Subscriber
		for i, tables := range []cswm.Tables{fast, slow} {
			for _, g := range groups {
				for _, topic := range topics[:2] { // no group reads the third topic
					s := newSubscriber(t, db, tables.Messages, g, cswm.SubscriberConfig{})
					if err := s.SubscribeInitialize(topic); err != nil {
						t.Fatal(err)
					}
				}
			}
			subs[i] = newSubscriber(t, db, tables.Messages, groups[2], cswm.SubscriberConfig{FanOutBatchSize: 25})
			repo := repository(t, db, tables.Messages)
			if err := repo.Add(ctx, nil, cloneMessages(msgs)...); err != nil {
				t.Fatal(err)
			}
		}
		if !cswm.FansOutInOneStatement(ctx, subs[0]) {
			t.Fatal("the PostgreSQL subscriber does not fan out in one statement")
		}
		cswm.FanOutPortably(subs[1])
		const worker = "w/1"
		var mine []outbox.Message
		for i, s := range subs {
			steps := 0
			var acks []int64 // the previous step's deliveries, acked with the next
			for {
				// The room varies, none some steps: then every delivery
				// is inserted pending.
				room := []int{own, 0, 3}[steps%3]
				n, got, acked, err := cswm.FanOut(ctx, s, worker, topics[1], room, acks)
				if err != nil {
					t.Fatal(err)
				}
				if acked != len(acks) {
					t.Fatalf("step %d marked %d acks of %d", steps, acked, len(acks))
				}
				acks = ids(got)
				if i == 0 {
					mine = append(mine, got...)
				}
				if n == 0 {
					break
				}
				steps++
				if i == 1 {
					if len(got) != 0 {
						t.Fatalf("portable fan-out returned %d deliveries", len(got))
					}
					continue
				}
				if len(got) > room {
					t.Fatalf("fan-out returned %d deliveries, room was %d", len(got), room)
				}
				if room > 0 && n > room {
					t.Fatalf("fan-out claimed %d messages, room was %d", n, room)
				}
			}
			if steps == 0 {
				t.Fatal("no fan-out step claimed anything")
			}
		}
		checkFanOut(t, ctx, db, fast, slow, msgs, mine, worker, topics[1], groups[2])
		checkAckFence(t, ctx, subs[0], topics[1], groups[2])
	}
}

// checkAckFence: acks sent with a fan-out by a worker that does not hold
// the deliveries (another claimed them) mark nothing.
func checkAckFence(t *testing.T, ctx context.Context, s *cswm.Subscriber, topic, group string) {
	t.Helper()
	held, err := s.Deliveries().ClaimBatch(ctx, "w/2", 1000, cswm.DeliveryKey(group, topic))
	if err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 {
		t.Fatal("no pending delivery of the own group to claim")
	}
	_, _, acked, err := cswm.FanOut(ctx, s, "w/1", topic, 0, ids(held))
	if err != nil {
		t.Fatal(err)
	}
	if acked != 0 {
		t.Errorf("acks of another worker's deliveries: %d marked, want 0", acked)
	}
	rows, err := s.Deliveries().Store().Find(ctx, dao.Query{Where: dao.In("id", anyIDs(held)...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Status != outbox.StatusProcessing || r.LockedBy != "w/2" {
			t.Errorf("delivery %d held by w/2 is now %s, locked by %q", r.ID, r.Status, r.LockedBy)
		}
	}
}

// anyIDs returns the primary keys of msgs as criteria values.
func anyIDs(msgs []outbox.Message) []any {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// checkFanOut compares the tables fanned out in one statement (fast) and
// portably (slow), and the deliveries the fast fan-out returned (mine).
func checkFanOut(t *testing.T, ctx context.Context, db *gorm.DB, fast, slow cswm.Tables, msgs []*outbox.Message, mine []outbox.Message, worker, topic, group string) {
	t.Helper()
	read := func(table string) map[[2]string]outbox.Message {
		var rows []outbox.Message
		if err := db.WithContext(ctx).Table(table).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		out := map[[2]string]outbox.Message{}
		for _, r := range rows {
			out[[2]string{r.MessageID, r.TargetBroker}] = r
		}
		return out
	}
	for _, tables := range []cswm.Tables{fast, slow} {
		for _, m := range read(tables.Messages) {
			if m.Status != outbox.StatusPublished || m.PublishedAt == nil || m.LockedUntil != nil {
				t.Errorf("%s: message %s left %s (published_at %v, locked_until %v)", tables.Messages, m.MessageID, m.Status, m.PublishedAt, m.LockedUntil)
			}
		}
	}
	got, want := read(fast.Deliveries), read(slow.Deliveries)
	if len(got) != len(want) {
		t.Errorf("deliveries: %d in one statement, %d portably", len(got), len(want))
	}
	byID := map[int64]outbox.Message{}
	for _, m := range mine {
		byID[m.ID] = m
	}
	ownKey := cswm.DeliveryKey(group, topic)
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("delivery %v missing", k)
			continue
		}
		if w.TargetBroker != cswm.DeliveryKey(w.PartitionKey, w.Topic) {
			t.Errorf("portable delivery %v: key is not DeliveryKey(%q, %q)", k, w.PartitionKey, w.Topic)
		}
		if g.Topic != w.Topic || g.Type != w.Type || string(g.Payload) != string(w.Payload) ||
			fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) || g.PartitionKey != w.PartitionKey ||
			g.Priority != w.Priority || g.MaxRetries != w.MaxRetries || g.RetryCount != 0 ||
			!g.CreatedAt.Equal(w.CreatedAt) || g.CorrelationID != w.CorrelationID ||
			g.CausationID != w.CausationID || g.NextRetryAt != nil || g.LastError != "" {
			t.Errorf("delivery %v:\n one statement %+v\n portable      %+v", k, g, w)
		}
		r, returned := byID[g.ID]
		switch {
		case returned:
			// Returned claimed by worker, then acked with the next step.
			if r.TargetBroker != ownKey || r.Status != outbox.StatusProcessing || r.LockedBy != worker ||
				r.LockedUntil == nil || time.Until(*r.LockedUntil) < outbox.DefaultLease-time.Minute {
				t.Errorf("returned delivery %v is not claimed by %s: %+v", k, worker, r)
			}
			if r.MessageID != g.MessageID || r.TargetBroker != g.TargetBroker || string(r.Payload) != string(g.Payload) ||
				fmt.Sprint(r.Headers) != fmt.Sprint(g.Headers) || !r.CreatedAt.Equal(g.CreatedAt) || r.Priority != g.Priority {
				t.Errorf("returned delivery %v differs from its row:\n returned %+v\n row      %+v", k, r, g)
			}
			if g.Status != outbox.StatusPublished || g.LockedBy != worker || g.LockedUntil != nil || g.PublishedAt == nil {
				t.Errorf("acked delivery %v is %s, locked by %q until %v, published at %v", k, g.Status, g.LockedBy, g.LockedUntil, g.PublishedAt)
			}
		case g.Status != outbox.StatusPending || g.LockedBy != "" || g.LockedUntil != nil:
			t.Errorf("delivery %v not returned but %s, locked by %q", k, g.Status, g.LockedBy)
		}
	}
	// The returned deliveries are exactly those the table holds done.
	n := 0
	for _, g := range got {
		if g.Status == outbox.StatusPublished {
			n++
		}
	}
	if len(mine) == 0 || len(mine) != n {
		t.Errorf("own deliveries: %d returned, %d acked in the table", len(mine), n)
	}
	// Returned in claim order within each step: priority, then oldest.
	less := func(a, b outbox.Message) bool {
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.CreatedAt.Before(b.CreatedAt)
	}
	for i := 1; i < len(mine); i++ {
		if sameStep(mine[i-1], mine[i]) && less(mine[i], mine[i-1]) {
			t.Errorf("returned deliveries out of claim order at %d", i)
		}
	}
}

// sameStep reports whether two returned deliveries came from one step:
// their leases were set by one statement.
func sameStep(a, b outbox.Message) bool { return a.LockedUntil.Equal(*b.LockedUntil) }

// randomMessages returns n messages over topics with random priorities,
// creation times and NULL-heavy optional fields.
func randomMessages(rng *rand.Rand, topics []string, n int) []*outbox.Message {
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	maybe := func(s string) string {
		if rng.IntN(2) == 0 {
			return ""
		}
		return s
	}
	out := make([]*outbox.Message, n)
	for i := range out {
		m := &outbox.Message{
			MessageID:     watermill.NewUUID() + "@x",
			Topic:         topics[rng.IntN(len(topics))],
			Type:          maybe("order.created"),
			TargetBroker:  cswm.DefaultTargetBroker,
			Priority:      rng.IntN(3) - 1,
			CreatedAt:     base.Add(time.Duration(rng.IntN(1000)) * time.Millisecond),
			CorrelationID: maybe(fmt.Sprint("corr-", i)),
			CausationID:   maybe("cause"),
		}
		if rng.IntN(2) == 0 {
			m.Payload = []byte(fmt.Sprintf(`{"n":%d,"s":"<é>"}`, i))
		}
		if rng.IntN(2) == 0 {
			m.Headers = outbox.Headers{"k": fmt.Sprint(i), "ü": "✓"}
		}
		out[i] = m
	}
	return out
}

// cloneMessages returns copies of msgs that Add may fill in.
func cloneMessages(msgs []*outbox.Message) []*outbox.Message {
	out := make([]*outbox.Message, len(msgs))
	for i, m := range msgs {
		c := *m
		out[i] = &c
	}
	return out
}

// ids returns the primary keys of msgs.
func ids(msgs []outbox.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// TestGroupRegisteredDuringFanOutsMissesNothing: while publishers write
// and eight subscribers of one group consume, a second group registers on
// the topic; it must get a delivery of every message (its backfill and
// the fan-outs running beside it between them), and the first group
// handles every message exactly once.
func TestGroupRegisteredDuringFanOutsMissesNothing(t *testing.T) {
	eachBackend(t, 12, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		tables := newTables(t, db)
		const topic, batches, perBatch, parallel = "events", 20, 25, 8
		var subs []*cswm.Subscriber
		for range parallel {
			s := newSubscriber(t, db, tables.Messages, "first", cswm.SubscriberConfig{BatchSize: 10, FanOutBatchSize: 30})
			subs = append(subs, s)
		}
		if err := subs[0].SubscribeInitialize(topic); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		counts := map[string]int{}
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		wait := ackAll(t, cctx, subs, topic, func(_ int, uuid string) {
			mu.Lock()
			counts[uuid]++
			mu.Unlock()
		})
		pub := newPublisher(t, db, tables.Messages)
		want := map[string]bool{}
		late := newSubscriber(t, db, tables.Messages, "second", cswm.SubscriberConfig{})
		for b := range batches {
			if b == batches/2 {
				if err := late.SubscribeInitialize(topic); err != nil {
					t.Fatal(err)
				}
			}
			msgs := make([]*message.Message, perBatch)
			for i := range msgs {
				msgs[i] = message.NewMessage(watermill.NewUUID(), []byte("x"))
				want[msgs[i].UUID] = true
			}
			// On SQLite, eight subscribers' writes can keep a publish
			// waiting past the busy timeout: it wrote nothing and is
			// tried again, as a caller would.
			for try := 0; ; try++ {
				err := pub.Publish(topic, msgs...)
				if err == nil {
					break
				}
				if !dao.IsRetryable(err) || try == 20 {
					t.Fatal(err)
				}
			}
		}
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			n := len(counts)
			mu.Unlock()
			if n == len(want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // a repeat would come now
		stop()
		wait()
		dup, lost := 0, 0
		for id := range want {
			switch c := counts[id]; {
			case c == 0:
				lost++
			case c > 1:
				dup++
			}
		}
		// The second group's deliveries, read from the table: one per
		// message.
		rows, err := late.Deliveries().Store().Find(ctx, dao.Query{Where: dao.Eq("target_broker", cswm.DeliveryKey("second", topic))})
		if err != nil {
			t.Fatal(err)
		}
		second := map[string]int{}
		for _, r := range rows {
			second[cswm.UUID(&r)]++
		}
		missing := 0
		for id := range want {
			if second[id] != 1 {
				missing++
			}
		}
		t.Logf("%d messages: first group %d handled, %d twice, %d never; second group %d deliveries, %d missing or repeated",
			len(want), len(counts), dup, lost, len(rows), missing)
		if dup != 0 || lost != 0 || missing != 0 || len(rows) != len(want) {
			t.Errorf("first group: %d twice, %d never; second group: %d of %d deliveries, %d missing or repeated", dup, lost, len(rows), len(want), missing)
		}
	})
}
