//go:build linux

package soak

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// checkLimited: every job of the limited queue completed once, under the
// rules of checkAttempts, and no more than the limit ran at once.
func (c *checker) checkLimited(st *State, starts map[string][]Event, ends map[runID]Event) {
	seen := map[string]bool{}
	for _, j := range st.Limited {
		id := j.Order
		if seen[id] {
			c.fail("limited job duplicated", "order %s has more than one limited job", id)
			continue
		}
		seen[id] = true
		c.checkAttempts("limited job", "the limited job of "+id, id, j, withEnds(starts[id], ends), &c.rep.Limited)
	}
	for _, id := range slices.Sorted(maps.Keys(starts)) {
		if !seen[id] {
			c.fail("limited job from nowhere", "%s ran as a limited job but the table has no limited job for it", id)
		}
	}
	c.checkLimit(st, starts, ends)
}

// withEnds returns the start events rs, each with the error of its run's
// end event, as checkAttempts reads a run.
func withEnds(rs []Event, ends map[runID]Event) []Event {
	out := make([]Event, len(rs))
	for i, r := range rs {
		out[i] = r
		if e, ok := ends[runOf(r)]; ok {
			out[i].Err = e.Err
		}
	}
	return out
}

// span is the time a run of the limited queue counts as running.
type span struct {
	from, to time.Time
	run      Event
}

// checkLimit: at no instant did more jobs of the limited queue run than
// its limit. A run counts from its start to its end, or to its claim's
// lease end when that comes first: a run without an end (its process was
// killed) holds its slot until its lease ends, and a run that ended after
// its lease (its process was frozen past it) held none from then on, as
// the claims count them. A run whose lease was renewed (one longer than
// half a lease) counts only to its claim's lease end, which makes the
// check looser, never stricter. A run again after a kill is a new run.
func (c *checker) checkLimit(st *State, starts map[string][]Event, ends map[runID]Event) {
	limit := st.LimitMax
	if limit == 0 {
		limit = LimitedMax
	}
	lease := st.Lease
	if lease == 0 {
		lease = soakLease
	}
	c.rep.LimitMax = limit
	var spans []span
	for _, id := range slices.Sorted(maps.Keys(starts)) {
		for _, r := range starts[id] {
			c.rep.LimitRuns++
			until := r.LeaseUntil
			if until.IsZero() {
				until = r.T.Add(lease)
			}
			until = until.Add(-leaseSlack)
			to := until
			if e, ok := ends[runOf(r)]; !ok {
				c.rep.LimitUnended++
			} else if e.T.After(until) {
				c.rep.LimitCut++
			} else {
				to = e.T
			}
			if to.After(r.T) {
				spans = append(spans, span{from: r.T, to: to, run: r})
			}
		}
	}
	type point struct {
		t     time.Time
		start bool
		i     int
	}
	points := make([]point, 0, 2*len(spans))
	for i, s := range spans {
		points = append(points, point{s.from, true, i}, point{s.to, false, i})
	}
	// Ends before starts at the same instant: a run ends before the
	// outcome that frees its slot, and starts after the claim that takes
	// one.
	sort.SliceStable(points, func(a, b int) bool {
		if !points[a].t.Equal(points[b].t) {
			return points[a].t.Before(points[b].t)
		}
		return !points[a].start && points[b].start
	})
	running := map[int]bool{}
	over := false
	for _, p := range points {
		if !p.start {
			delete(running, p.i)
			over = len(running) > limit
			continue
		}
		running[p.i] = true
		n := len(running)
		if n == limit {
			c.rep.LimitFull++
		}
		if n > c.rep.LimitPeak {
			c.rep.LimitPeak, c.rep.LimitPeakAt = n, p.t
		}
		if n > limit && !over {
			var names []string
			for _, i := range slices.Sorted(maps.Keys(running)) {
				r := spans[i].run
				names = append(names, fmt.Sprintf("%s attempt %d by %s from %s", r.Key, r.N, r.Proc, r.T.Format("15:04:05.000")))
			}
			c.fail("limit exceeded", "%d jobs of queue %s running at %s, limit %d: %s",
				n, LimitedQueue, p.t.Format(time.RFC3339Nano), limit, strings.Join(names, "; "))
		}
		over = n > limit
	}
}
