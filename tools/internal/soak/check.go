//go:build linux

package soak

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/outbox"
)

// JobState is a job row as the checker reads it.
type JobState struct {
	Key                        string `gorm:"column:job_key"`
	Status, LeaseOwner, DoneBy string
}

// ScheduleState is a schedule row as the checker reads it.
type ScheduleState struct {
	Key                      string `gorm:"column:schedule_key"`
	Kind, Status, LeaseOwner string
}

// MessageState is an outbox row as the checker reads it.
type MessageState struct {
	MessageID, Status string
}

// QueueJobState is a row of the job queue's table (package jobs) as the
// checker reads it: Order is read from its args.
type QueueJobState struct {
	Order   string `gorm:"-"`
	Args    string `gorm:"column:args"`
	State   string
	Attempt int
	Errors  string
}

// DeliveryState is a row of the Watermill delivery table as the checker
// reads it.
type DeliveryState struct {
	MessageID, Status string
}

// State is what the tables and the stream hold after a run.
type State struct {
	Orders    []string
	Jobs      []JobState
	Messages  []MessageState
	Schedules []ScheduleState
	// FenceLog is the fence log in id order; FenceTerm the fence row's
	// term (0: never written); LeaseTerm the election's lease row term.
	FenceLog  []FenceLog
	FenceTerm int64
	LeaseTerm int64
	// Stream counts the stream's messages per Nats-Msg-Id; StreamNoID is
	// the number without one.
	Stream     map[string]int
	StreamNoID int
	// QJobs is the job queue's table.
	QJobs []QueueJobState
	// Watermill is true in a run with subscribers; WMMessages is then
	// its message table and WMDeliveries its consumer group's deliveries.
	Watermill    bool
	WMMessages   []MessageState
	WMDeliveries []DeliveryState
	// Limited is the limited queue's jobs (Order: the order of each) and
	// LimitMax its limit (0: LimitedMax).
	Limited  []QueueJobState
	LimitMax int
	// Workflows are the workflows the run planned, Tasks the workflow
	// tasks' jobs in the table.
	Workflows []PlannedWorkflow
	Tasks     []TaskState
	// Lease is the job queue's lease: a run whose start recorded no lease
	// end counts until its start plus Lease.
	Lease time.Duration
}

// TaskState is a workflow task's job as the checker reads it: WF and Task
// are read from its args, Deps from its workflow_deps column.
type TaskState struct {
	QueueJobState
	WorkflowID string
	WF, Task   string
	Deps       []string
}

// Key is the task's key in the histories: "wf3/t07".
func (t TaskState) Key() string { return t.WF + "/" + t.Task }

// AttemptStats count the attempts of a kind of queue job: Completed the
// jobs completed, Runs their work runs, Planned the jobs retried after the
// planned failure of their first attempt, and Lost the attempts that
// ended without an outcome (recorded by the job as lost), by what
// happened to the process that ran them: "SIGKILL", "SIGSTOP",
// "connections terminated" or "none".
type AttemptStats struct {
	Completed, Runs, Planned int
	Lost                     map[string]int
}

