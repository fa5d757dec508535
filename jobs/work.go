package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/handlerctx"
)

// maxErrorLen is the longest error text kept per attempt, in bytes.
const maxErrorLen = 2000

// ScheduleAhead is the longest wait of a retry or snooze that the client
// which wrote it ends itself: when the wait ends it makes the due jobs of
// the queue available (one statement for the jobs due together) and
// claims at once, where a longer wait ends at the scheduler's next tick
// after it (see [Client.Schedule]). The job reads retryable, or
// scheduled, until then either way.
const ScheduleAhead = 5 * time.Second

// handle runs one claimed job and returns the outcome the dispatch worker
// writes, fenced by the job's lease:
//
//   - success: completed, finalized now;
//   - [Snooze]: scheduled at now plus d (available at once when d is 0
//     or less), the attempt given back;
//   - [Cancel], or a cancel request seen while it ran: cancelled;
//   - another error or a panic: retryable at now + backoff, or discarded
//     after the last attempt, the attempt's error appended to Errors;
//   - cancelled by the drain: the attempt given back and the lease
//     released, so that another worker runs it at once;
//   - of a kind without worker in this client (which its queue's claim
//     leaves out): the attempt given back and the lease released;
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
		// Not claimed by the queue's criteria; should it come anyway, it
		// is left, unspent, to a client that knows its kind.
		c.log.Warn("job of a kind without worker released for a client that knows it", "id", row.ID, "kind", row.Kind)
		return attemptBack
	}
	// The work's context ends on a cancel request (cause ErrCancelled)
	// as on the worker's own cancellations. The worker's handler context
	// (always, from the worker) is cancelled itself, its own cause kept
	// apart (OwnCause); another context gets a cancellable one under it.
	var jctx context.Context
	var rj runningJob
	if hc, ok := ctx.(*handlerctx.Context); ok {
		jctx, rj.hc = hc, hc
	} else {
		var cancel context.CancelCauseFunc
		jctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		rj.cancel = cancel
	}
	if kw.timeout > 0 {
		// A deadline of the context package, so that the work and the
		// contexts it derives see context.DeadlineExceeded at the
		// timeout (cause ErrTimeout).
		var stop context.CancelFunc
		jctx, stop = context.WithTimeoutCause(jctx, kw.timeout, ErrTimeout)
		defer stop()
	}
	c.mu.Lock()
	c.running[row.ID] = rj
	c.mu.Unlock()
	row.info.began = time.Now()
	err := runWork(context.WithValue(jctx, outputKey{}, row), c.workMW, kw, row)
	row.info.ended = time.Now()
	c.mu.Lock()
	delete(c.running, row.ID)
	c.mu.Unlock()
	now := j.Now()

	cause := context.Cause(jctx)
	// The worker's cause: a lost lease, a drain, or nil.
	own := context.Cause(ctx)
	if rj.hc != nil {
		own = rj.hc.OwnCause()
	}
	switch {
	case errors.Is(own, dispatch.ErrLeaseLost):
		return nil
	case err != nil && errors.Is(own, dispatch.ErrDrained):
		c.log.Info("job cancelled by the drain; released without spending its attempt", "id", row.ID, "kind", row.Kind)
		return dao.Set{ColAttempt: row.Attempt - 1}
	case row.info.settled:
		return c.settledSet(row, now)
	}
	if err == nil {
		c.stats.completed.Add(1)
		row.info.event = EventJobCompleted
		return c.final(row, StateCompleted, now, nil)
	}
	return c.failed(ctx, kw, row, now, err, cause)
}

// failed returns the outcome of row's attempt whose work returned err,
// not nil (cause is the cause of the work's context): snoozed, cancelled,
// retryable or discarded, as handle says. Its error targets live here,
// apart from the success path, which so allocates none.
func (c *Client) failed(ctx context.Context, kw *kindWorker, row *Row, now time.Time, err, cause error) dao.Set {
	var snooze *SnoozeError
	var cancelled *CancelError
	switch {
	case errors.As(err, &snooze):
		c.stats.snoozed.Add(1)
		row.info.event = EventJobSnoozed
		at, state := now.Add(max(snooze.Duration, 0)), StateScheduled
		if snooze.Duration <= 0 {
			state = StateAvailable
		}
		return c.waitSet(row, state, snooze.Duration, dao.Set{ColScheduledAt: at, ColAttempt: row.Attempt - 1})
	case errors.As(err, &cancelled), errors.Is(cause, ErrCancelled):
		c.stats.cancelled.Add(1)
		c.log.Info("job cancelled", "id", row.ID, "kind", row.Kind, "err", err)
		row.info.event = EventJobCancelled
		return c.final(row, StateCancelled, now, attemptErr(row, now, err, ""))
	}
	trace := ""
	var p *PanicError
	if errors.As(err, &p) {
		trace = p.Trace
	}
	if errors.Is(cause, ErrTimeout) && !errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%w after %v: %w", ErrTimeout, kw.timeout, err)
	}
	ae := attemptErr(row, now, err, trace)
	if c.handleError(ctx, row, err) {
		c.stats.cancelled.Add(1)
		c.log.Info("job cancelled by the error handler", "id", row.ID, "kind", row.Kind, "err", err)
		row.info.event = EventJobCancelled
		return c.final(row, StateCancelled, now, ae)
	}
	if row.Attempt >= row.MaxAttempts {
		c.stats.discarded.Add(1)
		row.info.event = EventJobDiscarded
		c.log.Warn("job discarded after its last attempt", "id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "err", err)
		return c.final(row, StateDiscarded, now, ae)
	}
	c.stats.retried.Add(1)
	row.info.event = EventJobFailed
	wait := kw.backoff(row.Attempt)
	c.log.Info("job attempt failed; retry after backoff", "id", row.ID, "kind", row.Kind, "attempt", row.Attempt, "retry_in", wait, "err", err)
	return c.waitSet(row, StateRetryable, wait, dao.Set{ColScheduledAt: now.Add(wait), ColErrors: appendErrors(row, now, ae)})
}

// waitSet returns set, the outcome that leaves row in state (retryable
// or scheduled) until its wait d ends, completed with the state, the
// unique key cleared when state does not hold it, and the work's output.
// When d is at most [ScheduleAhead] this client ends the wait itself:
// it makes the queue's due jobs available and claims at once
// (endWaitAfter).
func (c *Client) waitSet(row *Row, state State, d time.Duration, set dao.Set) dao.Set {
	c.endWaitAfter(row.Queue, d)
	set[ColState] = string(state)
	keepUniqueIn(row, state, set)
	return withOutput(row, set)
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
	if state == StateCompleted && ae == nil && row.UniqueKey == nil && row.SequenceHead == nil && row.Attempt == 1 && row.info.output == nil {
		return completedSet
	}
	set := dao.Set{ColState: string(state), ColFinalizedAt: dispatch.WriteTime{}}
	if ae != nil || lostAttempts(row) > 0 {
		set[ColErrors] = appendErrors(row, now, ae)
	}
	keepUniqueIn(row, state, set)
	return withOutput(row, set)
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

// attemptLost is the error recorded for an attempt that ended without an
// outcome.
const attemptLost = "attempt lost: its lease ended before an outcome was written (worker stopped or unreachable)"

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
			errs = append(errs, AttemptError{Attempt: a, At: now, Error: attemptLost})
		}
	}
	if ae != nil {
		errs = append(errs, *ae)
	}
	slices.SortStableFunc(errs, func(a, b AttemptError) int { return cmp.Compare(a.Attempt, b.Attempt) })
	b, _ := json.Marshal(errs)
	return string(b)
}
