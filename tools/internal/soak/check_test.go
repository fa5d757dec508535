//go:build linux

package soak

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// t0 is the start of every synthetic history.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// scenario is a synthetic run: one committed order "o1", its job handled
// by w1.1 and its message published once, one once schedule fired, one
// term won by w2.1 with two fenced writes.
type scenario struct {
	events []Event
	st     *State
}

func cleanRun() *scenario {
	return &scenario{
		events: []Event{
			{T: at(0), Proc: "p1.1", Kind: EvBegin, Orders: []string{"o1"}},
			{T: at(5), Proc: "p1.1", Kind: EvCommit, Orders: []string{"o1"}},
			{T: at(10), Proc: "w2.1", Kind: EvElected, Term: 1},
			{T: at(20), Proc: "w1.1", Kind: EvHandle, Key: "o1", Owner: "w1.1#1", ClaimedAt: at(19), LeaseUntil: at(2019)},
			{T: at(25), Proc: "w3.1", Kind: EvQJob, Key: "o1", N: 1, Owner: "w3.1-q#1"},
			{T: at(30), Proc: "w1.1", Kind: EvFire, Key: "once-000000", Owner: "w1.1-s#1", Due: at(25), ClaimedAt: at(29), LeaseUntil: at(2029)},
			{T: at(40), Proc: "w2.1", Kind: EvFenced, Term: 1, N: 1},
			{T: at(50), Proc: "w2.1", Kind: EvFenced, Term: 1, N: 1},
			{T: at(60), Proc: "w2.1", Kind: EvFenced, Term: 1}, // refused
			{T: at(65), Proc: "w2.1", Kind: EvLocal, Term: 1},  // not sent
			{T: at(70), Proc: "w2.1", Kind: EvStop, Stats: map[string]int64{"jobs_lease_lost": 2}},
			{T: at(80), Proc: "w1.1", Kind: EvStop, Stats: map[string]int64{"jobs_lease_lost": 1}},
		},
		st: &State{
			Orders:    []string{"o1"},
			Jobs:      []JobState{{Key: "o1", Status: JobDone, DoneBy: "w1.1#1"}},
			Messages:  []MessageState{{MessageID: "o1", Status: "published"}},
			Schedules: []ScheduleState{{Key: "once-000000", Kind: "once", Status: "fired"}},
			FenceLog:  []FenceLog{{ID: 1, Term: 1, Writer: "w2.1"}, {ID: 2, Term: 1, Writer: "w2.1"}},
			FenceTerm: 1, LeaseTerm: 1,
			Stream: map[string]int{"o1": 1},
			QJobs:  []QueueJobState{{Order: "o1", State: "completed", Attempt: 1}},
		},
	}
}

// rehandled adds a second claim of job o1 by w3.1 at ms, whose outcome
// landed, to s.
func (s *scenario) rehandled(ms int) {
	s.events = append(s.events, Event{T: at(ms + 1), Proc: "w3.1", Kind: EvHandle, Key: "o1", Owner: "w3.1#7", ClaimedAt: at(ms), LeaseUntil: at(ms + 2000)})
	s.st.Jobs[0].DoneBy = "w3.1#7"
}

// fault adds an orchestrator fault event at ms.
func (s *scenario) fault(ms, seq int, kind, target string) {
	s.events = append(s.events, Event{T: at(ms), Proc: "orch", Kind: EvFault, Seq: seq, Fault: kind, Target: target})
}

func (s *scenario) check(t *testing.T) *Report {
	t.Helper()
	slices.SortStableFunc(s.events, func(a, b Event) int { return a.T.Compare(b.T) })
	return Check(s.events, s.st)
}

// wantViolation fails t unless exactly one violation of kind was found.
func wantViolation(t *testing.T, rep *Report, kind string) {
	t.Helper()
	if len(rep.Violations) != 1 || !strings.HasPrefix(rep.Violations[0], kind+":") {
		t.Fatalf("violations %q, want one %q", rep.Violations, kind)
	}
}

func TestCheckCleanRun(t *testing.T) {
	rep := cleanRun().check(t)
	if len(rep.Violations) != 0 {
		t.Fatalf("violations in a clean run: %q", rep.Violations)
	}
	if rep.Committed != 1 || rep.JobsDone != 1 || rep.Handles != 1 || rep.Published != 1 || rep.StreamMessages != 1 ||
		rep.Fires != 1 || rep.Terms != 1 || rep.FencedLanded != 2 || rep.FencedRefused != 1 || rep.FencedLocal != 1 || rep.Totals["jobs_lease_lost"] != 3 {
		t.Fatalf("report %+v", rep)
	}
}