// Report is the checker's verdict and the figures it counted.
type Report struct {
	// Violations describe every broken promise; empty when the run holds.
	Violations []string
	// Committed is the orders whose transaction committed; Begun those
	// whose commit was attempted.
	Committed, Begun int
	// Orders is the orders in the table: the committed ones and those
	// whose commit succeeded though its answer was lost.
	Orders int
	// JobsDone is the jobs done; Rehandled the jobs handled more than
	// once, by the fault that excused it ("SIGKILL", "SIGSTOP").
	JobsDone  int
	Handles   int
	Rehandled map[string]int
	// Fires counts the schedule fires; Refired the occurrences fired more
	// than once, by excuse.
	Fires   int
	Refired map[string]int
	// Published is the messages published; StreamMessages the stream's.
	Published, StreamMessages int
	// Terms is the number of terms won (Rewon of them won again by
	// their own holder after a local lapse); FencedLanded and FencedRefused
	// the fenced writes that changed the row and those the database's
	// fence refused; FencedLocal those a leader whose leadership had ended
	// locally did not send (coord.ErrNotLeader).
	Terms, Rewon, FencedLanded, FencedRefused, FencedLocal int
	// Totals sums the totals of the processes that stopped by
	// themselves (a killed process writes none).
	Totals map[string]int64
	// WMMessages is the Watermill messages, WMAcked those whose delivery
	// to the consumer group is acked, WMHandles the handler runs, and
	// WMRedelivered the messages handed to a handler more than once, by
	// what happened to the previous handler's process in between
	// ("SIGKILL", "SIGSTOP", "connections terminated", "none": at least
	// once allows it, a mark that did not land brings it back).
	WMMessages, WMAcked, WMHandles int
	WMRedelivered                  map[string]int
	// QJobsCompleted is the queue jobs completed, QRuns their work
	// runs, QPlanned the jobs retried after their planned first-attempt
	// failure, and QLost the attempts that ended without an outcome
	// (recorded by the job as lost), by what happened to the process
	// that ran them, as WMRedelivered.
	QJobsCompleted, QRuns, QPlanned int
	QLost                           map[string]int
	// LimitMax is the limited queue's limit and LimitPeak the most of
	// its jobs running at once (first reached at LimitPeakAt), a run
	// counted from its start to its end or its claim's lease end,
	// whichever comes first. LimitRuns is its runs, LimitUnended those
	// without an end (their process was killed), counted until their
	// lease's end, and LimitCut those that ended after their lease's end
	// (their process was frozen), counted until then. LimitFull is the
	// runs whose start brought the count to the limit.
	LimitMax, LimitPeak, LimitRuns, LimitUnended, LimitCut, LimitFull int
	LimitPeakAt                                                       time.Time
	// Limited and Tasks count the attempts of the limited queue's jobs
	// and of the workflow tasks.
	Limited, Tasks AttemptStats
	// Workflows is the workflows inserted, WorkflowsDone those whose
	// every task completed, WorkflowTasks and WorkflowDeps their tasks
	// and dependencies, and WorkflowLongest the longest time from a
	// workflow's insert to the end of its last task's completing run.
	Workflows, WorkflowsDone, WorkflowTasks, WorkflowDeps int
	WorkflowLongest                                       time.Duration
}

// maxViolations is how many violations of one kind a report lists.
const maxViolations = 20

// checker accumulates a report.
type checker struct {
	rep    *Report
	counts map[string]int
	kills  map[string]time.Time      // process → SIGKILL time
	frozen map[string][][2]time.Time // process → [SIGSTOP, SIGCONT] (zero end: never resumed)
	conns  map[string][]time.Time    // process → connection kills
}

func (c *checker) fail(kind, format string, args ...any) {
	c.counts[kind]++
	if c.counts[kind] <= maxViolations {
		c.rep.Violations = append(c.rep.Violations, kind+": "+fmt.Sprintf(format, args...))
	} else if c.counts[kind] == maxViolations+1 {
		c.rep.Violations = append(c.rep.Violations, kind+": more violations of this kind not listed")
	}
}

// claim is one handle or fire: a process holding a row under a lease.
type claim struct {
	Event
}

// excuse says why holder's row may be handled again between from and to:
// "SIGKILL" or "SIGSTOP" when its process was killed or frozen then, or
// "" when it was neither.
func (c *checker) excuse(proc string, from, to time.Time) string {
	if t, ok := c.kills[proc]; ok && !t.Before(from) && !t.After(to) {
		return "SIGKILL"
	}
	for _, iv := range c.frozen[proc] {
		if !iv[0].After(to) && (iv[1].IsZero() || !iv[1].Before(from)) {
			return "SIGSTOP"
		}
	}
	return ""
}

// connNote describes the connection kills of proc between from and to,
// for a violation's message.
func (c *checker) connNote(proc string, from, to time.Time) string {
	for _, t := range c.conns[proc] {
		if !t.Before(from) && !t.After(to) {
			return fmt.Sprintf(" (its database connections were terminated at %s)", t.Format("15:04:05.000"))
		}
	}
	return ""
}

