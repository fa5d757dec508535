//go:build linux

package soak

import (
	"strings"
	"testing"
)

// limitedOrders are orders that have a limited job (limitedFor) and no
// planned failure.
var limitedOrders = []string{"l14", "l15", "l20", "l41", "l48"}

// order adds the committed order n, begun at ms, with its job, message
// and queue job done, to s.
func (s *scenario) order(n string, ms int) {
	s.events = append(s.events,
		Event{T: at(ms), Proc: "p1.1", Kind: EvBegin, Orders: []string{n}},
		Event{T: at(ms + 1), Proc: "p1.1", Kind: EvCommit, Orders: []string{n}},
		Event{T: at(ms + 3), Proc: "w1.1", Kind: EvHandle, Key: n, Owner: "w1.1#" + n, ClaimedAt: at(ms + 2), LeaseUntil: at(ms + 2002)},
		Event{T: at(ms + 4), Proc: "w3.1", Kind: EvQJob, Key: n, N: 1})
	s.st.Orders = append(s.st.Orders, n)
	s.st.Jobs = append(s.st.Jobs, JobState{Key: n, Status: JobDone, DoneBy: "w1.1#" + n})
	s.st.Messages = append(s.st.Messages, MessageState{MessageID: n, Status: "published"})
	s.st.Stream[n] = 1
	s.st.QJobs = append(s.st.QJobs, QueueJobState{Order: n, State: "completed", Attempt: 1})
}

// limitedRun adds a run of attempt of n's limited job by proc from ms to
// end (none when end < 0), with the claim's lease ending lease ms after
// the start.
func (s *scenario) limitedRun(n, proc string, attempt int64, ms, end, lease int) {
	s.events = append(s.events, Event{T: at(ms), Proc: proc, Kind: EvLimStart, Key: n, N: attempt, Owner: proc + "-q#1", LeaseUntil: at(ms + lease)})
	if end >= 0 {
		s.events = append(s.events, Event{T: at(end), Proc: proc, Kind: EvLimEnd, Key: n, N: attempt})
	}
}

// limited adds the orders of limitedOrders[:k], each with its limited
// job completed in one attempt run by w<i%3+1>.1 from start[i] to end[i]
// (lease 2 s).
func limited(start, end []int) *scenario {
	s := cleanRun()
	for i := range start {
		n := limitedOrders[i]
		s.order(n, 100+i)
		s.limitedRun(n, []string{"w1.1", "w2.1", "w3.1"}[i%3], 1, start[i], end[i], 2000)
		s.st.Limited = append(s.st.Limited, QueueJobState{Order: n, State: "completed", Attempt: 1})
	}
	return s
}

func TestCheckLimit(t *testing.T) {
	t.Run("at the limit", func(t *testing.T) {
		// Three at once, and a fourth that starts when one ends.
		rep := limited([]int{200, 210, 220, 300}, []int{300, 400, 400, 500}).check(t)
		if len(rep.Violations) != 0 || rep.LimitPeak != 3 || rep.LimitMax != LimitedMax || rep.LimitRuns != 4 || rep.LimitFull != 2 || rep.Limited.Completed != 4 || !rep.LimitPeakAt.Equal(at(220)) {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		rep := limited([]int{200, 210, 220, 299}, []int{300, 400, 400, 500}).check(t)
		wantViolation(t, rep, "limit exceeded")
		if rep.LimitPeak != 4 || !strings.Contains(rep.Violations[0], "l41 attempt 1 by w1.1") {
			t.Fatalf("peak %d, violation %s", rep.LimitPeak, rep.Violations[0])
		}
	})
	t.Run("a lower limit", func(t *testing.T) {
		s := limited([]int{200, 210, 220, 300}, []int{300, 400, 400, 500})
		s.st.LimitMax = 2
		// Over it twice: from 220 ms to 300 ms, and at 300 ms again.
		rep := s.check(t)
		if len(rep.Violations) != 2 || !strings.HasPrefix(rep.Violations[0], "limit exceeded:") || !strings.HasPrefix(rep.Violations[1], "limit exceeded:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	// killed: l14's first run by w1.1 has no end (w1.1 was killed at 500
	// ms); its lease ends at 2200 ms, and its second attempt runs after.
	killed := func(others int) *scenario {
		s := limited([]int{others, others + 10, others + 20}, []int{others + 100, others + 100, others + 100})
		n := limitedOrders[3]
		s.order(n, 103)
		s.fault(500, 1, FaultKill, "w1.1")
		s.limitedRun(n, "w1.1", 1, 200, -1, 2000)
		s.limitedRun(n, "w2.1", 2, 2300, 2400, 2000)
		s.st.Limited = append(s.st.Limited, QueueJobState{Order: n, State: "completed", Attempt: 2,
			Errors: `[{"attempt":1,"error":"attempt lost: its lease ended before an outcome was written"}]`})
		return s
	}
	t.Run("a killed run holds its slot until its lease ends", func(t *testing.T) {
		wantViolation(t, killed(2100).check(t), "limit exceeded")
	})
	t.Run("a killed run's slot comes back when its lease ends", func(t *testing.T) {
		rep := killed(2200).check(t)
		if len(rep.Violations) != 0 || rep.LimitPeak != 3 || rep.LimitRuns != 5 || rep.LimitUnended != 1 || rep.Limited.Lost["SIGKILL"] != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("a run past its lease holds no slot after it", func(t *testing.T) {
		// w1.1 frozen from 400 to 4900 ms: its run of l14 ends at 5000,
		// its lease at 2200; three runs from 2300 are within the limit.
		s := limited([]int{2300, 2310, 2320}, []int{2400, 2400, 2400})
		n := limitedOrders[3]
		s.order(n, 103)
		s.fault(400, 1, FaultFreeze, "w1.1")
		s.fault(4900, 1, "resume", "w1.1")
		s.limitedRun(n, "w1.1", 1, 200, 5000, 2000)
		s.st.Limited = append(s.st.Limited, QueueJobState{Order: n, State: "completed", Attempt: 1})
		rep := s.check(t)
		if len(rep.Violations) != 0 || rep.LimitPeak != 3 || rep.LimitCut != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("run twice", func(t *testing.T) {
		s := limited([]int{200}, []int{300})
		s.limitedRun(limitedOrders[0], "w2.1", 1, 400, 500, 2000)
		wantViolation(t, s.check(t), "limited job attempt run twice")
	})
	t.Run("not completed", func(t *testing.T) {
		s := limited([]int{200}, []int{300})
		s.st.Limited[0].State = "available"
		wantViolation(t, s.check(t), "limited job not completed")
	})
	t.Run("committed without it", func(t *testing.T) {
		s := limited([]int{200}, []int{300})
		s.st.Limited = nil
		rep := s.check(t)
		if len(rep.Violations) < 2 || !strings.HasPrefix(rep.Violations[0], "committed write lost:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	t.Run("for an order that has none", func(t *testing.T) {
		s := cleanRun()
		s.limitedRun("o1", "w1.1", 1, 200, 300, 2000)
		s.st.Limited = []QueueJobState{{Order: "o1", State: "completed", Attempt: 1}}
		rep := s.check(t)
		if len(rep.Violations) != 2 || !strings.HasPrefix(rep.Violations[0], "committed write lost:") || !strings.HasPrefix(rep.Violations[1], "transaction written half:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
}
