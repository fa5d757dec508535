package jobs

import (
	"errors"
	"fmt"
	"time"
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
	// ErrAlreadyRunning is the error [Client.Run] returns while another
	// Run of the same client has not returned.
	ErrAlreadyRunning = errors.New("jobs: client already running")
	// ErrUnknownKind is wrapped, with dao.ErrInvalidArgument, by the
	// error of an insert of a kind the client's Workers has no worker for
	// (see Config.SkipUnknownJobCheck). A client never claims a job of
	// such a kind: it waits for a client that knows it
	// ([Client.UnknownKinds] lists them).
	ErrUnknownKind = errors.New("jobs: no worker for the job's kind")
	// ErrSchemaTooNew reports a job table migrated by a newer version of
	// this package than the one running: [Migrate] changes nothing.
	ErrSchemaTooNew = errors.New("jobs: job table migrated by a newer version")
	// ErrNoQueueStore reports a queue operation (pause, resume, list) on
	// a client without a queue store.
	ErrNoQueueStore = errors.New("jobs: no queue store configured")
)

// CancelError is the error [Cancel] returns: a work function that
// returns it ends its job cancelled. Err is the error recorded as the
// attempt's (nil: none given).
type CancelError struct{ Err error }

// Error returns the error's text.
func (e *CancelError) Error() string {
	if e.Err == nil {
		return "jobs: cancelled by its work function"
	}
	return "jobs: cancelled by its work function: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *CancelError) Unwrap() error { return e.Err }

// Cancel returns an error that a work function returns to end its job
// cancelled, without further attempts, with err (which may be nil)
// recorded as the attempt's error. Test for it with errors.As and a
// [*CancelError].
func Cancel(err error) error { return &CancelError{Err: err} }

// SnoozeError is the error [Snooze] returns: a work function that
// returns it runs its job again after Duration without spending an
// attempt.
type SnoozeError struct{ Duration time.Duration }

// Error returns the error's text.
func (e *SnoozeError) Error() string { return fmt.Sprintf("jobs: snoozed for %v", e.Duration) }

// Snooze returns an error that a work function returns to run its job
// again after d (0 or less: as soon as a worker is free) without spending
// an attempt: the attempt count goes back to what it was before this
// attempt, and no error is recorded. The job is scheduled until then
// (available at once when d is 0 or less). Test for it with errors.As
// and a [*SnoozeError].
func Snooze(d time.Duration) error { return &SnoozeError{Duration: d} }

// PanicError is the error of a work function that panicked, as work
// middleware ([WorkMiddleware]) sees it: the panic's value and the
// goroutine's stack. The attempt fails with it.
type PanicError struct {
	Value any
	Trace string
}

// Error returns the error's text.
func (e *PanicError) Error() string { return fmt.Sprintf("jobs: work panicked: %v", e.Value) }
