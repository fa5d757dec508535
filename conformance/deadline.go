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

// CheckDeadlineBehindLock names the check that measures how long a claim
// whose context has a deadline takes to return while another connection
// holds a lock the claim needs; it needs [Harness.HoldLock] on a backend
// whose claims can wait for such a lock: without it the check fails where
// the HeldLock check does (a fast path, [dao.LostRaceBusy]) unless
// Harness.Skip names [CheckHeldLock], and is skipped, saying so,
// elsewhere.
const CheckDeadlineBehindLock = "DeadlineBehindLock"

// DeadlineBehindLockBudget is the deadline of the claim of the
// [CheckDeadlineBehindLock] check, and DeadlineBehindLockSlack the time
// the claim may take beyond it: the time for the store to stop the
// statement waiting on the lock and read its answer.
const (
	DeadlineBehindLockBudget = 300 * time.Millisecond
	DeadlineBehindLockSlack  = 250 * time.Millisecond
)

// waitsForLocks reports whether a claim of a store with caps can wait for
// a lock that another connection holds: a backend whose writers serialize
// ([dao.LostRaceBusy]) or a database server (a claim timeout) whose lost
// race is a skipped row. The memory store and Elasticsearch's optimistic
// writes take no such lock.
func waitsForLocks(caps dao.Capabilities) bool {
	return caps.LostRace == dao.LostRaceBusy || (caps.LostRace == dao.LostRaceSkip && caps.ClaimTimeout > 0)
}

// testDeadlineBehindLock holds, from another connection, the lock on the
// second of five eligible rows (on SQLite the database write lock) and
// claims three rows with a context whose deadline is
// DeadlineBehindLockBudget away. The claim must return within the
// deadline plus DeadlineBehindLockSlack, whatever the store's lock-wait
// limit, with an error wrapping context.DeadlineExceeded when it returns
// after the deadline, and with no row stranded: every returned row is
// durably claimed by this claim, every other row is untouched and still
// claimable. A fast path that skips locked rows returns the three unlocked
// rows at once. The time taken is logged.
func testDeadlineBehindLock(t *testing.T, h Harness) {
	s := h.NewStore(t)
	caps := s.Capabilities()
	if !waitsForLocks(caps) {
		t.Skipf("%s (strategy %v, lost race %v) takes no lock another connection can hold", caps.Backend, caps.Strategy, caps.LostRace)
	}
	if h.HoldLock == nil {
		if caps.Strategy == dao.StrategyFastPath || caps.LostRace == dao.LostRaceBusy {
			// The HeldLock check needs HoldLock on this store as well.
			h.lacks(t, CheckHeldLock, "HoldLock", fmt.Sprintf("a claim's deadline behind a lock on %s", caps.Backend))
		}
		t.Skipf("Harness.HoldLock is nil: a claim's deadline behind a lock on %s (strategy %v) is not measured; give HoldLock (sqlstoretest.Harness does) to measure it", caps.Backend, caps.Strategy)
	}
	rows := seed(t, s, 5, func(i int, j *Job) { j.Priority = 10 - i })
	release := h.HoldLock(t, s, rows[1].ID)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), DeadlineBehindLockBudget)
	defer cancel()
	began := time.Now()
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: eligible, Set: claimSet("first", baseTime().Add(time.Hour)), Limit: 3, OrderBy: []dao.Order{dao.Desc("priority")}})
	took := time.Since(began)
	release()
	released = true
	t.Logf("%s (strategy %v, lock-wait limit %v): claim with a %v deadline behind a lock on row %d returned %v after %v: %v",
		caps.Backend, caps.Strategy, caps.LockWaitLimit, DeadlineBehindLockBudget, rows[1].ID, ids(got), took.Round(time.Millisecond), err)

	if limit := DeadlineBehindLockBudget + DeadlineBehindLockSlack; took > limit {
		t.Errorf("the claim took %v, more than its deadline %v plus %v", took.Round(time.Millisecond), DeadlineBehindLockBudget, DeadlineBehindLockSlack)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("claim behind the lock: error %v does not wrap context.DeadlineExceeded", err)
	}
	if err != nil && dao.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true for a claim whose deadline passed", err)
	}
	if slices.Contains(ids(got), rows[1].ID) {
		t.Errorf("the claim returned row %d, locked by another connection all along", rows[1].ID)
	}
	claimRest(t, s, checkOutcome(t, s, rows, got, nil))
}
