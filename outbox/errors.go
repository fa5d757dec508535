package outbox

import (
	"errors"
	"fmt"
)

// ErrLeaseLost reports that a mark or a release was refused for some rows
// because the calling worker no longer holds them: their status is not
// processing or they are locked by another worker (the lease expired and
// another worker claimed them, or they were never claimed by this worker).
// Those rows are left exactly as they were. The error is a [*FenceError];
// test with errors.Is(err, ErrLeaseLost) and read the ids with errors.As.
var ErrLeaseLost = errors.New("outbox: lease lost")

// FenceError lists the rows a fenced write did not change. It matches
// [ErrLeaseLost] with errors.Is.
type FenceError struct {
	// Op is the refused operation: "mark published", "mark failed" or
	// "release".
	Op string
	// Worker is the worker that asked.
	Worker string
	// IDs are the primary keys of the rows left unchanged.
	IDs []int64
}

// Error describes the refused rows.
func (e *FenceError) Error() string {
	return fmt.Sprintf("outbox: %s by %q: %d row(s) not held by this worker: %v", e.Op, e.Worker, len(e.IDs), e.IDs)
}

// Is reports whether target is [ErrLeaseLost].
func (e *FenceError) Is(target error) bool { return target == ErrLeaseLost }

// ErrNoStream marks a publish error that says no stream at the broker
// holds the message's subject (NATS JetStream: no stream answered the
// publish, and the server, asked which stream holds the subject, named
// none; a stream that exists but has no leader for a moment is not
// this error). It is not permanent, since the stream may be created, so the
// message is retried with backoff and abandoned only past its max retries;
// the relay logs it at ERROR once per topic with the fix. Publishers wrap
// it with the broker's own error.
var ErrNoStream = errors.New("outbox: no stream holds the subject")

// ErrPermanent marks a publish error that no retry can cure (a message the
// broker will never accept). A message failed with such an error is
// abandoned at once, its error kept. Wrap errors with [Permanent].
var ErrPermanent = errors.New("outbox: permanent failure")

type permanentError struct{ err error }

func (e permanentError) Error() string   { return "permanent: " + e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{ErrPermanent, e.err} }

// Permanent wraps err so that errors.Is(result, ErrPermanent) holds and err
// stays reachable with errors.Is and errors.As. It returns nil for nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}
