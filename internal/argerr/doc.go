// Package argerr builds the errors that dispatch, jobs and outbox return
// for bad input: [Errorf] formats a message and wraps
// dao.ErrInvalidArgument, so that errors.Is finds the sentinel and the
// text reads "invalid argument: <message>" after the caller's own prefix.
package argerr
