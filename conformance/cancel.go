package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// EnvCancelSweepCalls sets the number of Claim calls of the cancellation
// sweep (default 2000, 400 with -short), and EnvCancelSweepSeconds the
// time after which it starts no new call (default 15, 5 with -short), so
// that a slow backend (a store that scans every row, under the race
// detector) makes fewer calls rather than a long test.
const (
	EnvCancelSweepCalls   = "CLAIMSTORE_CANCEL_SWEEP_CALLS"
	EnvCancelSweepSeconds = "CLAIMSTORE_CANCEL_SWEEP_SECONDS"
)

// cancelSweepClaimers is the number of goroutines of the cancellation sweep.
const cancelSweepClaimers = 8

// cancelSweepMaxDelay bounds the moment at which a sweep call's context
// ends, counted from the call.
const cancelSweepMaxDelay = 5 * time.Millisecond

// envPositive returns the positive integer in the environment variable
// name, or def (short under -short) when it is unset.
func envPositive(t *testing.T, name string, def, short int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return def
}

// sweepCall is the outcome of one Claim call of the cancellation sweep.
type sweepCall struct {
	owner     string // the call's locked_by value, unique to the call
	ids       []int64
	err       error
	cancelled bool // the call's context had ended when Claim returned
}

// testCancelSweep runs claims from several goroutines whose contexts are
// canceled, or reach their deadline, at random moments between 0 and 5 ms
// after the call, and checks afterwards that every row was either returned
// to exactly one call that holds it in the store, or is still claimable
// and untouched: no row claimed in the store but returned to no one
// (stranded), none returned twice (duplicate), none returned but not
// claimed in the store by the call that received it (phantom). The error
// of a call whose context had ended must wrap context.Canceled or
// context.DeadlineExceeded; other calls may fail only with a retryable
// error.
func testCancelSweep(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := h.stores(t, s)
	backend := s.Capabilities().Backend
	calls := envPositive(t, EnvCancelSweepCalls, 2000, 400)
	budget := time.Duration(envPositive(t, EnvCancelSweepSeconds, 15, 5)) * time.Second
	// Calls claim 1 to 8 rows, and most end before claiming any: a row for
	// every other call keeps rows to claim to the end on the SQL servers,
	// and the candidate read short enough for a store that scans every
	// row (memory) to finish some claims within the 5 ms.
	rows := seed(t, s, max(50, calls/2), func(i int, j *Job) { j.Priority = i % 7 })
	until := baseTime().Add(time.Hour)

	began := time.Now()
	var next atomic.Int64
	results := make([][]sweepCall, cancelSweepClaimers)
	var wg sync.WaitGroup
	for w := range cancelSweepClaimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 0x5eed))
			for {
				c := int(next.Add(1))
				if c > calls || time.Since(began) > budget {
					return
				}
				delay := time.Duration(rng.Int64N(int64(cancelSweepMaxDelay) + 1))
				var ctx context.Context
				var cancel context.CancelFunc
				var timer *time.Timer
				if c%2 == 0 {
					ctx, cancel = context.WithCancel(context.Background())
					timer = time.AfterFunc(delay, cancel)
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), delay)
				}
				owner := fmt.Sprintf("sweep-%d", c)
				got, err := ss[w%len(ss)].Claim(ctx, dao.ClaimRequest{
					Where: eligible, Set: claimSet(owner, until), Limit: 1 + rng.IntN(8), OrderBy: contentionOrder,
				})
				cancelled := ctx.Err() != nil
				if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
					// Past the deadline even if the context's timer has
					// not fired yet: a dial or a socket deadline derived
					// from it may already have.
					cancelled = true
				}
				if timer != nil {
					timer.Stop()
				}
				cancel()
				results[w] = append(results[w], sweepCall{owner: owner, ids: ids(got), err: err, cancelled: cancelled})
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)

	var (
		nCalls, nCancelled, nClaimed, nStranded, nDup, nPhantom, nRetried int
		problems                                                          []string
	)
	const maxEach = 10
	receivedBy := map[int64][]string{}
	for _, rs := range results {
		for _, c := range rs {
			nCalls++
			if c.cancelled {
				nCancelled++
			}
			for _, id := range c.ids {
				receivedBy[id] = append(receivedBy[id], c.owner)
			}
			switch {
			case c.err == nil:
			case c.cancelled:
				if !errors.Is(c.err, context.Canceled) && !errors.Is(c.err, context.DeadlineExceeded) {
					problems = append(problems, fmt.Sprintf("%s: call whose context ended returned %v with an error that is not a context error: %v", c.owner, c.ids, c.err))
				}
			case dao.IsRetryable(c.err):
				nRetried++
			default:
				problems = append(problems, fmt.Sprintf("%s: call whose context had not ended failed: %v", c.owner, c.err))
			}
		}
	}
	final := snapshot(t, s)
	var stranded, dups, phantoms []string
	for _, r := range rows {
		f, ok := final[r.ID]
		if !ok {
			t.Errorf("row %d is missing from the store", r.ID)
			continue
		}
		owners := receivedBy[r.ID]
		switch {
		case len(owners) == 0:
			if d := diffJob(r, f); d != "" {
				nStranded++
				stranded = append(stranded, fmt.Sprintf("row %d was returned to no call but changed: %s", r.ID, d))
			}
		default:
			nClaimed++
			if len(owners) > 1 {
				nDup++
				dups = append(dups, fmt.Sprintf("row %d was returned to %v", r.ID, owners))
			}
			if f.Status != statusClaimed || f.LockedBy == nil || !slices.Contains(owners, *f.LockedBy) || f.Attempts != 1 {
				nPhantom++
				phantoms = append(phantoms, fmt.Sprintf("row %d was returned to %v but the store says status=%s locked_by=%s attempts=%d",
					r.ID, owners, f.Status, fmtPtr(f.LockedBy), f.Attempts))
			}
		}
	}
	t.Logf("cancellation sweep on %s (%s): calls %d, cancelled %d, rows claimed %d, stranded %d, duplicates %d, phantoms %d (%d claimers, %d rows, %d calls failed with a retryable error, %v)",
		backend, t.Name(), nCalls, nCancelled, nClaimed, nStranded, nDup, nPhantom, cancelSweepClaimers, len(rows), nRetried, elapsed.Round(time.Millisecond))
	for _, list := range [][]string{problems, stranded, dups, phantoms} {
		for i, p := range list {
			if i == maxEach {
				t.Errorf("... and %d more like this", len(list)-maxEach)
				break
			}
			t.Error(p)
		}
	}
	if nCalls < calls {
		t.Logf("the sweep stopped after %v with %d of %d calls made (%s)", budget, nCalls, calls, EnvCancelSweepSeconds)
	}
	if nCancelled == 0 {
		t.Errorf("no call of the sweep was canceled; the sweep tested nothing")
	}
	// Every row returned to no call is still claimable.
	left := len(rows) - len(receivedBy)
	n, err := s.Count(context.Background(), eligible)
	if err != nil {
		t.Fatalf("Count eligible after the sweep: %v", err)
	}
	if int(n) != left {
		t.Errorf("after the sweep %d rows are claimable, want %d (the rows returned to no call)", n, left)
	}
}