// leaseSlack covers the rounding of a lease end stored by the database
// (microseconds) against the value the worker computed (nanoseconds).
const leaseSlack = time.Millisecond

// checkClaims checks the claims of one row (a job, or a schedule's
// occurrence), which the caller sorted by claim time: each claim after the
// first must come after the previous holder's lease, and that holder must
// have been killed or frozen in between. It returns the excuse of each
// repeat.
func (c *checker) checkClaims(what, id string, cs []claim) []string {
	var excuses []string
	for i := 1; i < len(cs); i++ {
		a, b := cs[i-1], cs[i]
		if b.ClaimedAt.Add(leaseSlack).Before(a.LeaseUntil) {
			c.fail(what+" claimed during a lease", "%s claimed by %s at %s while %s held it until %s",
				id, b.Owner, b.ClaimedAt.Format(time.RFC3339Nano), a.Owner, a.LeaseUntil.Format(time.RFC3339Nano))
		}
		from := a.T
		if a.ClaimedAt.Before(from) {
			from = a.ClaimedAt
		}
		ex := c.excuse(a.Proc, from, b.T)
		if ex == "" {
			c.fail(what+" handled twice", "%s handled by %s and again by %s after the lease, though %s was neither killed nor frozen%s",
				id, a.Owner, b.Owner, a.Proc, c.connNote(a.Proc, from, b.T))
		}
		excuses = append(excuses, ex)
	}
	return excuses
}

// Check verifies a run's histories, events ordered by time, against st,
// the state of its tables and stream after it.
func Check(events []Event, st *State) *Report {
	rep := &Report{Rehandled: map[string]int{}, Refired: map[string]int{}, Totals: map[string]int64{}, WMRedelivered: map[string]int{}, QLost: map[string]int{},
		Limited: AttemptStats{Lost: map[string]int{}}, Tasks: AttemptStats{Lost: map[string]int{}}}
	c := &checker{rep: rep, counts: map[string]int{}, kills: map[string]time.Time{},
		frozen: map[string][][2]time.Time{}, conns: map[string][]time.Time{}}
	begun, committed := map[string]bool{}, map[string]bool{}
	handles := map[string][]claim{}
	wmHandles := map[string][]Event{}
	qruns := map[string][]Event{}
	limStarts, taskStarts := map[string][]Event{}, map[string][]Event{}
	ends := map[runID]Event{}
	var workflows []Event
	fires := map[string][]claim{}
	freezeOf := map[int][2]any{} // fault seq → process, index in frozen
	elected := map[int64]string{}
	lastTerm := map[string]int64{}
	won := map[string]bool{} // process + "@" + term
	for _, e := range events {
		switch e.Kind {
		case EvFault:
			switch e.Fault {
			case FaultKill:
				if e.Err == "" {
					c.kills[e.Target] = e.T
				}
			case FaultFreeze:
				if e.Err == "" {
					c.frozen[e.Target] = append(c.frozen[e.Target], [2]time.Time{e.T})
					freezeOf[e.Seq] = [2]any{e.Target, len(c.frozen[e.Target]) - 1}
				}
			case "resume":
				if f, ok := freezeOf[e.Seq]; ok {
					c.frozen[f[0].(string)][f[1].(int)][1] = e.T
				}
			case FaultConnKill:
				c.conns[e.Target] = append(c.conns[e.Target], e.T)
			}
		case EvBegin:
			for _, n := range e.Orders {
				begun[n] = true
			}
		case EvCommit:
			for _, n := range e.Orders {
				committed[n] = true
			}
		case EvHandle:
			handles[e.Key] = append(handles[e.Key], claim{e})
		case EvQJob:
			qruns[e.Key] = append(qruns[e.Key], e)
		case EvLimStart:
			limStarts[e.Key] = append(limStarts[e.Key], e)
		case EvTaskStart:
			taskStarts[e.Key] = append(taskStarts[e.Key], e)
		case EvLimEnd, EvTaskEnd:
			ends[runOf(e)] = e
		case EvWorkflow:
			workflows = append(workflows, e)
		case EvWMHandle:
			wmHandles[e.Key] = append(wmHandles[e.Key], e)
		case EvFire:
			id := e.Key + "@" + e.Due.UTC().Format(time.RFC3339Nano)
			fires[id] = append(fires[id], claim{e})
		case EvElected:
			if _, ok := elected[e.Term]; !ok {
				rep.Terms++
			}
			if p, ok := elected[e.Term]; ok && p != e.Proc {
				c.fail("term won twice", "term %d won by %s and by %s", e.Term, p, e.Proc)
			}
			elected[e.Term] = e.Proc
			// A candidate whose leadership lapsed locally (frozen past
			// its TTL minus the margin) and that takes its own unexpired
			// lease again keeps the term: no other leader came between.
			if e.Term < lastTerm[e.Proc] {
				c.fail("term went back", "%s won term %d after term %d", e.Proc, e.Term, lastTerm[e.Proc])
			}
			if e.Term == lastTerm[e.Proc] {
				rep.Rewon++
			}
			lastTerm[e.Proc] = e.Term
			won[fmt.Sprintf("%s@%d", e.Proc, e.Term)] = true
		case EvStop:
			for k, v := range e.Stats {
				rep.Totals[k] += v
			}
		case EvFenced:
			if e.Err == "" && e.N == 0 {
				rep.FencedRefused++
			}
		case EvLocal:
			rep.FencedLocal++
		}
	}
	rep.Begun, rep.Committed, rep.Orders = len(begun), len(committed), len(st.Orders)
	c.checkTransactions(st, begun, committed)
	c.checkJobs(st, handles)
	c.checkSchedules(st, fires)
	c.checkStream(st)
	c.checkFence(st, won, elected)
	if st.Watermill {
		c.checkWatermill(st, wmHandles)
	}
	c.checkQueueJobs(st, qruns)
	c.checkLimited(st, limStarts, ends)
	c.checkWorkflows(st, workflows, taskStarts, ends)
	return rep
}

