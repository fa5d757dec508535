package shard_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/outbox/shard"
)

// The documented procedure for adding a shard, on three real databases:
// writers on two shards, pause, drain, move the moving keys' rows, switch
// to three shards and their relays, write again. Only the keys the jump
// hash sends to the new shard move, and the stream still holds each
// message once and every key's messages in the order written.
func TestAddShardKeepsOrder(t *testing.T) {
	const (
		keys    = 60
		perKey  = 10 // perKey/2 before the new shard, the rest after
		writers = 4
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := newShards(t, 3, 3)
	r2, err := shard.NewRouter(all.At(0), all.At(1))
	if err != nil {
		t.Fatal(err)
	}
	r3, err := r2.With(all.At(2))
	if err != nil {
		t.Fatal(err)
	}

	pub, js := startBroker(ctx, t, "REBALANCE")
	cfg := outbox.RelayConfig{WorkerID: "rebalance", BatchSize: 20, PollInterval: 10 * time.Millisecond, MaxPollInterval: 100 * time.Millisecond}

	write := func(r *shard.Router, from, to int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for k := w; k < keys; k += writers {
					for seq := from; seq < to; seq++ {
						key := fmt.Sprintf("account-%d", k)
						err := r.Transaction(ctx, key, func(tx *gorm.DB, add shard.AddFunc) error {
							if err := tx.Create(&entry{Key: key, Seq: seq}).Error; err != nil {
								return err
							}
							return add(msg(key, seq))
						})
						if err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	drain := func(r *shard.Router) {
		t.Helper()
		dctx, dcancel := context.WithTimeout(ctx, time.Minute)
		defer dcancel()
		if err := r.WaitDrained(dctx, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}

	// Two shards, relays running while the writers write.
	g2, err := shard.NewRelays(r2, pub, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	write(r2, 0, perKey/2)
	// The writers have stopped (step 2); the old shards drain (step 3).
	drain(r2)
	if err := g2.Stop(); err != nil {
		t.Fatal(err)
	}
	// The moving keys' business rows go to the new shard.
	var moved []string
	for k := range keys {
		key := fmt.Sprintf("account-%d", k)
		if i, _ := r3.Index(key); i == 2 {
			moved = append(moved, key)
		}
	}
	if len(moved) == 0 || len(moved) == keys {
		t.Fatalf("%d of %d keys move to the third shard", len(moved), keys)
	}
	for i := range 2 {
		var rows []entry
		if err := all.At(i).DB.WithContext(ctx).Where("key IN ?", moved).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			continue
		}
		for j := range rows {
			rows[j].ID = 0
		}
		if err := all.At(2).DB.WithContext(ctx).Create(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if err := all.At(i).DB.WithContext(ctx).Where("key IN ?", moved).Delete(&entry{}).Error; err != nil {
			t.Fatal(err)
		}
	}
	// Three shards and their relays (step 4); the writers resume.
	g3, err := shard.NewRelays(r3, pub, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	write(r3, perKey/2, perKey)
	drain(r3)
	if err := g3.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d keys moved to the third shard (rule: about 1/3)", len(moved), keys)

	// The new shard holds the later half of exactly the moved keys; each
	// old shard the rest of the messages of its keys.
	isMoved := map[string]bool{}
	for _, k := range moved {
		isMoved[k] = true
	}
	for i := range 3 {
		published, err := all.At(i).Outbox.Published(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range published {
			before, _ := shard.Index(m.PartitionKey, 2)
			seq, err := strconv.Atoi(string(m.Payload))
			if err != nil {
				t.Fatal(err)
			}
			want := before
			if isMoved[m.PartitionKey] && seq >= perKey/2 {
				want = 2
			}
			if i != want {
				t.Errorf("message %s (seq %d, moved %v) on shard %d, want %d", m.MessageID, seq, isMoved[m.PartitionKey], i, want)
			}
		}
		// Business rows: all on the key's shard among three.
		var rows []entry
		if err := all.At(i).DB.WithContext(ctx).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, e := range rows {
			if j, _ := r3.Index(e.Key); j != i {
				t.Errorf("row %s#%d on shard %d, its key maps to %d", e.Key, e.Seq, i, j)
			}
		}
	}
	_, rows := totals(t, r3)
	if rows[0]+rows[1]+rows[2] != keys*perKey {
		t.Errorf("business rows %v, want %d in all", rows, keys*perKey)
	}

	audit, err := natspub.Audit(ctx, js, "REBALANCE")
	if err != nil {
		t.Fatal(err)
	}
	if audit.Read != keys*perKey || audit.Distinct() != keys*perKey || audit.Duplicates() != 0 || audit.NoID != 0 {
		t.Fatalf("stream: read %d, distinct %d, duplicates %d, without id %d; want %d exactly once",
			audit.Read, audit.Distinct(), audit.Duplicates(), audit.NoID, keys*perKey)
	}
	checkOrder(ctx, t, js, "REBALANCE", keys*perKey)
}
