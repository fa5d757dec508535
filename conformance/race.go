package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// testLostRace forces the documented lost race of the store's
// Capabilities().LostRace and checks what the losing claim observes and
// that no row is claimed twice or lost.
func testLostRace(t *testing.T, h Harness) {
	t.Run("CandidateStage", func(t *testing.T) { testLostRaceTrace(t, h) })
	t.Run("HeldLock", func(t *testing.T) { testLostRaceHeldLock(t, h) })
	t.Run("CanceledBetweenReadAndWrite", func(t *testing.T) { testCanceledClaim(t, h) })
}

// testCanceledClaim cancels a portable-default claim's context after its
// candidate read: the claim must stop with the context's error, and every
// row it did not return must be untouched (nothing is stranded).
func testCanceledClaim(t *testing.T, h Harness) {
	s := h.NewStore(t)
	if caps := s.Capabilities(); !candidateStage(caps) {
		t.Skipf("%s claims on the fast path, which has no candidate stage", caps.Backend)
	}
	rows := seed(t, s, 5, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	traced := false
	trace := &dao.ClaimTrace{CandidatesRead: func(context.Context, []any) { traced = true; cancel() }}
	got, err := s.Claim(dao.WithClaimTrace(ctx, trace), dao.ClaimRequest{Where: eligible, Set: claimSet("first", baseTime().Add(time.Hour)), Limit: 5})
	if !traced {
		t.Fatal("the claim never called ClaimTrace.CandidatesRead")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("claim whose context was canceled after the candidate read = %v, %v; want context.Canceled", ids(got), err)
	}
	if dao.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true for a canceled context", err)
	}
	claimRest(t, s, checkOutcome(t, s, rows, got, nil))
}

// thief is a competing claim started from inside another claim.
type thief struct {
	done chan struct{}
	got  []Job
	err  error
}

// steal claims the row id from s in a new goroutine, with a context that
// carries no trace.
func steal(s dao.Store[Job], id int64) *thief {
	th := &thief{done: make(chan struct{})}
	go func() {
		defer close(th.done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		th.got, th.err = s.Claim(ctx, dao.ClaimRequest{
			Where: dao.And(eligible, dao.Eq("id", id)),
			Set:   claimSet("thief", baseTime().Add(time.Hour)),
			Limit: 1,
		})
	}()
	return th
}

func (th *thief) finished(within time.Duration) bool {
	select {
	case <-th.done:
		return true
	case <-time.After(within):
		return false
	}
}

// checkOutcome checks the table after a claim by "first" that returned
// first and a competing claim by "thief" that returned stolen: no row went
// to both, each returned row is durably claimed by its receiver once, and
// every other row is untouched (nothing is lost). It returns the rows left
// untouched.
func checkOutcome(t *testing.T, s dao.Store[Job], seeded []Job, first, stolen []Job) []int64 {
	t.Helper()
	after := snapshot(t, s)
	var untouched []int64
	for _, r := range seeded {
		inFirst, inThief := slices.Contains(ids(first), r.ID), slices.Contains(ids(stolen), r.ID)
		f := after[r.ID]
		switch {
		case inFirst && inThief:
			t.Errorf("DOUBLE CLAIM: row %d was returned to both claims", r.ID)
		case inFirst || inThief:
			who := "first"
			if inThief {
				who = "thief"
			}
			if f.Status != statusClaimed || f.LockedBy == nil || *f.LockedBy != who || f.Attempts != 1 {
				t.Errorf("row %d was returned to %s but the table says status=%s locked_by=%s attempts=%d",
					r.ID, who, f.Status, fmtPtr(f.LockedBy), f.Attempts)
			}
		default:
			if d := diffJob(r, f); d != "" {
				t.Errorf("row %d was returned to no claim but changed (lost or half-claimed): %s", r.ID, d)
			}
			untouched = append(untouched, r.ID)
		}
	}
	return untouched
}

// claimRest claims every eligible row and checks that exactly want (sorted
// ids) are returned, once.
func claimRest(t *testing.T, s dao.Store[Job], want []int64) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("after", baseTime().Add(time.Hour)), Limit: 100})
	if err != nil {
		t.Fatalf("claiming the rows left: %v", err)
	}
	if g := sortedIDs(got); !slices.Equal(g, want) {
		t.Errorf("claiming the rows left returned %v, want %v", g, want)
	}
	again, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("after", baseTime().Add(time.Hour)), Limit: 100})
	if err != nil || len(again) != 0 {
		t.Errorf("a further claim returned %v, %v; want nothing", ids(again), err)
	}
}