// runID names one run of a queue job: the process, the job's key and the
// attempt.
type runID struct {
	proc, key string
	attempt   int64
}

// runOf returns the run of a start or end event.
func runOf(e Event) runID { return runID{e.Proc, e.Key, e.N} }

// checkQueueJobs: every queue job completed, once: one job per order,
// each attempt's work run at most once, the completing attempt run, and
// every earlier attempt recorded in the job's errors, as the planned
// failure when it ran as one, or as lost; a job with a planned failure
// retried.
func (c *checker) checkQueueJobs(st *State, runs map[string][]Event) {
	s := AttemptStats{Lost: c.rep.QLost}
	seen := map[string]bool{}
	for _, j := range st.QJobs {
		id := j.Order
		if seen[id] {
			c.fail("queue job duplicated", "order %s has more than one queue job", id)
			continue
		}
		seen[id] = true
		c.checkAttempts("queue job", "the job of "+id, id, j, runs[id], &s)
	}
	c.rep.QJobsCompleted, c.rep.QRuns, c.rep.QPlanned = s.Completed, s.Runs, s.Planned
	for id := range runs {
		if !seen[id] {
			c.fail("queue job from nowhere", "%s ran as a queue job but the table has no job for it", id)
		}
	}
}

// checkAttempts checks the attempts of one job of package jobs, what
// ("queue job") naming its kind in the violations and name ("the job of
// o1") the job, key its plannedFailure key and rs the start events of
// its runs (N the attempt): the job completed, each attempt's work run at
// most once, none after the completing attempt, the completing attempt
// run and without an error recorded, and every earlier attempt recorded
// in the job's errors, as the planned failure when it ran as one, or as
// lost; a job whose first attempt fails on purpose completed in a later
// one. It counts the job in s and returns its runs by attempt, nil when
// it did not complete.
func (c *checker) checkAttempts(what, name, key string, j QueueJobState, rs []Event, s *AttemptStats) map[int64]Event {
	s.Runs += len(rs)
	if j.State != "completed" {
		c.fail(what+" not completed", "%s is %s after the run (attempt %d, %d runs)", name, j.State, j.Attempt, len(rs))
		return nil
	}
	s.Completed++
	byAttempt := map[int64]Event{}
	for _, r := range rs {
		if p, ok := byAttempt[r.N]; ok {
			c.fail(what+" attempt run twice", "attempt %d of %s run by %s and by %s", r.N, name, p.Proc, r.Proc)
		}
		byAttempt[r.N] = r
		if r.N > int64(j.Attempt) {
			c.fail(what+" run after it completed", "attempt %d of %s run by %s, the job completed in attempt %d", r.N, name, r.Proc, j.Attempt)
		}
	}
	if _, ok := byAttempt[int64(j.Attempt)]; !ok {
		c.fail(what+" completed unrun", "%s completed in attempt %d, which no worker recorded", name, j.Attempt)
	}
	var errs []struct {
		Attempt int    `json:"attempt"`
		Error   string `json:"error"`
	}
	if j.Errors != "" {
		if err := json.Unmarshal([]byte(j.Errors), &errs); err != nil {
			c.fail(what+" errors unreadable", "%s: %v", name, err)
			return byAttempt
		}
	}
	recorded := map[int]string{}
	for _, e := range errs {
		recorded[e.Attempt] = e.Error
	}
	for a := 1; a < j.Attempt; a++ {
		msg, ok := recorded[a]
		run, ran := byAttempt[int64(a)]
		switch {
		case !ok:
			c.fail(what+" retried unrecorded", "attempt %d of %s (completed in attempt %d) has no error recorded", a, name, j.Attempt)
		case ran && run.Err == errPlanned && strings.Contains(msg, errPlanned):
		case strings.HasPrefix(msg, "attempt lost"):
			why := "none"
			if ran {
				until := time.Now()
				if next, ok := byAttempt[int64(a+1)]; ok {
					until = next.T
				}
				why = c.excuse(run.Proc, run.T, until)
				if why == "" && c.connNote(run.Proc, run.T, until) != "" {
					why = "connections terminated"
				}
				if why == "" {
					why = "none"
				}
			}
			s.Lost[why]++
		default:
			c.fail(what+" retried unrecorded", "attempt %d of %s ended with %q, not the planned failure nor a lost attempt", a, name, msg)
		}
	}
	if _, ok := recorded[j.Attempt]; ok {
		c.fail(what+" completed with an error", "the completing attempt %d of %s has an error recorded", j.Attempt, name)
	}
	if plannedFailure(key) {
		if j.Attempt < 2 {
			c.fail(what+" planned failure lost", "%s completed in attempt %d though its first attempt fails", name, j.Attempt)
		} else {
			s.Planned++
		}
	}
	return byAttempt
}

