package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// contentionOrder is the order of the claims of the concurrency tests: it
// makes every claimer go for the same rows first, and the (status,
// priority) index of Job serves it.
var contentionOrder = []dao.Order{dao.Asc("priority")}

// workerResult is what one claimer of a concurrency test received.
type workerResult struct {
	Worker   string
	IDs      []int64 // every id a claim returned to this worker, in order
	Calls    int     // Claim calls
	Empty    int     // calls that returned no row while eligible rows were left
	Retries  int     // calls that failed with a retryable error
	Problems []string
}

// claimUntilEmpty claims rows as worker until no eligible row is left,
// limit(call) rows per call. It records every returned id, including the
// rows a failed call returned with its error, and notes a call that returned
// more rows than its limit or a row whose returned state is not the claim's.
// A retryable error is retried after a short pause; any other error, or
// ctx ending, stops the worker with a problem.
func claimUntilEmpty(ctx context.Context, s dao.Store[Job], worker string, limit func(call int) int) workerResult {
	res := workerResult{Worker: worker}
	until := baseTime().Add(time.Hour)
	for call := 0; ; call++ {
		if err := ctx.Err(); err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: stopped after %d calls with eligible rows left: %v", worker, call, err))
			return res
		}
		n := limit(call)
		got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet(worker, until), Limit: n, OrderBy: contentionOrder})
		res.Calls++
		if len(got) > n {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: Claim(limit %d) returned %d rows", worker, n, len(got)))
		}
		for _, r := range got {
			res.IDs = append(res.IDs, r.ID)
			if r.Status != statusClaimed || r.LockedBy == nil || *r.LockedBy != worker || r.Attempts != 1 {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: Claim returned row %d in state status=%s locked_by=%s attempts=%d; want claimed by %s, attempts 1",
					worker, r.ID, r.Status, fmtPtr(r.LockedBy), r.Attempts, worker))
			}
		}
		if err != nil {
			if dao.IsRetryable(err) {
				res.Retries++
				time.Sleep(time.Duration(1+res.Retries%10) * time.Millisecond)
				continue
			}
			if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: Claim(limit %d) failed: %v", worker, n, err))
			} else {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: stopped after %d calls with eligible rows left: %v", worker, call+1, err))
			}
			return res
		}
		if len(got) > 0 {
			continue
		}
		left, err := s.Count(ctx, eligible)
		if err != nil {
			if dao.IsRetryable(err) {
				res.Retries++
				continue
			}
			res.Problems = append(res.Problems, fmt.Sprintf("%s: Count: %v", worker, err))
			return res
		}
		if left == 0 {
			return res
		}
		res.Empty++
	}
}

// checkNoDoubleClaim checks the outcome of concurrent claims over the rows
// whose ids are all: every row was received exactly once (the received
// sets are disjoint and their union is all), and every row's final state in
// final says it was claimed once, by the worker that received it. It
// returns a description of each violation (at most a few of each kind, then
// a count), or nil.
func checkNoDoubleClaim(all []int64, results []workerResult, final map[int64]Job) []string {
	var problems []string
	const maxEach = 10
	kinds := map[string]int{}
	report := func(kind, format string, args ...any) {
		kinds[kind]++
		if kinds[kind] <= maxEach {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	receivedBy := map[int64][]string{}
	for _, r := range results {
		for _, id := range r.IDs {
			receivedBy[id] = append(receivedBy[id], r.Worker)
		}
	}
	known := make(map[int64]bool, len(all))
	for _, id := range all {
		known[id] = true
	}
	var received []int64
	for id := range receivedBy {
		received = append(received, id)
	}
	slices.Sort(received)
	for _, id := range received {
		ws := receivedBy[id]
		if !known[id] {
			report("unknown", "row %d was received by %v but is not one of the rows", id, ws)
		}
		if len(ws) > 1 {
			report("double", "DOUBLE CLAIM: row %d was received %d times, by %v", id, len(ws), ws)
		}
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	for _, id := range sorted {
		ws, ok := receivedBy[id]
		if !ok {
			report("missing", "row %d was never received by any worker", id)
		}
		f, ok := final[id]
		if !ok {
			report("gone", "row %d is missing from the table", id)
			continue
		}
		if len(ws) == 0 {
			if f.Status == statusClaimed {
				report("stranded", "row %d is claimed by %s in the table but no worker received it", id, fmtPtr(f.LockedBy))
			}
			continue
		}
		if f.Status != statusClaimed || f.LockedBy == nil || *f.LockedBy != ws[0] {
			report("owner", "row %d was received by %v but the table says status=%s locked_by=%s", id, ws, f.Status, fmtPtr(f.LockedBy))
		}
		if f.Attempts != 1 {
			report("attempts", "row %d was written by %d claims (attempts = %d), received by %v", id, f.Attempts, f.Attempts, ws)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	summary := "violations:"
	for _, k := range keys {
		summary += fmt.Sprintf(" %s=%d", k, kinds[k])
	}
	return append(problems, summary)
}

// contentionLimit is the claim size of worker w's call c: 1 to 16 rows,
// varying between workers and calls.
func contentionLimit(w int) func(call int) int {
	return func(c int) int { return 1 + (w*7+c*3)%16 }
}

func testNoDoubleClaim(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := h.stores(t, s)
	n, k := h.rows(), h.workers()
	rows := seed(t, s, n, func(i int, j *Job) { j.Priority = (i * 7919) % 13 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results := make([]workerResult, k)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[w] = claimUntilEmpty(ctx, ss[w%len(ss)], fmt.Sprintf("worker-%02d", w), contentionLimit(w))
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)

	var calls, empty, retries int
	for _, r := range results {
		calls += r.Calls
		empty += r.Empty
		retries += r.Retries
		for _, p := range r.Problems {
			t.Error(p)
		}
	}
	t.Logf("%d workers through %d node(s) claimed %d rows in %v (%.0f rows/s): %d claims, %d empty while rows were left, %d retried",
		k, len(ss), n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), calls, empty, retries)
	if caps := s.Capabilities(); caps.LostRace == dao.LostRaceSkip && retries > 0 {
		t.Errorf("%s documents a lost race as a skipped row, yet %d claims under contention failed with a retryable error", caps.Backend, retries)
	}
	for _, p := range checkNoDoubleClaim(ids(rows), results, snapshot(t, s)) {
		t.Error(p)
	}
}
