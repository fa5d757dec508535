package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// maxErrorLen is the longest error text kept per attempt, in bytes.
const maxErrorLen = 2000

// ScheduleAhead is the longest wait of a retry or snooze that is stored
// available with its future time, rather than retryable or scheduled: a
// claim takes an available job only once its scheduled time has come, so
// a short wait needs no scheduler to move the job, which would add up to
// a tick to it and a write.
const ScheduleAhead = 5 * time.Second

// handle runs one claimed job and returns the outcome the dispatch worker
// writes, fenced by the job's lease:
//
//   - success: completed, finalized now;
//   - [Snooze]: scheduled (available when the wait is 0) at now + d,
//     the attempt given back;
//   - [Cancel], or a cancel request seen while it ran: cancelled;
//   - another error or a panic: retryable at now + backoff, or discarded
//     after the last attempt, the attempt's error appended to Errors;
//   - cancelled by the drain: the attempt given back and the lease
//     released, so that another worker runs it at once;
//   - its lease lost: nothing (the fence would refuse the write).
//
// Attempts that ended without an outcome (a worker that died, a lease
// that lapsed) are recorded in Errors, as lost, with the next outcome that
// writes Errors.
func (c *Client) handle(ctx context.Context, j *dispatch.Job[Row]) dao.Set {
	row := &j.Row
	row.State = StateRunning
	kw := c.cfg.Workers.lookup(row.Kind)
	if kw == nil {
		c.stats.discarded.Add(1)
		c.log.Error("job discarded: no worker for its kind", "id", row.ID, "kind", row.Kind)
		return c.final(row, StateDiscarded, j.Now(), attemptErr(row, j.Now(), fmt.Errorf("%w %q", ErrUnknownKind, row.Kind), ""))
	}
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rj := runningJob{cancel: cancel}
	switch {
	case kw.timeout > 0 && kw.timeout < 2*c.cfg.Tick:
		// A timeout shorter than two ticks has a timer of its own.
		var stop context.CancelFunc
		jctx, stop = context.WithTimeoutCause(jctx, kw.timeout, ErrTimeout)
		defer stop()
	case kw.timeout > 0:
		// A longer one is checked at each tick (see expire): a timer
		// per job would cost more than the work of a short job.
		rj.deadline = time.Now().Add(kw.timeout)
	}
	c.mu.Lock()
	c.running[row.ID] = rj
	c.mu.Unlock()
	err := c.call(jctx, kw, row)
	c.mu.Lock()
	delete(c.running, row.ID)
	c.mu.Unlock()
	now := j.Now()

	cause := context.Cause(jctx)
	switch {
	case errors.Is(context.Cause(ctx), dispatch.ErrLeaseLost):
		return nil
	case err != nil && errors.Is(context.Cause(ctx), dispatch.ErrDrained):
		c.log.Info("job cancelled by the drain; released without spending its attempt", "id", row.ID, "kind", row.Kind)
		return dao.Set{ColAttempt: row.Attempt - 1}
	}
	var snooze *snoozeError
	var cancelled *cancelError
	switch {
	case err == nil:
		c.stats.completed.Add(1)
		return c.final(row, StateCompleted, now, nil)
	case errors.As(err, &snooze):
		c.stats.snoozed.Add(1)
		at, state := now.Add(max(snooze.d, 0)), StateScheduled
		if snooze.d <= ScheduleAhead {
			state = StateAvailable
		}
		if state == StateAvailable {
			c.wakeAfter(row.Queue, snooze.d)
		}
		set := dao.Set{ColState: string(state), ColScheduledAt: at, ColAttempt: row.Attempt - 1}
		keepUniqueIn(row, state, set)
		return set
	case errors.As(err, &cancelled), errors.Is(cause, ErrCancelled):
		c.stats.cancelled.Add(1)
		c.log.Info("job cancelled", "id", row.ID, "kind", row.Kind, "err", err)
		return c.final(row, StateCancelled, now, attemptErr(row, now, err, ""))
	}
	trace := ""
	var p *panicError
	if errors.As(err, &p) {
		trace = p.trace
	}
	if errors.Is(cause, ErrTimeout) && !errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%w after %v: %w", ErrTimeout, kw.timeout, err)
	}
	ae := attemptErr(row, now, err, trace)
	if row.Attempt >= row.MaxAttempts {
		c.stats.discarded.Add(1)
		c.log.Warn("job discarded after its last attempt", "id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "err", err)
		return c.final(row, StateDiscarded, now, ae)
	}
	c.stats.retried.Add(1)
	wait := kw.backoff(row.Attempt)
	c.log.Info("job attempt failed; retry after backoff", "id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "retry_in", wait, "err", err)
	state := StateRetryable
	if wait <= ScheduleAhead {
		state = StateAvailable
		c.wakeAfter(row.Queue, wait)
	}
	set := dao.Set{ColState: string(state), ColScheduledAt: now.Add(wait), ColErrors: appendErrors(row, now, ae)}
	keepUniqueIn(row, state, set)
	return set
}

// call runs the kind's work on row, turning a panic into an error that
// carries the stack.
func (c *Client) call(ctx context.Context, kw *kindWorker, row *Row) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, trace: string(debug.Stack())}
		}
	}()
	return kw.run(ctx, row)
}