// checkWatermill: every Watermill message fanned out to the consumer
// group, its delivery acked and released, and handed to a handler at
// least once; nothing handled that no producer wrote. Messages handed out
// again are counted by what happened to the previous handler's process.
func (c *checker) checkWatermill(st *State, handles map[string][]Event) {
	msgs := map[string]bool{}
	for _, m := range st.WMMessages {
		msgs[m.MessageID] = true
		c.rep.WMMessages++
		if m.Status != string(outbox.StatusPublished) {
			c.fail("watermill message not fanned out", "%s is %s in the message table after the run", m.MessageID, m.Status)
		}
	}
	dlv := map[string]int{}
	for _, d := range st.WMDeliveries {
		dlv[d.MessageID]++
		if !msgs[d.MessageID] {
			c.fail("watermill delivery from nowhere", "delivery of %s, which is not in the message table", d.MessageID)
		}
		if d.Status != string(outbox.StatusPublished) {
			c.fail("watermill message not handled", "the delivery of %s to the group is %s after the run (%d handler runs)", d.MessageID, d.Status, len(handles[d.MessageID]))
		} else {
			c.rep.WMAcked++
		}
	}
	for id := range msgs {
		if dlv[id] != 1 {
			c.fail("watermill message lost", "%s has %d deliveries to the group, want 1", id, dlv[id])
		}
		if len(handles[id]) == 0 && dlv[id] > 0 {
			c.fail("watermill message lost", "%s was never handed to a handler", id)
		}
	}
	keys := make([]string, 0, len(handles))
	for k := range handles {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hs := handles[k]
		c.rep.WMHandles += len(hs)
		if !msgs[k] {
			c.fail("watermill message from nowhere", "%s handled by %s but not in the message table", k, hs[0].Proc)
		}
		for i := 1; i < len(hs); i++ {
			a, b := hs[i-1], hs[i]
			why := c.excuse(a.Proc, a.T, b.T)
			if why == "" && c.connNote(a.Proc, a.T, b.T) != "" {
				why = "connections terminated"
			}
			if why == "" {
				why = "none"
			}
			c.rep.WMRedelivered[why]++
		}
	}
}