func toID(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case int:
		return int64(x)
	}
	panic(fmt.Sprintf("conformance: candidate id %v of type %T is not an integer", v, v))
}

// candidateStage reports whether a claim with caps reads its candidates
// before it writes them and calls dao.ClaimTrace.CandidatesRead in between:
// the portable default, and a fast path that runs under one lock (memory).
func candidateStage(caps dao.Capabilities) bool {
	return caps.Strategy == dao.StrategyPortable || caps.LostRace == dao.LostRaceImpossible
}

// testLostRaceTrace forces a competing claim between the candidate read
// and the guarded updates of the portable default, with dao.WithClaimTrace.
func testLostRaceTrace(t *testing.T, h Harness) {
	s := h.NewStore(t)
	caps := s.Capabilities()
	if !candidateStage(caps) {
		t.Skipf("%s claims on the fast path, which has no candidate stage; HeldLock forces its lost race", caps.Backend)
	}
	rows := seed(t, s, 5, nil)
	// The thief takes the first candidate; on a backend that reports a
	// conflict it takes the second, so that the rows claimed before the
	// conflict are returned with it.
	victim := 0
	if caps.LostRace == dao.LostRaceConflict {
		victim = 1
	}
	var (
		th      *thief
		calls   int
		blocked bool
		inside  bool // the thief finished while the first claim was between read and write
	)
	trace := &dao.ClaimTrace{CandidatesRead: func(ctx context.Context, cands []any) {
		calls++
		if calls > 1 {
			return
		}
		if len(cands) <= victim {
			t.Errorf("CandidatesRead got %d candidates, want 5", len(cands))
			return
		}
		th = steal(s, toID(cands[victim]))
		if caps.LostRace == dao.LostRaceImpossible {
			inside = th.finished(200 * time.Millisecond)
			return
		}
		inside = th.finished(30 * time.Second)
		blocked = !inside
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := s.Claim(dao.WithClaimTrace(ctx, trace), dao.ClaimRequest{Where: eligible, Set: claimSet("first", baseTime().Add(time.Hour)), Limit: 5})
	if calls == 0 || th == nil {
		t.Fatalf("%s reports a claim with a candidate stage but its Claim never called ClaimTrace.CandidatesRead with candidates, so the lost race cannot be forced (claim returned %d rows, %v)", caps.Backend, len(got), err)
	}
	if !th.finished(time.Minute) {
		t.Fatal("the competing claim did not finish within a minute after the first claim returned")
	}
	victimID := rows[victim].ID
	t.Logf("lost race %v: first claim returned %v, %v; competing claim for row %d returned %v, %v (finished inside: %v)",
		caps.LostRace, ids(got), err, victimID, ids(th.got), th.err, inside)

	switch caps.LostRace {
	case dao.LostRaceImpossible:
		if inside {
			t.Error("the competing claim completed while the first claim was between its candidate read and its writes; LostRaceImpossible promises it cannot")
		}
		if err != nil || !slices.Equal(ids(got), ids(rows)) {
			t.Errorf("first claim = %v, %v; want all rows %v and no error", ids(got), err, ids(rows))
		}
		if th.err != nil || len(th.got) != 0 {
			t.Errorf("competing claim (after the first) = %v, %v; want nothing, the row was taken", ids(th.got), th.err)
		}
	case dao.LostRaceSkip:
		if blocked {
			t.Error("the competing claim could not complete while the first claim was between its candidate read and its guarded updates: the candidate read holds locks")
		}
		if th.err != nil || !slices.Equal(ids(th.got), []int64{victimID}) {
			t.Errorf("competing claim = %v, %v; want row %d", ids(th.got), th.err, victimID)
		}
		if want := ids(rows[1:]); err != nil || !slices.Equal(ids(got), want) {
			t.Errorf("first claim = %v, %v; want the other rows %v in order and no error (lost race skipped silently)", ids(got), err, want)
		}
	case dao.LostRaceBusy:
		switch {
		case th.err == nil && len(th.got) == 1:
			// Writers did not overlap: the guard saw the row taken.
			if err != nil && !errors.Is(err, dao.ErrBusy) {
				t.Errorf("first claim error = %v, want nil or ErrBusy", err)
			}
			if err == nil && !slices.Equal(ids(got), ids(rows[1:])) {
				t.Errorf("first claim = %v; want the other rows %v", ids(got), ids(rows[1:]))
			}
		case errors.Is(th.err, dao.ErrBusy):
			// The first claim held the write lock across its candidate read.
			if err != nil || !slices.Equal(ids(got), ids(rows)) {
				t.Errorf("first claim = %v, %v; want all rows, since the competing claim gave up with ErrBusy", ids(got), err)
			}
		default:
			t.Errorf("competing claim = %v, %v; want row %d, or ErrBusy", ids(th.got), th.err, victimID)
		}
	case dao.LostRaceConflict:
		if th.err != nil || !slices.Equal(ids(th.got), []int64{victimID}) {
			t.Errorf("competing claim = %v, %v; want row %d", ids(th.got), th.err, victimID)
		}
		if !errors.Is(err, dao.ErrConflict) {
			t.Errorf("first claim error = %v, want ErrConflict", err)
		}
		if !dao.IsRetryable(err) {
			t.Errorf("IsRetryable(%v) = false", err)
		}
		if !slices.Contains(ids(got), rows[0].ID) {
			t.Errorf("first claim returned %v; want it to include row %d, claimed before the conflict", ids(got), rows[0].ID)
		}
	default:
		t.Fatalf("Capabilities().LostRace = %v is not a documented behaviour", caps.LostRace)
	}
	claimRest(t, s, checkOutcome(t, s, rows, got, th.got))
}

// testLostRaceHeldLock forces the lost race of a fast path (a row lock held
// by another transaction on the first eligible row) and of a backend whose
// writers serialize (the write lock held by another connection), through
// Harness.HoldLock.
func testLostRaceHeldLock(t *testing.T, h Harness) {
	s := h.NewStore(t)
	caps := s.Capabilities()
	rowLock := caps.Strategy == dao.StrategyFastPath && caps.LostRace == dao.LostRaceSkip
	if !rowLock && caps.LostRace != dao.LostRaceBusy {
		t.Skipf("%s (strategy %v, lost race %v): CandidateStage forces its lost race", caps.Backend, caps.Strategy, caps.LostRace)
	}
	if h.HoldLock == nil {
		h.lacks(t, CheckHeldLock, "HoldLock", fmt.Sprintf("the lost race of %s (strategy %v, lost race %v)", caps.Backend, caps.Strategy, caps.LostRace))
	}
	rows := seed(t, s, 5, func(i int, j *Job) { j.Priority = 10 - i })
	order := []dao.Order{dao.Desc("priority")}
	release := h.HoldLock(t, s, rows[0].ID)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("first", baseTime().Add(time.Hour)), Limit: 3, OrderBy: order})
	took := time.Since(began)
	release()
	released = true
	t.Logf("lost race %v: claim under the held lock returned %v, %v after %v", caps.LostRace, ids(got), err, took.Round(time.Millisecond))

	if rowLock {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("the claim blocked on the locked row instead of skipping it")
		}
		if want := ids(rows[1:4]); err != nil || !slices.Equal(ids(got), want) {
			t.Errorf("claim with row %d locked elsewhere = %v, %v; want %v in order and no error", rows[0].ID, ids(got), err, want)
		}
	} else {
		if !errors.Is(err, dao.ErrBusy) {
			t.Errorf("claim while another connection holds the write lock: error = %v, want ErrBusy", err)
		} else if !dao.IsRetryable(err) {
			t.Errorf("IsRetryable(%v) = false", err)
		}
		if len(got) != 0 {
			t.Errorf("claim while another connection holds the write lock returned rows %v, which it cannot have written", ids(got))
		}
	}
	claimRest(t, s, checkOutcome(t, s, rows, got, nil))
}
