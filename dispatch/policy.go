package dispatch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// Retry ladder defaults.
const (
	DefaultBackoffBase  = 30 * time.Second
	DefaultBackoffMax   = 15 * time.Minute
	DefaultMaxFailures  = 5
	DefaultMisfireGrace = time.Minute
)

// Backoff returns the wait before the retry that follows the failures-th
// consecutive failure (failures >= 1).
type Backoff func(failures int) time.Duration

// Doubling returns the backoff base·2^(failures−1), capped at max; with
// jitter in (0, 1] each wait is drawn uniformly from [d·(1−jitter), d], so
// that many schedules failing together do not retry in step. Doubling(30 s,
// 15 min, 0) is the default ladder: 30 s, 1 min, 2 min, 4 min, 8 min, 15
// min, 15 min, …
func Doubling(base, max time.Duration, jitter float64) Backoff {
	return func(failures int) time.Duration {
		d := base
		for i := 1; i < failures && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		if jitter > 0 {
			d -= time.Duration(rand.Float64() * min(jitter, 1) * float64(d))
		}
		return d
	}
}

// Misfire is what a worker does with a cron schedule claimed more than
// the misfire grace after its NextFireAt (after downtime, or a backlog),
// when one or more occurrences were missed.
type Misfire int

const (
	// MisfireFireOnce fires the schedule once for all the missed
	// occurrences, then advances to the next occurrence after now. The
	// default.
	MisfireFireOnce Misfire = iota
	// MisfireSkip does not fire; it advances to the next occurrence after
	// now, records the skip in LastError ("misfire: skipped …") and logs
	// it. Once schedules are never skipped: a late once schedule fires.
	MisfireSkip
)

// Policy is the outcome rules of a schedule worker.
type Policy struct {
	// Backoff is the retry ladder; default Doubling(30 s, 15 min, 0).
	Backoff Backoff
	// Misfire is the misfire policy of cron schedules; default
	// MisfireFireOnce.
	Misfire Misfire
	// MisfireGrace is how late past NextFireAt a cron fire may be claimed
	// and still count as on time; default one minute.
	MisfireGrace time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.Backoff == nil {
		p.Backoff = Doubling(DefaultBackoffBase, DefaultBackoffMax, 0)
	}
	if p.MisfireGrace == 0 {
		p.MisfireGrace = DefaultMisfireGrace
	}
	return p
}

// Outcome is the decision of [Policy.Decide] for one fire.
type Outcome struct {
	// Set is the write to apply to the schedule row (fenced by the worker).
	Set dao.Set
	// Status, FailureCount and NextFireAt are the schedule's state after
	// Set (NextFireAt is zero when the status is terminal).
	Status       Status
	FailureCount int
	NextFireAt   time.Time
	// Step names what happened: "fired", "advanced", "retry", "failed",
	// "skipped" (max failures reached, cron advanced), "misfire-skipped".
	Step string
}

// Decide returns the outcome of a fire of s that ended at now with err
// (nil: success):
//
//   - success, once: status fired, LastFiredAt now, FailureCount 0.
//   - success, cron: NextFireAt the next occurrence after now in the
//     schedule's zone, LastFiredAt now, FailureCount 0; status fired when
//     there is none.
//   - failure: FailureCount + 1 and LastError err's text (truncated to
//     MaxErrorLen); below MaxFailures, NextFireAt now + Backoff(count).
//     At MaxFailures a once schedule is failed (terminal), a cron schedule
//     skips and advances: NextFireAt the next occurrence after now,
//     FailureCount 0, LastError kept; with no next occurrence it is
//     failed too.
//
// LastError is kept on success. A cron expression that no longer parses is
// a failure of every fire.
func (p Policy) Decide(s *Schedule, now time.Time, err error) Outcome {
	p = p.withDefaults()
	now = now.UTC()
	if err == nil {
		o := Outcome{Set: dao.Set{ColLastFiredAt: now, ColFailureCount: 0}, Step: "fired"}
		if s.Kind == KindCron {
			if next, nerr := NextCron(s.Cron, s.TimeZone, now); nerr == nil {
				o.Set[ColNextFireAt] = next
				o.Status, o.NextFireAt, o.Step = StatusActive, next, "advanced"
				return o
			} else if !errors.Is(nerr, ErrNoNextOccurrence) {
				return p.Decide(s, now, nerr)
			}
		}
		o.Set[ColStatus] = string(StatusFired)
		o.Status = StatusFired
		return o
	}
	msg := err.Error()
	if len(msg) > MaxErrorLen {
		msg = msg[:MaxErrorLen]
	}
	failures := s.FailureCount + 1
	max := s.MaxFailures
	if max <= 0 {
		max = DefaultMaxFailures
	}
	o := Outcome{Set: dao.Set{ColLastError: msg}}
	if failures < max {
		next := now.Add(p.Backoff(failures))
		o.Set[ColFailureCount] = failures
		o.Set[ColNextFireAt] = next
		o.Status, o.FailureCount, o.NextFireAt, o.Step = StatusActive, failures, next, "retry"
		return o
	}
	if s.Kind == KindCron {
		if next, nerr := NextCron(s.Cron, s.TimeZone, now); nerr == nil {
			o.Set[ColFailureCount] = 0
			o.Set[ColNextFireAt] = next
			o.Status, o.NextFireAt, o.Step = StatusActive, next, "skipped"
			return o
		}
	}
	o.Set[ColFailureCount] = failures
	o.Set[ColStatus] = string(StatusFailed)
	o.Status, o.FailureCount, o.Step = StatusFailed, failures, "failed"
	return o
}

// Misfired reports whether the fire of s claimed at now misses
// occurrences under p: a cron schedule claimed more than MisfireGrace
// after its NextFireAt. With MisfireSkip such a fire is not run; see
// [Policy.Skip].
func (p Policy) Misfired(s *Schedule, now time.Time) bool {
	p = p.withDefaults()
	return s.Kind == KindCron && now.Sub(s.NextFireAt) > p.MisfireGrace
}

// Skip returns the outcome of a misfired cron fire that MisfireSkip does
// not run: NextFireAt the next occurrence after now, LastError recording
// the skip, FailureCount unchanged; status fired when there is no next
// occurrence.
func (p Policy) Skip(s *Schedule, now time.Time) Outcome {
	now = now.UTC()
	msg := fmt.Sprintf("misfire: skipped the fire due at %s, claimed at %s", s.NextFireAt.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	next, err := NextCron(s.Cron, s.TimeZone, now)
	if err != nil {
		return Outcome{Set: dao.Set{ColStatus: string(StatusFired), ColLastError: msg}, Status: StatusFired, FailureCount: s.FailureCount, Step: "misfire-skipped"}
	}
	return Outcome{Set: dao.Set{ColNextFireAt: next, ColLastError: msg}, Status: StatusActive, FailureCount: s.FailureCount, NextFireAt: next, Step: "misfire-skipped"}
}