// checkTransactions: every committed order has its row, job, message,
// queue job and, for one order in 10 (limitedFor), its limited job; every
// one of them belongs to an attempted transaction, and none was written
// without the others.
func (c *checker) checkTransactions(st *State, begun, committed map[string]bool) {
	orders, jobs, msgs, wms, qjobs, lim := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, j := range st.QJobs {
		qjobs[j.Order] = true
	}
	for _, j := range st.Limited {
		lim[j.Order] = true
	}
	// limOK: the order has its limited job if and only if limitedFor.
	limOK := func(n string) bool { return lim[n] == limitedFor(n) }
	for _, m := range st.WMMessages {
		wms[m.MessageID] = true
	}
	// wmOK: the order's Watermill message is there, or the run has none.
	wmOK := func(n string) bool { return !st.Watermill || wms[n] }
	for _, n := range st.Orders {
		orders[n] = true
	}
	for _, j := range st.Jobs {
		jobs[j.Key] = true
	}
	for _, m := range st.Messages {
		msgs[m.MessageID] = true
	}
	for n := range committed {
		if !orders[n] || !jobs[n] || !msgs[n] || !wmOK(n) || !qjobs[n] || !limOK(n) {
			c.fail("committed write lost", "order %s committed, but order row %v, job %v, message %v, watermill message %v, queue job %v, limited job as planned %v",
				n, orders[n], jobs[n], msgs[n], wmOK(n), qjobs[n], limOK(n))
		}
	}
	seen := map[string]bool{}
	for _, set := range []map[string]bool{orders, jobs, msgs, wms, qjobs, lim} {
		for n := range set {
			if seen[n] {
				continue
			}
			seen[n] = true
			if !begun[n] {
				c.fail("write from nowhere", "%s is in the tables but no producer began it", n)
			}
			if !orders[n] || !jobs[n] || !msgs[n] || !wmOK(n) || !qjobs[n] || !limOK(n) {
				c.fail("transaction written half", "%s: order row %v, job %v, message %v, watermill message %v, queue job %v, limited job as planned %v",
					n, orders[n], jobs[n], msgs[n], wmOK(n), qjobs[n], limOK(n))
			}
		}
	}
}

// checkJobs: every job done exactly once, by the owner of its last
// claim; repeats only after a killed or frozen holder's lease; no job
// left claimed.
func (c *checker) checkJobs(st *State, handles map[string][]claim) {
	for _, j := range st.Jobs {
		cs := handles[j.Key]
		c.rep.Handles += len(cs)
		if j.Status != JobDone {
			c.fail("job not done", "%s is %s after the run (%d handles)", j.Key, j.Status, len(cs))
			continue
		}
		c.rep.JobsDone++
		if j.LeaseOwner != "" {
			c.fail("row left claimed", "job %s still leased by %s", j.Key, j.LeaseOwner)
		}
		if len(cs) == 0 {
			c.fail("job done unhandled", "%s is done by %q but no handler recorded it", j.Key, j.DoneBy)
			continue
		}
		sortClaims(cs)
		if last := cs[len(cs)-1]; j.DoneBy != last.Owner {
			c.fail("stale outcome landed", "job %s done by %q, but its last claim was %s's", j.Key, j.DoneBy, last.Owner)
		}
		for _, ex := range c.checkClaims("job", j.Key, cs) {
			if ex != "" {
				c.rep.Rehandled[ex]++
			}
		}
	}
}

