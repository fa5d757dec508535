//go:build linux

package soak

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// check reads the histories, the tables and the stream, and runs Check.
func (r *run) check(ctx context.Context) (*Report, error) {

	events, bad, err := ReadHistories(r.dir)
	if err != nil {
		return nil, err
	}
	st := &State{}
	db := r.db.WithContext(ctx)
	t := r.tables
	if err := db.Table(t.Orders).Order("id").Pluck("number", &st.Orders).Error; err != nil {
		return nil, fmt.Errorf("soak: read orders: %w", err)
	}
	if err := db.Table(t.Jobs).Select("job_key, status, lease_owner, done_by").Order("id").Scan(&st.Jobs).Error; err != nil {
		return nil, fmt.Errorf("soak: read jobs: %w", err)
	}
	if err := db.Table(t.Outbox).Select("message_id, status").Order("id").Scan(&st.Messages).Error; err != nil {
		return nil, fmt.Errorf("soak: read messages: %w", err)
	}
	if err := db.Table(t.Schedules).Select("schedule_key, kind, status, lease_owner").Order("id").Scan(&st.Schedules).Error; err != nil {
		return nil, fmt.Errorf("soak: read schedules: %w", err)
	}
	if err := db.Table(t.FenceLog).Order("id").Find(&st.FenceLog).Error; err != nil {
		return nil, fmt.Errorf("soak: read the fence log: %w", err)
	}
	var fence Fence
	if err := db.Table(t.Fence).Where("id = ?", 1).Take(&fence).Error; err != nil {
		return nil, fmt.Errorf("soak: read the fence row: %w", err)
	}
	if fence.Term != nil {
		st.FenceTerm = *fence.Term
	}
	leases, err := sqlstore.NewLeases(r.db, t.Leaders)
	if err != nil {
		return nil, err
	}
	if l, err := leases.GetLease(ctx, "soak-maintenance"); err == nil {
		st.LeaseTerm = l.Term
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	audit, err := natspub.Audit(actx, r.js, r.stream)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("soak: read the stream back: %w", err)
	}
	st.Stream, st.StreamNoID = audit.IDs, audit.NoID
	if err := r.readQueueJobs(ctx, st); err != nil {
		return nil, err
	}
	st.Workflows, st.Lease = r.wfs, r.cfg.Lease
	if t.WM != "" {
		st.Watermill = true
		if err := db.Table(t.WM).Select("message_id, status").Order("id").Scan(&st.WMMessages).Error; err != nil {
			return nil, fmt.Errorf("soak: read the watermill messages: %w", err)
		}
		if err := db.Table(t.WMDeliveries()).Select("message_id, status").Order("id").Scan(&st.WMDeliveries).Error; err != nil {
			return nil, fmt.Errorf("soak: read the watermill deliveries: %w", err)
		}
	}
	rep := Check(events, st)
	if bad > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("history: %d lines did not decode", bad))
	}
	if r.drained < 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("drain: jobs, messages or once schedules still undone %v after the load", r.o.DrainTimeout))
	}
	return rep, nil
}

