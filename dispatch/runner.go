package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// Fire is one due fire of a schedule handed to a [FireFunc].
type Fire struct {
	// Schedule is the schedule in its claimed state; NextFireAt is the
	// time this fire was due.
	Schedule Schedule
	// Lag is how late the fire was claimed: claim time − NextFireAt.
	Lag time.Duration
}

// FireFunc runs one fire. A nil error is success; any other error is a
// failure that climbs the retry ladder (see [Policy.Decide]). ctx ends when
// the lease is lost or the worker drains past its timeout (see
// [Handler]); a panic counts as a failure.
type FireFunc func(ctx context.Context, f Fire) error

// ScheduleStats are running totals of a schedule worker's fires, by
// outcome step.
type ScheduleStats struct {
	Fired          int64 // successful fires
	Retries        int64 // failures below MaxFailures (retried after the backoff)
	Failed         int64 // once schedules failed for good
	Skipped        int64 // cron schedules advanced after MaxFailures failures
	MisfireSkipped int64 // cron fires not run under MisfireSkip
}

// ScheduleWorker fires due schedules: a [Worker] over the [Schedule] table
// whose handler runs a [FireFunc] and writes the outcome [Policy.Decide]
// computes, fenced by the lease.
type ScheduleWorker struct {
	*Worker[Schedule]
	policy Policy

	fired, retries, failed, skipped, misfireSkipped atomic.Int64
}

// NewScheduleWorker returns a worker that fires the due active schedules
// of store with fn under policy. cfg configures the loop; its Store,
// KeyField, Key, OwnerField, UntilField, OrderBy and Handler are set here
// and must be left zero. Its Due, optional here, narrows the schedules
// the worker fires (e.g. dao.In(ColKey, keys...): the schedules this
// worker has the code of), to which the worker adds its own due
// criteria (active, next fire time reached). Errors wrap
// [dao.ErrInvalidArgument].
func NewScheduleWorker(store dao.Store[Schedule], fn FireFunc, policy Policy, cfg Config[Schedule]) (*ScheduleWorker, error) {
	if fn == nil {
		return nil, fmt.Errorf("dispatch: new schedule worker: %w", argerr.Errorf("nil fire func"))
	}
	if cfg.Store != nil || cfg.KeyField != "" || cfg.Key != nil || cfg.Handler != nil || cfg.OwnerField != "" || cfg.UntilField != "" || cfg.OrderBy != nil {
		return nil, fmt.Errorf("dispatch: new schedule worker: %w", argerr.Errorf("the row fields of Config are set by the schedule worker"))
	}
	if policy.MisfireGrace < 0 {
		return nil, fmt.Errorf("dispatch: new schedule worker: %w", argerr.Errorf("negative misfire grace"))
	}
	sw := &ScheduleWorker{policy: policy.withDefaults()}
	cfg.Store = store
	cfg.KeyField, cfg.OwnerField, cfg.UntilField = ColID, ColLeaseOwner, ColLeaseUntil
	cfg.Key = func(s *Schedule) any { return s.ID }
	narrow := cfg.Due
	cfg.Due = func(now time.Time) dao.Criteria {
		due := dao.And(dao.Eq(ColStatus, string(StatusActive)), dao.Le(ColNextFireAt, now))
		if narrow != nil {
			due = dao.And(due, narrow(now))
		}
		return due
	}
	cfg.OrderBy = []dao.Order{dao.Asc(ColNextFireAt)}
	cfg.Handler = func(ctx context.Context, job *Job[Schedule]) dao.Set { return sw.handle(ctx, job, fn) }
	w, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("dispatch: new schedule worker: %w", err)
	}
	sw.Worker = w
	return sw, nil
}

// ScheduleStats returns the worker's totals by outcome step.
func (sw *ScheduleWorker) ScheduleStats() ScheduleStats {
	return ScheduleStats{
		Fired: sw.fired.Load(), Retries: sw.retries.Load(), Failed: sw.failed.Load(),
		Skipped: sw.skipped.Load(), MisfireSkipped: sw.misfireSkipped.Load(),
	}
}

// handle runs one fire and returns its outcome write. LastFiredAt is
// written as the time of the outcome write, so the outcomes of fires that
// finished together are written in one statement.
func (sw *ScheduleWorker) handle(ctx context.Context, job *Job[Schedule], fn FireFunc) dao.Set {
	s := &job.Row
	lag := job.ClaimedAt.Sub(s.NextFireAt)
	sw.m.fireLag(ctx, lag)
	if sw.policy.Misfire == MisfireSkip && sw.policy.Misfired(s, job.ClaimedAt) {
		o := sw.policy.Skip(s, job.Now())
		sw.misfireSkipped.Add(1)
		sw.m.outcome(ctx, o.Step)
		sw.log.Warn("misfire: fire skipped", "schedule", s.Key, "id", s.ID, "due", s.NextFireAt, "lag", lag, "next", o.NextFireAt)
		return o.Set
	}
	err := sw.call(ctx, fn, Fire{Schedule: *s, Lag: lag})
	if err != nil && errors.Is(context.Cause(ctx), ErrDrained) {
		// Cancelled by the drain before it completed: no outcome, the
		// lease is released and the fire runs again on the worker that
		// claims the row next. A fire that completed as the drain began
		// has its outcome written below, so it does not run twice.
		sw.log.Info("fire cancelled by the drain; its lease is released", "schedule", s.Key, "id", s.ID, "err", err)
		return nil
	}
	o := sw.policy.Decide(s, job.Now(), err)
	sw.m.outcome(ctx, o.Step)
	switch o.Step {
	case "fired", "advanced":
		sw.fired.Add(1)
		if sw.log.Enabled(ctx, slog.LevelDebug) {
			sw.log.Debug("fired", "schedule", s.Key, "id", s.ID, "lag", lag, "next", o.NextFireAt)
		}
	case "retry":
		sw.retries.Add(1)
		sw.log.Info("fire failed; retry after backoff", "schedule", s.Key, "id", s.ID, "failures", o.FailureCount, "next", o.NextFireAt, "err", err)
	case "skipped":
		sw.skipped.Add(1)
		sw.log.Warn("fire failed max times; skipped to the next occurrence", "schedule", s.Key, "id", s.ID, "max_failures", s.MaxFailures, "next", o.NextFireAt, "err", err)
	case "failed":
		sw.failed.Add(1)
		sw.log.Error("fire failed max times; schedule failed", "schedule", s.Key, "id", s.ID, "failures", o.FailureCount, "err", err)
	}
	if _, ok := o.Set[ColLastFiredAt]; ok {
		o.Set[ColLastFiredAt] = WriteTime{}
	}
	return o.Set
}

// call runs fn, turning a panic into an error.
func (sw *ScheduleWorker) call(ctx context.Context, fn FireFunc, f Fire) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(ctx, f)
}