func TestCheckRehandleAfterKillOrFreeze(t *testing.T) {
	for _, tc := range []struct {
		name, fault, excuse string
	}{{"kill", FaultKill, "SIGKILL"}, {"freeze", FaultFreeze, "SIGSTOP"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := cleanRun()
			s.fault(500, 1, tc.fault, "w1.1")
			s.rehandled(2100)
			rep := s.check(t)
			if len(rep.Violations) != 0 {
				t.Fatalf("violations: %q", rep.Violations)
			}
			if rep.Rehandled[tc.excuse] != 1 || rep.Handles != 2 {
				t.Fatalf("rehandled %v, handles %d", rep.Rehandled, rep.Handles)
			}
		})
	}
}

func TestCheckRehandleWithoutFault(t *testing.T) {
	s := cleanRun()
	s.fault(500, 1, FaultConnKill, "w1.1")
	s.fault(600, 2, FaultKill, "w2.1") // another process: no excuse
	s.rehandled(2100)
	rep := s.check(t)
	wantViolation(t, rep, "job handled twice")
	if !strings.Contains(rep.Violations[0], "connections were terminated") {
		t.Errorf("the violation does not name the connection kill: %s", rep.Violations[0])
	}
}

func TestCheckFreezeBeforeTheClaim(t *testing.T) {
	s := cleanRun()
	s.fault(1, 1, FaultFreeze, "w1.1")
	s.fault(15, 1, "resume", "w1.1") // resumed before w1.1 claimed: no excuse
	s.rehandled(2100)
	wantViolation(t, s.check(t), "job handled twice")
}

func TestCheckClaimDuringLease(t *testing.T) {
	s := cleanRun()
	s.fault(500, 1, FaultKill, "w1.1")
	s.rehandled(1500) // w1.1's lease ran until 2019
	wantViolation(t, s.check(t), "job claimed during a lease")
}

func TestCheckStaleOutcome(t *testing.T) {
	s := cleanRun()
	s.fault(500, 1, FaultFreeze, "w1.1")
	s.rehandled(2100)
	s.st.Jobs[0].DoneBy = "w1.1#1" // the frozen holder's write landed
	wantViolation(t, s.check(t), "stale outcome landed")
}

func TestCheckScheduleRefired(t *testing.T) {
	s := cleanRun()
	s.events = append(s.events, Event{T: at(2200), Proc: "w2.1", Kind: EvFire, Key: "once-000000", Owner: "w2.1-s#3",
		Due: at(25), ClaimedAt: at(2100), LeaseUntil: at(4100)})
	wantViolation(t, s.check(t), "schedule occurrence handled twice")
}

func TestCheckRowsLeftClaimed(t *testing.T) {
	s := cleanRun()
	s.st.Jobs[0].LeaseOwner = "w1.1#1"
	s.st.Schedules[0].LeaseOwner = "w1.1-s#1"
	rep := s.check(t)
	if len(rep.Violations) != 2 || !strings.HasPrefix(rep.Violations[0], "row left claimed:") || !strings.HasPrefix(rep.Violations[1], "row left claimed:") {
		t.Fatalf("violations %q", rep.Violations)
	}
}

func TestCheckJobNotDone(t *testing.T) {
	s := cleanRun()
	s.st.Jobs[0].Status = JobQueued
	wantViolation(t, s.check(t), "job not done")
}

func TestCheckStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream map[string]int
		status string
		want   string
	}{
		{"lost", map[string]int{}, "published", "message lost"},
		{"duplicated", map[string]int{"o1": 2}, "published", "message duplicated"},
		{"extra", map[string]int{"o1": 1, "x": 1}, "published", "message from nowhere"},
		{"unpublished", map[string]int{"o1": 1}, "processing", "message not published"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := cleanRun()
			s.st.Stream, s.st.Messages[0].Status = tc.stream, tc.status
			wantViolation(t, s.check(t), tc.want)
		})
	}
}