// checkSchedules: every once schedule fired; no occurrence fired twice
// except after a killed or frozen holder's lease; no schedule left claimed.
func (c *checker) checkSchedules(st *State, fires map[string][]claim) {
	for _, s := range st.Schedules {
		if s.Kind == string(dispatch.KindOnce) && s.Status != string(dispatch.StatusFired) {
			c.fail("once schedule not fired", "%s is %s after the run", s.Key, s.Status)
		}
		if s.LeaseOwner != "" {
			c.fail("row left claimed", "schedule %s still leased by %s", s.Key, s.LeaseOwner)
		}
	}
	ids := make([]string, 0, len(fires))
	for id := range fires {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		cs := fires[id]
		c.rep.Fires += len(cs)
		sortClaims(cs)
		for _, ex := range c.checkClaims("schedule occurrence", id, cs) {
			if ex != "" {
				c.rep.Refired[ex]++
			}
		}
	}
}

// checkStream: every message published, and in the stream exactly once;
// nothing else in the stream.
func (c *checker) checkStream(st *State) {
	inTable := map[string]bool{}
	for _, m := range st.Messages {
		inTable[m.MessageID] = true
		if m.Status == string(outbox.StatusPublished) {
			c.rep.Published++
		} else {
			c.fail("message not published", "%s is %s after the run", m.MessageID, m.Status)
		}
		switch n := st.Stream[m.MessageID]; {
		case n == 0:
			c.fail("message lost", "%s is not in the stream", m.MessageID)
		case n > 1:
			c.fail("message duplicated", "%s is in the stream %d times", m.MessageID, n)
		}
	}
	for id, n := range st.Stream {
		c.rep.StreamMessages += n
		if !inTable[id] {
			c.fail("message from nowhere", "%s is in the stream (%d times) but not in the table", id, n)
		}
	}
	c.rep.StreamMessages += st.StreamNoID
	if st.StreamNoID > 0 {
		c.fail("message without id", "%d messages in the stream have no Nats-Msg-Id", st.StreamNoID)
	}
}

// checkFence: the fenced writes landed in an order of non-decreasing
// terms, each by the winner of its term; the fence row holds the last
// one's term; the lease row's term is at least every term won.
func (c *checker) checkFence(st *State, won map[string]bool, elected map[int64]string) {
	c.rep.FencedLanded = len(st.FenceLog)
	var prev int64
	for i, l := range st.FenceLog {
		if l.Term < prev {
			c.fail("fenced write of an older term landed", "write %d by %s of term %d landed after a write of term %d", i+1, l.Writer, l.Term, prev)
		}
		prev = max(prev, l.Term)
		if !won[fmt.Sprintf("%s@%d", l.Writer, l.Term)] {
			c.fail("fenced write by a non-leader", "write %d by %s of term %d, a term it did not win (won by %q)", i+1, l.Writer, l.Term, elected[l.Term])
		}
	}
	if n := len(st.FenceLog); n > 0 && st.FenceTerm != st.FenceLog[n-1].Term {
		c.fail("fence row", "the fence row's term is %d, the last write landed was of term %d", st.FenceTerm, st.FenceLog[n-1].Term)
	}
	for t := range elected {
		if t > st.LeaseTerm {
			c.fail("term went back", "term %d was won, the lease row's term is %d", t, st.LeaseTerm)
		}
	}
}

// sortClaims orders claims by claim time, then by the time they were
// recorded.
func sortClaims(cs []claim) {
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].ClaimedAt.Equal(cs[j].ClaimedAt) {
			return cs[i].ClaimedAt.Before(cs[j].ClaimedAt)
		}
		return cs[i].T.Before(cs[j].T)
	})
}
