//go:build linux

package hatest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// publishLog records every message a relay published, by message id: the
// nodes whose relay published it, in order.
type publishLog struct {
	mu  sync.Mutex
	by  map[string][]int
	all atomic.Int64
}

// publisher returns the publisher of the relay on node: it acknowledges
// every message at once and records it.
func (p *publishLog) publisher(node int) outbox.Publisher {
	return outbox.PublisherFunc(func(_ context.Context, msgs []outbox.Message) []error {
		p.mu.Lock()
		for _, m := range msgs {
			p.by[m.MessageID] = append(p.by[m.MessageID], node)
		}
		p.mu.Unlock()
		p.all.Add(int64(len(msgs)))
		return make([]error, len(msgs))
	})
}

// TestGaleraOutboxRelayNodeKilled runs an outbox on the Galera cluster: a
// writer on each node adds 2,000 messages in transactions of 50 (over
// about 15 s) and a relay on each node publishes them (to a publisher
// that acknowledges at once and records every message by id). When a
// quarter is published g3 is killed with SIGKILL, and 3 s later started
// again. The writer on g3 retries its transactions until g3 is back (a
// group whose commit landed although its answer was lost meets its own
// message ids: dao.ErrDuplicate, already written); every error it meets
// meanwhile must be one dao.IsRetryable calls retryable (a refused
// connection, and g3's refusal while it rejoins). Every message must be
// published at least once and every row end published. Delivery is at
// least once: a message is published twice only when the relay on g3 had
// published it and could not mark it (its batch is claimed again once
// its lease ends: at most the messages it claimed and never marked), or
// when a relay's mark failed; the duplicates are counted and printed by
// cause. The relays' WriteTimeout, 10 s, outlasts
// the pause of the surviving nodes while the cluster drops g3.
func TestGaleraOutboxRelayNodeKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	const perWriter, group = 2000, 50
	n := perWriter * len(hatest.GaleraNodes)
	start := time.Now()
	since := func() string { return fmt.Sprintf("%6.2fs", time.Since(start).Seconds()) }
	dbs := openGaleraNodes(ctx, t, c, 8)
	table := testdb.Table(t, dbs[0], "ha_galera_outbox")
	if err := outbox.Migrate(ctx, dbs[0], table); err != nil {
		t.Fatal(err)
	}
	pubs := &publishLog{by: map[string][]int{}}
	repos := make([]*outbox.Repository, len(dbs))
	relays := make([]*outbox.Relay, len(dbs))
	for i, db := range dbs {
		store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		if repos[i], err = outbox.New(store, outbox.WithRetryPolicy(haPolicy)); err != nil {
			t.Fatal(err)
		}
		rc := haRelay
		rc.WorkerID = "galera-" + hatest.GaleraNodes[i]
		rc.WriteTimeout, rc.Lease = 10*time.Second, 15*time.Second
		rc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if relays[i], err = outbox.NewRelay(repos[i], pubs.publisher(i), rc); err != nil {
			t.Fatal(err)
		}
	}
	rctx, stopRelays := context.WithCancel(ctx)
	defer stopRelays()
	relayErrs := make(chan error, len(relays))
	for _, r := range relays {
		go func() { relayErrs <- r.Run(rctx) }()
	}

	// The writers: node i writes the message ids i*perWriter up, a group
	// of 50 in one transaction every 375 ms, retrying a failed one.
	var writeErrs [3]atomic.Int64
	var alreadyWritten atomic.Int64
	var outs [3]outage
	var written atomic.Int64
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			pace := 15 * time.Second / (perWriter / group)
			for first := i * perWriter; first < (i+1)*perWriter && ctx.Err() == nil; first += group {
				next := time.Now().Add(pace)
				for attempt := 0; ctx.Err() == nil; {
					msgs := make([]*outbox.Message, group)
					for k := range msgs {
						msgs[k] = &outbox.Message{MessageID: msgID(first + k), Topic: "galera", Payload: []byte(`{"n":` + strconv.Itoa(first+k) + `}`)}
					}
					sent := time.Now()
					err := sqlstore.MapError(db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return repos[i].Add(ctx, tx, msgs...) }))
					if err == nil || (attempt > 0 && errors.Is(err, dao.ErrDuplicate)) {
						if err != nil {
							alreadyWritten.Add(1)
						}
						outs[i].ok(sent)
						written.Add(group)
						break
					}
					outs[i].fail(err)
					writeErrs[i].Add(1)
					attempt++
					if !backoffSleep(ctx, attempt) {
						return
					}
				}
				time.Sleep(time.Until(next))
			}
		})
	}
	published := func() int64 {
		c, err := repos[0].Counts(ctx)
		if err != nil {
			return -1
		}
		return c[outbox.StatusPublished]
	}
	for ctx.Err() == nil && pubs.all.Load() < int64(n/4) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.KillNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("%s g3 killed with %d messages written, %d publishes", since(), written.Load(), pubs.all.Load())
	time.Sleep(3 * time.Second)
	if err := c.StartNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s g3 rejoined, %v after the kill", since(), time.Since(killed).Round(time.Millisecond))
	wg.Wait()
	t.Logf("%s writers done: %d messages written", since(), written.Load())
	for ctx.Err() == nil && published() < int64(n) {
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s every row marked published, %v after the kill", since(), time.Since(killed).Round(time.Millisecond))
	stopRelays()
	for range relays {
		if err := <-relayErrs; err != nil {
			t.Errorf("relay Run: %v", err)
		}
	}

	var lost, twice, twiceFromG3, twiceElsewhere, more int
	pubs.mu.Lock()
	for id := range n {
		by := pubs.by[msgID(id)]
		switch {
		case len(by) == 0:
			lost++
		case len(by) > 1:
			twice++
			if len(by) > 2 {
				more++
			}
			if by[0] == 2 {
				twiceFromG3++
			} else {
				twiceElsewhere++
			}
		}
	}
	pubs.mu.Unlock()
	counts, err := repos[0].Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var markErrsSurvivors, unmarkedOnG3 int64
	for i, r := range relays {
		st := r.Stats()
		if i == 2 {
			unmarkedOnG3 = st.Claimed - st.Published
		}
		t.Logf("relay on %s: claimed %d, published %d, failed attempts %d, abandoned %d, released %d, lease lost %d, mark errors %d",
			hatest.GaleraNodes[i], st.Claimed, st.Published, st.Failed, st.Abandoned, st.Released, st.LeaseLost, st.MarkErrors)
		if i != 2 {
			markErrsSurvivors += st.MarkErrors
		}
		if st.Abandoned != 0 {
			t.Errorf("relay on %s abandoned %d messages", hatest.GaleraNodes[i], st.Abandoned)
		}
	}
	for i := range outs {
		outs[i].log(t, "writer on "+hatest.GaleraNodes[i])
		if nr := outs[i].nonRetryable; len(nr) > 0 {
			t.Errorf("the writer on %s met %d errors dao.IsRetryable calls final, the first: %v", hatest.GaleraNodes[i], len(nr), nr[0])
		}
	}
	t.Logf("%d messages (writers on g1, g2, g3), relays on g1, g2, g3, g3 killed at a quarter published and started 3 s later: %d publishes, lost %d, published more than once %d (more than twice %d): first by the relay on g3 %d (of the %d it claimed and never marked published), first by a relay on g1 or g2 %d; rows %v; write errors retried g1 %d, g2 %d, g3 %d, groups found already written %d",
		n, pubs.all.Load(), lost, twice, more, twiceFromG3, unmarkedOnG3, twiceElsewhere, counts, writeErrs[0].Load(), writeErrs[1].Load(), writeErrs[2].Load(), alreadyWritten.Load())
	if lost != 0 || counts[outbox.StatusPublished] != int64(n) {
		t.Errorf("%d messages never published; rows %v, want %d published", lost, counts, n)
	}
	if int64(twiceFromG3) > unmarkedOnG3 {
		t.Errorf("%d messages published again after a first publish by the relay on g3, more than the %d it claimed and never marked", twiceFromG3, unmarkedOnG3)
	}
	if twiceElsewhere > 0 && markErrsSurvivors == 0 {
		t.Errorf("%d messages published again after a first publish by a relay on g1 or g2, whose marks never failed", twiceElsewhere)
	}
}
