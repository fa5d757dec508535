package jobs

import (
	"errors"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// Errors of the job queue. Lookups of a job that does not exist wrap
// dao.ErrNotFound; bad input wraps dao.ErrInvalidArgument.
var (
	// ErrCancelled is the cause of a work function's context when
	// [Client.Cancel] cancelled the running job; the job ends cancelled.
	ErrCancelled = errors.New("jobs: job cancelled")
	// ErrTimeout is the cause of a work function's context when the job
	// ran past its timeout; the attempt fails with it.
	ErrTimeout = errors.New("jobs: job timed out")
	// ErrRunning reports an operation that needs a job that is not
	// running ([Client.Delete] of a running job).
	ErrRunning = errors.New("jobs: job is running")
	// ErrUnknownKind is the error recorded on a job whose kind has no
	// worker in the client that claimed it; the job is discarded.
	ErrUnknownKind = errors.New("jobs: no worker for the job's kind")
	// ErrSchemaTooNew reports a job table migrated by a newer version of
	// this package than the one running: [Migrate] changes nothing.
	ErrSchemaTooNew = errors.New("jobs: job table migrated by a newer version")
	// ErrNoQueueStore reports a queue operation (pause, resume, list) on
	// a client without a queue store.
	ErrNoQueueStore = errors.New("jobs: no queue store configured")
)

// invalid returns an error wrapping dao.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", dao.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// cancelError is the error [Cancel] returns.
type cancelError struct{ err error }

func (e *cancelError) Error() string {
	if e.err == nil {
		return "jobs: cancelled by its work function"
	}
	return "jobs: cancelled by its work function: " + e.err.Error()
}

func (e *cancelError) Unwrap() error { return e.err }

// Cancel returns an error that a work function returns to end its job
// cancelled, without further attempts, with err (which may be nil)
// recorded as the attempt's error.
func Cancel(err error) error { return &cancelError{err: err} }

// snoozeError is the error [Snooze] returns.
type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("jobs: snoozed for %v", e.d) }

// Snooze returns an error that a work function returns to run its job
// again after d (0 or less: as soon as a worker is free) without spending
// an attempt: the attempt count goes back to what it was before this
// attempt, and no error is recorded. The job is scheduled until then
// (stored available with its future time when d is at most
// [ScheduleAhead]).
func Snooze(d time.Duration) error { return &snoozeError{d: d} }

// panicError is the error of a work function that panicked.
type panicError struct {
	value any
	trace string
}

func (e *panicError) Error() string { return fmt.Sprintf("jobs: work panicked: %v", e.value) }