// Print writes the report of run r: the faults injected, the throughput,
// the recoveries, the figures of each check and the verdict.
func (rep *Report) Print(out io.Writer, r *run) {
	load := r.loadEnd.Sub(r.loadFrom)
	byKind := map[string]int{}
	injected, skipped := 0, 0
	var longest *faultRecord
	var recs []time.Duration
	unrecovered := 0
	for _, f := range r.faults {
		if f.skipped != "" {
			skipped++
			continue
		}
		injected++
		byKind[f.Kind]++
		if f.recovery < 0 {
			unrecovered++
			continue
		}
		recs = append(recs, f.recovery)
		if longest == nil || f.recovery > longest.recovery {
			longest = f
		}
	}
	kinds := make([]string, 0, len(byKind))
	for _, k := range []string{FaultKill, FaultFreeze, FaultConnKill, FaultNATSKill} {
		if byKind[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, byKind[k]))
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "faults: %d injected (%s), %d skipped (target already down)\n", injected, strings.Join(kinds, ", "), skipped)
	fmt.Fprintf(out, "throughput over the %v load: %d orders committed (%.0f/s; %d more whose commit's answer was lost), each with its job and message in one transaction;\n",
		load.Round(time.Second), rep.Committed, float64(rep.Committed)/load.Seconds(), rep.Orders-rep.Committed)
	drained := "never"
	if r.drained >= 0 {
		drained = r.drained.Round(time.Millisecond).String()
	}
	fmt.Fprintf(out, "  %d jobs done (%d handler runs), %d messages published (stream: %d), %d schedule fires; backlog drained %s after the load\n",
		rep.JobsDone, rep.Handles, rep.Published, rep.StreamMessages, rep.Fires, drained)
	if longest != nil {
		sort.Slice(recs, func(i, j int) bool { return recs[i] < recs[j] })
		fmt.Fprintf(out, "recovery (every job and message written before a fault done and published): longest %v after fault %d at %.1fs (%s), median %v",
			longest.recovery.Round(10*time.Millisecond), longest.seq, longest.start.Sub(r.loadFrom).Seconds(), longest.PlannedFault,
			recs[len(recs)/2].Round(10*time.Millisecond))
		if unrecovered > 0 {
			fmt.Fprintf(out, "; %d faults never recovered", unrecovered)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "jobs handled again after their holder's lease: %d after a SIGKILL, %d after a SIGSTOP; occurrences fired again: %d, %d\n",
		rep.Rehandled["SIGKILL"], rep.Rehandled["SIGSTOP"], rep.Refired["SIGKILL"], rep.Refired["SIGSTOP"])
	tot := rep.Totals
	fmt.Fprintf(out, "outcomes refused by the fence: %d jobs, %d fires, %d relay marks; failed writes: %d outcomes, %d fires, %d relay marks (processes that stopped by themselves)\n",
		tot["jobs_lease_lost"], tot["fires_lease_lost"], tot["relay_lease_lost"], tot["jobs_write_errors"], tot["fires_write_errors"], tot["relay_mark_errors"])
	fmt.Fprintf(out, "leadership: %d terms won (%d taken again by their holder after a local lapse), %d fenced writes landed, %d refused by the database's fence, %d refused locally (ErrNotLeader: the leadership had lapsed)\n",
		rep.Terms, rep.Rewon, rep.FencedLanded, rep.FencedRefused, rep.FencedLocal)
	fmt.Fprintf(out, "job queue (package jobs): %d jobs completed (%d work runs), %d retried after the planned failure of their first attempt; attempts lost and run again: %d after a SIGKILL, %d after a SIGSTOP, %d after terminated connections, %d with no fault\n",
		rep.QJobsCompleted, rep.QRuns, rep.QPlanned, rep.QLost["SIGKILL"], rep.QLost["SIGSTOP"], rep.QLost["connections terminated"], rep.QLost["none"])
	lim := rep.Limited
	fmt.Fprintf(out, "limited queue (Limit{Max: %d} across the workers): at most %d running at once (first at %.1fs of the load), limit %d, reached %d times; %d jobs completed (%d runs: %d without an end, counted to their lease's end; %d ended after it, counted to it); attempts lost and run again: %d after a SIGKILL, %d after a SIGSTOP, %d after terminated connections, %d with no fault\n",
		rep.LimitMax, rep.LimitPeak, rep.LimitPeakAt.Sub(r.loadFrom).Seconds(), rep.LimitMax, rep.LimitFull, lim.Completed, rep.LimitRuns, rep.LimitUnended, rep.LimitCut,
		lim.Lost["SIGKILL"], lim.Lost["SIGSTOP"], lim.Lost["connections terminated"], lim.Lost["none"])
	tk := rep.Tasks
	fmt.Fprintf(out, "workflows: %d inserted, %d finished (%d tasks, %d dependencies; longest %v from insert to last task), %d tasks completed (%d runs, %d retried after a planned failure); attempts lost and run again: %d after a SIGKILL, %d after a SIGSTOP, %d after terminated connections, %d with no fault\n",
		rep.Workflows, rep.WorkflowsDone, rep.WorkflowTasks, rep.WorkflowDeps, rep.WorkflowLongest.Round(time.Millisecond), tk.Completed, tk.Runs, tk.Planned,
		tk.Lost["SIGKILL"], tk.Lost["SIGSTOP"], tk.Lost["connections terminated"], tk.Lost["none"])
	if r.tables.WM != "" {
		fmt.Fprintf(out, "watermill: %d messages, %d acked by the consumer group of %d subscriber processes (%d handler runs; %d counted by the processes that stopped by themselves); handed out again: %d after a SIGKILL, %d after a SIGSTOP, %d after terminated connections, %d with no fault (at least once)\n",
			rep.WMMessages, rep.WMAcked, r.o.Subscribers, rep.WMHandles, tot["wm_handled"],
			rep.WMRedelivered["SIGKILL"], rep.WMRedelivered["SIGSTOP"], rep.WMRedelivered["connections terminated"], rep.WMRedelivered["none"])
	}
	if len(rep.Violations) == 0 {
		verdict := "verdict: OK: every job done once, every queue job completed once with its retries recorded, the limited queue within its limit, every workflow task after its dependencies, every message in the stream once"
		if r.tables.WM != "" {
			verdict += ", every Watermill message handled and acked"
		}
		fmt.Fprintln(out, verdict+", terms only increased, nothing left claimed")
		return
	}
	fmt.Fprintf(out, "verdict: FAILED: %d violations\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(out, "  %s\n", v)
	}
	fmt.Fprintf(out, "replay: claimstore-dev soak --backend %s --duration %v --seed %d\n", r.backend, r.o.Duration, r.o.Seed)
}
