//go:build linux

package hatest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// TestGaleraUniqueInsert inserts the same unique jobs through the three
// nodes at once: for each of 200 keys (unique by args), two callers per
// node call jobs.Client.Insert together. Two inserts of one key through
// two nodes both succeed locally and meet at commit, where certification
// keeps the first and aborts the other with a deadlock (1213). Every key
// must end with exactly one job in the table, exactly one caller told it
// inserted it, the others told UniqueSkippedAsDuplicate with that same
// job, and no caller given an error. The conflicts the inserts met are
// logged with the nodes' certification failures and brute-force aborts.
// It runs with the node's own retry of an aborted autocommit statement
// (wsrep_retry_autocommit = 1, the default) and without it (0: every
// abort comes back to the client as 1213).
func TestGaleraUniqueInsert(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	for _, tc := range []struct{ name, params string }{
		// The node retries an aborted autocommit statement once itself
		// (wsrep_retry_autocommit = 1, the default).
		{"node-retries-once", ""},
		// The node returns every abort to the client at once.
		{"node-retries-never", "&wsrep_retry_autocommit=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			galeraUniqueInsert(ctx, t, openGaleraNodesWith(ctx, t, c, 4, tc.params))
		})
	}
}

func galeraUniqueInsert(ctx context.Context, t *testing.T, dbs []*gorm.DB) {
	const keys, perNode = 200, 2
	q := newGaleraJobQueue(ctx, t, dbs, 0, 15*time.Second, 0)
	before := certStats(t, dbs)
	var conflicts int64
	type outcome struct {
		id       int64
		inserted bool
		err      error
	}
	var badKeys, errCount, insertedTwice, neverInserted, otherJob int
	var firstErr error
	began := time.Now()
	for k := 1; k <= keys; k++ {
		out := make([]outcome, len(q.clients)*perNode)
		var wg sync.WaitGroup
		for i, cl := range q.clients {
			for w := range perNode {
				wg.Go(func() {
					res, err := cl.Insert(ctx, galeraJobArgs{Seq: k}, &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}})
					o := &out[i*perNode+w]
					if o.err = err; err == nil {
						o.id, o.inserted = res.Job.ID, !res.UniqueSkippedAsDuplicate
					}
				})
			}
		}
		wg.Wait()
		inserted, bad := 0, false
		var id int64
		for _, o := range out {
			switch {
			case o.err != nil:
				errCount++
				bad = true
				if errors.Is(o.err, dao.ErrConflict) {
					conflicts++
				}
				if firstErr == nil {
					firstErr = o.err
				}
				continue
			case o.inserted:
				inserted++
			}
			if id == 0 {
				id = o.id
			} else if o.id != id {
				otherJob++
				bad = true
			}
		}
		switch {
		case inserted > 1:
			insertedTwice++
			bad = true
		case inserted == 0:
			neverInserted++
			bad = true
		}
		if bad {
			badKeys++
		}
	}
	took := time.Since(began)
	after := certStats(t, dbs)
	last := dbs[len(dbs)-1]
	stored, err := syncedCount(ctx, last, "SELECT COUNT(*) FROM "+q.table)
	if err != nil {
		t.Fatal(err)
	}
	distinct, err := syncedCount(ctx, last, "SELECT COUNT(DISTINCT unique_key) FROM "+q.table)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys, %d callers per key (%d per node, %s): %v; %d jobs stored, %d distinct keys; keys with a bad outcome %d: told inserted by two callers %d, by none %d, callers given another job %d, errors %d (dao.ErrConflict %d, first: %v); nodes: certification failures %d, brute-force aborts %d, deadlocks %d",
		keys, len(q.clients)*perNode, perNode, hatest.GaleraNodes, took.Round(time.Millisecond), stored, distinct,
		badKeys, insertedTwice, neverInserted, otherJob, errCount, conflicts, firstErr,
		after[0]-before[0], after[1]-before[1], after[2]-before[2])
	if stored != keys || distinct != keys {
		t.Errorf("%d jobs stored with %d distinct keys, want %d of each", stored, distinct, keys)
	}
	if badKeys > 0 {
		t.Errorf("%d keys whose callers were not told once inserted and otherwise skipped with the same job: %d told inserted twice, %d never, %d callers given another job, %d errors (first: %v)",
			badKeys, insertedTwice, neverInserted, otherJob, errCount, firstErr)
	}
}