func TestCheckTransactions(t *testing.T) {
	t.Run("half", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(60), Proc: "p1.1", Kind: EvBegin, Orders: []string{"o2"}})
		s.st.Orders = append(s.st.Orders, "o2") // no job, no message
		wantViolation(t, s.check(t), "transaction written half")
	})
	t.Run("lost", func(t *testing.T) {
		s := cleanRun()
		s.st.Orders = nil // its job and message are there: also written half
		rep := s.check(t)
		if len(rep.Violations) != 2 || !strings.HasPrefix(rep.Violations[0], "committed write lost:") ||
			!strings.HasPrefix(rep.Violations[1], "transaction written half:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	t.Run("uncommitted whole is fine", func(t *testing.T) {
		s := cleanRun()
		// A transaction whose outcome was an error, committed after all.
		s.events = append(s.events, Event{T: at(60), Proc: "p1.1", Kind: EvBegin, Orders: []string{"o2"}},
			Event{T: at(70), Proc: "p1.1", Kind: EvAbort, Orders: []string{"o2"}, Err: "connection reset"},
			Event{T: at(80), Proc: "w1.1", Kind: EvHandle, Key: "o2", Owner: "w1.1#2", ClaimedAt: at(79), LeaseUntil: at(2079)})
		s.st.Orders = append(s.st.Orders, "o2")
		s.st.Jobs = append(s.st.Jobs, JobState{Key: "o2", Status: JobDone, DoneBy: "w1.1#2"})
		s.st.Messages = append(s.st.Messages, MessageState{MessageID: "o2", Status: "published"})
		s.st.Stream["o2"] = 1
		s.events = append(s.events, Event{T: at(81), Proc: "w2.1", Kind: EvQJob, Key: "o2", N: 1})
		s.st.QJobs = append(s.st.QJobs, QueueJobState{Order: "o2", State: "completed", Attempt: 1})
		if rep := s.check(t); len(rep.Violations) != 0 || rep.Committed != 1 || rep.Orders != 2 {
			t.Fatalf("violations %q, committed %d, orders %d", rep.Violations, rep.Committed, rep.Orders)
		}
	})
}

func TestCheckTerms(t *testing.T) {
	t.Run("older term landed", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(60), Proc: "w3.1", Kind: EvElected, Term: 2})
		s.st.FenceLog = []FenceLog{{ID: 1, Term: 2, Writer: "w3.1"}, {ID: 2, Term: 1, Writer: "w2.1"}}
		s.st.FenceTerm, s.st.LeaseTerm = 1, 2
		wantViolation(t, s.check(t), "fenced write of an older term landed")
	})
	t.Run("fence row", func(t *testing.T) {
		s := cleanRun()
		s.st.FenceTerm = 0
		wantViolation(t, s.check(t), "fence row")
	})
	t.Run("own term again", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(45), Proc: "w2.1", Kind: EvDeposed, Term: 1},
			Event{T: at(46), Proc: "w2.1", Kind: EvElected, Term: 1})
		rep := s.check(t)
		if len(rep.Violations) != 0 || rep.Terms != 1 || rep.Rewon != 1 {
			t.Fatalf("violations %q, terms %d, rewon %d", rep.Violations, rep.Terms, rep.Rewon)
		}
	})
	t.Run("term back", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(45), Proc: "w2.1", Kind: EvElected, Term: 3},
			Event{T: at(46), Proc: "w2.1", Kind: EvElected, Term: 2})
		s.st.LeaseTerm = 3
		wantViolation(t, s.check(t), "term went back")
	})
	t.Run("term won twice", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(60), Proc: "w3.1", Kind: EvElected, Term: 1})
		wantViolation(t, s.check(t), "term won twice")
	})
	t.Run("write by a non-leader", func(t *testing.T) {
		s := cleanRun()
		s.st.FenceLog[1].Writer = "w1.1"
		wantViolation(t, s.check(t), "fenced write by a non-leader")
	})
	t.Run("lease row behind", func(t *testing.T) {
		s := cleanRun()
		s.st.LeaseTerm = 0
		wantViolation(t, s.check(t), "term went back")
	})
}