// prepare decodes the args of each claimed row whose kind has a worker,
// in the claim loop before the rows' work starts (dispatch
// Config.Prepare): one goroutine whose stack the decoder has grown
// already decodes the whole claim, where each job's own goroutine would
// grow its stack for it. A decode error is kept for the job's attempt.
func (c *Client) prepare(rows []Row) {
	for i := range rows {
		row := &rows[i]
		if kw := c.cfg.Workers.lookup(row.Kind); kw != nil {
			row.args.v, row.args.err = kw.decode(row)
			row.args.ok = true
		}
	}
}

// completedSet is the outcome of a job that completed with nothing else
// to write, shared by all such jobs (the dispatch worker never changes a
// returned Set): its outcomes group at no cost.
var completedSet = dao.Set{ColState: string(StateCompleted), ColFinalizedAt: dispatch.WriteTime{}}

// final returns the outcome that ends row in state at now, with ae (when
// not nil) appended to its errors. The finalized time is written as the
// time of the outcome write, so that the outcomes of jobs that ended
// alike are one statement.
func (c *Client) final(row *Row, state State, now time.Time, ae *AttemptError) dao.Set {
	if state == StateCompleted && ae == nil && row.UniqueKey == nil && row.Attempt == 1 {
		return completedSet
	}
	set := dao.Set{ColState: string(state), ColFinalizedAt: dispatch.WriteTime{}}
	if ae != nil || lostAttempts(row) > 0 {
		set[ColErrors] = appendErrors(row, now, ae)
	}
	keepUniqueIn(row, state, set)
	return set
}

// attemptErr returns the error record of row's current attempt.
func attemptErr(row *Row, now time.Time, err error, trace string) *AttemptError {
	msg := "cancelled"
	if err != nil {
		msg = err.Error()
	}
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	return &AttemptError{Attempt: row.Attempt, At: now, Error: msg, Trace: trace}
}

// lostAttempts returns how many attempts before the current one ended
// without a recorded outcome: every earlier attempt either failed (and
// has an error) or was lost.
func lostAttempts(row *Row) int {
	errs, _ := row.AttemptErrors()
	return max(row.Attempt-1-len(errs), 0)
}

// appendErrors returns row's Errors with a record for each lost attempt
// and then ae (when not nil) appended.
func appendErrors(row *Row, now time.Time, ae *AttemptError) string {
	errs, err := row.AttemptErrors()
	if err != nil {
		errs = []AttemptError{{Attempt: 0, At: now, Error: "earlier errors unreadable: " + err.Error()}}
	}
	seen := map[int]bool{}
	for _, e := range errs {
		seen[e.Attempt] = true
	}
	for a := 1; a < row.Attempt; a++ {
		if !seen[a] && len(errs) < row.Attempt-1 {
			errs = append(errs, AttemptError{Attempt: a, At: now, Error: "attempt lost: its lease ended before an outcome was written (worker stopped or unreachable)"})
		}
	}
	if ae != nil {
		errs = append(errs, *ae)
	}
	slices.SortStableFunc(errs, func(a, b AttemptError) int { return cmp.Compare(a.Attempt, b.Attempt) })
	b, _ := json.Marshal(errs)
	return string(b)
}