func TestPlanFaults(t *testing.T) {
	d := 2 * time.Minute
	a, b := PlanFaults(42, d, 2, 3, 2, 0), PlanFaults(42, d, 2, 3, 2, 0)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if slices.Equal(a, PlanFaults(43, d, 2, 3, 2, 0)) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	if len(a) < int(d/faultMaxGap)-1 || len(a) > int(d/faultMinGap) {
		t.Fatalf("%d faults in %v", len(a), d)
	}
	kinds := map[string]int{}
	prev := time.Duration(0)
	for _, f := range a {
		kinds[f.Kind]++
		if f.At < faultFirstGap || f.At >= d-faultQuietTail || f.At-prev < faultMinGap && prev > 0 {
			t.Errorf("fault at %v (previous %v)", f.At, prev)
		}
		prev = f.At
		switch f.Kind {
		case FaultNATSKill:
			if f.Target < "1" || f.Target > "3" {
				t.Errorf("NATS node %q", f.Target)
			}
		default:
			if !slices.Contains([]string{"p1", "p2", "w1", "w2", "w3", "r1", "r2"}, f.Target) {
				t.Errorf("target %q", f.Target)
			}
		}
		if (f.Kind == FaultConnKill) != (f.Pause == 0) {
			t.Errorf("%s with pause %v", f.Kind, f.Pause)
		}
	}
	if kinds[FaultKill] == 0 || kinds[FaultFreeze] == 0 || kinds[FaultConnKill] == 0 {
		t.Errorf("kinds %v in a 2-minute schedule", kinds)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h, err := CreateHistory(filepath.Join(dir, "w1.1.jsonl"), "w1.1")
	if err != nil {
		t.Fatal(err)
	}
	h.Add(Event{Kind: EvHandle, Key: "o1", Owner: "w1.1#1", ClaimedAt: at(1)})
	h.Add(Event{Kind: EvStop, N: 1})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateHistory(filepath.Join(dir, "w1.1.jsonl"), "w1.1"); err == nil {
		t.Fatal("a second history over the same file")
	}
	// A line cut short counts as bad and does not stop the reading.
	if err := os.WriteFile(filepath.Join(dir, "w2.1.jsonl"), []byte(`{"kind":"start","proc":"w2.1"}`+"\n"+`{"kind":"han`), 0o644); err != nil {
		t.Fatal(err)
	}
	events, bad, err := ReadHistories(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 1 || len(events) != 3 {
		t.Fatalf("%d events, %d bad: %+v", len(events), bad, events)
	}
	var handle *Event
	for i := range events {
		if events[i].Kind == EvHandle {
			handle = &events[i]
		}
	}
	if handle == nil || handle.Proc != "w1.1" || handle.Owner != "w1.1#1" || !handle.ClaimedAt.Equal(at(1)) || handle.T.IsZero() {
		t.Fatalf("handle event %+v", handle)
	}
}

// watermillRun is cleanRun with the Watermill message of o1, handled by
// s1.1 and acked.
func watermillRun() *scenario {
	s := cleanRun()
	s.st.Watermill = true
	s.st.WMMessages = []MessageState{{MessageID: "o1", Status: "published"}}
	s.st.WMDeliveries = []DeliveryState{{MessageID: "o1", Status: "published"}}
	s.events = append(s.events, Event{T: at(40), Proc: "s1.1", Kind: EvWMHandle, Key: "o1", Owner: "s1.1"})
	return s
}

func TestCheckWatermill(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		rep := watermillRun().check(t)
		if len(rep.Violations) != 0 || rep.WMMessages != 1 || rep.WMAcked != 1 || rep.WMHandles != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("redelivered after a kill", func(t *testing.T) {
		s := watermillRun()
		s.fault(500, 1, FaultKill, "s1.1")
		s.events = append(s.events, Event{T: at(2600), Proc: "s2.1", Kind: EvWMHandle, Key: "o1", Owner: "s2.1"})
		rep := s.check(t)
		if len(rep.Violations) != 0 || rep.WMRedelivered["SIGKILL"] != 1 || rep.WMHandles != 2 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("not acked", func(t *testing.T) {
		s := watermillRun()
		s.st.WMDeliveries[0].Status = "processing"
		wantViolation(t, s.check(t), "watermill message not handled")
	})
	t.Run("never handled", func(t *testing.T) {
		s := watermillRun()
		s.events = slices.DeleteFunc(s.events, func(e Event) bool { return e.Kind == EvWMHandle })
		wantViolation(t, s.check(t), "watermill message lost")
	})
	t.Run("no delivery", func(t *testing.T) {
		s := watermillRun()
		s.st.WMDeliveries = nil
		wantViolation(t, s.check(t), "watermill message lost")
	})
	t.Run("not fanned out", func(t *testing.T) {
		s := watermillRun()
		s.st.WMMessages[0].Status = "pending"
		wantViolation(t, s.check(t), "watermill message not fanned out")
	})
	t.Run("committed without its message", func(t *testing.T) {
		s := watermillRun()
		s.st.WMMessages, s.st.WMDeliveries = nil, nil
		rep := s.check(t)
		if len(rep.Violations) == 0 || !strings.HasPrefix(rep.Violations[0], "committed write lost:") {
			t.Fatalf("violations %q, want a committed write lost", rep.Violations)
		}
	})
}

func TestPlanFaultsSubscribers(t *testing.T) {
	d := 10 * time.Minute
	if !slices.Equal(PlanFaults(42, d, 2, 3, 2, 0), PlanFaults(42, d, 2, 3, 2, 0)) {
		t.Fatal("the same seed gave two schedules")
	}
	hit := false
	for _, f := range PlanFaults(42, d, 2, 3, 2, 2) {
		hit = hit || strings.HasPrefix(f.Target, "s")
	}
	if !hit {
		t.Fatal("no fault of a 10-minute schedule hits a subscriber")
	}
}

func TestCheckQueueJobs(t *testing.T) {
	const planned = "p1.1-6" // its first attempt fails on purpose
	if !plannedFailure(planned) || plannedFailure("o1") {
		t.Fatal("plannedFailure changed: pick other orders for this test")
	}
	// withPlanned adds the committed order planned with its job, message
	// and a queue job whose first attempt failed and second completed.
	withPlanned := func(s *scenario) {
		s.events = append(s.events,
			Event{T: at(1), Proc: "p1.1", Kind: EvBegin, Orders: []string{planned}},
			Event{T: at(2), Proc: "p1.1", Kind: EvCommit, Orders: []string{planned}},
			Event{T: at(21), Proc: "w1.1", Kind: EvHandle, Key: planned, Owner: "w1.1#2", ClaimedAt: at(20), LeaseUntil: at(2020)},
			Event{T: at(26), Proc: "w3.1", Kind: EvQJob, Key: planned, N: 1, Err: errPlanned},
			Event{T: at(1100), Proc: "w2.1", Kind: EvQJob, Key: planned, N: 2})
		s.st.Orders = append(s.st.Orders, planned)
		s.st.Jobs = append(s.st.Jobs, JobState{Key: planned, Status: JobDone, DoneBy: "w1.1#2"})
		s.st.Messages = append(s.st.Messages, MessageState{MessageID: planned, Status: "published"})
		s.st.Stream[planned] = 1
		s.st.QJobs = append(s.st.QJobs, QueueJobState{Order: planned, State: "completed", Attempt: 2,
			Errors: `[{"attempt":1,"at":"2026-01-02T03:04:06Z","error":"` + errPlanned + `"}]`})
	}
	t.Run("clean", func(t *testing.T) {
		s := cleanRun()
		withPlanned(s)
		rep := s.check(t)
		if len(rep.Violations) != 0 || rep.QJobsCompleted != 2 || rep.QRuns != 3 || rep.QPlanned != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("lost attempt after a kill", func(t *testing.T) {
		s := cleanRun()
		s.fault(500, 1, FaultKill, "w3.1")
		s.events = append(s.events, Event{T: at(2600), Proc: "w2.1", Kind: EvQJob, Key: "o1", N: 2})
		s.st.QJobs[0].Attempt = 2
		s.st.QJobs[0].Errors = `[{"attempt":1,"at":"2026-01-02T03:04:08Z","error":"attempt lost: its lease ended before an outcome was written (worker stopped or unreachable)"}]`
		rep := s.check(t)
		if len(rep.Violations) != 0 || rep.QLost["SIGKILL"] != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("retry without its error", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(2600), Proc: "w2.1", Kind: EvQJob, Key: "o1", N: 2})
		s.st.QJobs[0].Attempt = 2
		wantViolation(t, s.check(t), "queue job retried unrecorded")
	})
	t.Run("planned failure not retried", func(t *testing.T) {
		s := cleanRun()
		withPlanned(s)
		s.st.QJobs[1].Attempt, s.st.QJobs[1].Errors = 1, ""
		s.events = s.events[:len(s.events)-1] // no second attempt
		rep := s.check(t)
		if len(rep.Violations) != 1 || !strings.HasPrefix(rep.Violations[0], "queue job planned failure lost:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
	t.Run("attempt run twice", func(t *testing.T) {
		s := cleanRun()
		s.events = append(s.events, Event{T: at(2600), Proc: "w2.1", Kind: EvQJob, Key: "o1", N: 1})
		wantViolation(t, s.check(t), "queue job attempt run twice")
	})
	t.Run("not completed", func(t *testing.T) {
		s := cleanRun()
		s.st.QJobs[0].State = "available"
		wantViolation(t, s.check(t), "queue job not completed")
	})
	t.Run("completed unrun", func(t *testing.T) {
		s := cleanRun()
		s.events = slices.DeleteFunc(s.events, func(e Event) bool { return e.Kind == EvQJob })
		wantViolation(t, s.check(t), "queue job completed unrun")
	})
	t.Run("lost", func(t *testing.T) {
		s := cleanRun()
		s.st.QJobs = nil
		rep := s.check(t)
		if len(rep.Violations) == 0 || !strings.HasPrefix(rep.Violations[0], "committed write lost:") {
			t.Fatalf("violations %q", rep.Violations)
		}
	})
}
