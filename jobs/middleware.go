package jobs

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/claimstore/claimstore/internal/argerr"
)

// Middleware is a value that wraps inserts, work, or both: it implements
// [InsertMiddleware], [WorkMiddleware], or both (a tracing or metrics
// package usually does both; see package jobsotel). [Config].Middleware
// takes them; [NewClient] refuses a value that implements neither.
type Middleware any

// InsertMiddleware wraps every insert of a [Client] (Insert, InsertTx,
// InsertMany, InsertManyTx, and the periodic jobs' inserts).
type InsertMiddleware interface {
	// InsertMany is called with the rows of one insert call, checked
	// and not yet inserted. It may change their Metadata and Tags (they
	// are checked again before the insert: a change that makes them
	// invalid fails the insert with dao.ErrInvalidArgument), and calls
	// next to insert them: next returns the results in the order of
	// rows. It returns next's results and error, or an error of its own
	// (nothing is inserted unless it called next).
	InsertMany(ctx context.Context, rows []*Row, next func(ctx context.Context) ([]InsertResult, error)) ([]InsertResult, error)
}

// WorkMiddleware wraps the work of every job a [Client] runs
// ([Config].Middleware), or of the jobs of one kind ([WithMiddleware]).
type WorkMiddleware interface {
	// Work is called with the job's row (its state running, Attempt
	// counting this attempt) and calls next to run the work function
	// (and the middleware inside this one). next's error is the work's:
	// nil, an error, a [*CancelError] or [*SnoozeError], or a
	// [*PanicError] for a work function that panicked. Work returns the
	// error that decides the job's outcome: usually next's, which it may
	// change. ctx is the work's context (see [Worker]).
	Work(ctx context.Context, job *Row, next func(ctx context.Context) error) error
}

// InsertMiddlewareFunc is a function that is an [InsertMiddleware].
type InsertMiddlewareFunc func(ctx context.Context, rows []*Row, next func(ctx context.Context) ([]InsertResult, error)) ([]InsertResult, error)

// InsertMany calls f.
func (f InsertMiddlewareFunc) InsertMany(ctx context.Context, rows []*Row, next func(ctx context.Context) ([]InsertResult, error)) ([]InsertResult, error) {
	return f(ctx, rows, next)
}

// WorkMiddlewareFunc is a function that is a [WorkMiddleware].
type WorkMiddlewareFunc func(ctx context.Context, job *Row, next func(ctx context.Context) error) error

// Work calls f.
func (f WorkMiddlewareFunc) Work(ctx context.Context, job *Row, next func(ctx context.Context) error) error {
	return f(ctx, job, next)
}

// WithMiddleware adds work middleware to one kind's worker ([AddWorker]):
// it runs inside the client's own work middleware, in the order given
// (the first is outermost).
func WithMiddleware(mw ...WorkMiddleware) WorkerOption {
	return func(k *kindWorker) { k.middleware = append(k.middleware, mw...) }
}

// ErrorHandler is told of every failed attempt of a job this client runs
// ([Config].ErrorHandler), before the client decides the job's outcome,
// and may change that outcome. Its methods run on the job's goroutine,
// after the work returned: they should return promptly. A method that
// panics is logged and ignored.
type ErrorHandler interface {
	// HandleError is called when the work returned an error other than
	// [Cancel] and [Snooze] (a timeout included: err wraps
	// [ErrTimeout]); job is the job's row as it ran.
	HandleError(ctx context.Context, job *Row, err error) *ErrorHandlerResult
	// HandlePanic is called when the work panicked, with the panic's
	// value and the goroutine's stack.
	HandlePanic(ctx context.Context, job *Row, value any, trace string) *ErrorHandlerResult
}

// ErrorHandlerResult is what an [ErrorHandler] decides; nil changes
// nothing (the job is retried after its backoff, or discarded after its
// last attempt).
type ErrorHandlerResult struct {
	// SetCancelled ends the job cancelled, without further attempts,
	// the attempt's error recorded.
	SetCancelled bool
}

// splitMiddleware sorts mw into insert and work middleware. Errors wrap
// dao.ErrInvalidArgument for a nil value or one that is neither.
func splitMiddleware(mw []Middleware) (ins []InsertMiddleware, work []WorkMiddleware, err error) {
	for i, m := range mw {
		im, isIns := m.(InsertMiddleware)
		wm, isWork := m.(WorkMiddleware)
		if !isIns && !isWork {
			return nil, nil, argerr.Errorf("middleware %d (%T) implements neither InsertMiddleware nor WorkMiddleware", i, m)
		}
		if isIns {
			ins = append(ins, im)
		}
		if isWork {
			work = append(work, wm)
		}
	}
	return ins, work, nil
}

// runWork runs the kind's work on row inside the client's work
// middleware (clientMW) and the kind's, turning a panic of the work into a
// [*PanicError] that the middleware sees, and a panic of a middleware
// into one too.
func runWork(ctx context.Context, clientMW []WorkMiddleware, kw *kindWorker, row *Row) (err error) {
	if len(clientMW) == 0 && len(kw.middleware) == 0 {
		return runRecovered(ctx, kw, row)
	}
	work := func(ctx context.Context) error { return runRecovered(ctx, kw, row) }
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Trace: string(debug.Stack())}
		}
	}()
	next := work
	for i := len(kw.middleware) - 1; i >= 0; i-- {
		next = wrapWork(kw.middleware[i], row, next)
	}
	for i := len(clientMW) - 1; i >= 0; i-- {
		next = wrapWork(clientMW[i], row, next)
	}
	return next(ctx)
}

// runRecovered runs kw's work on row, a panic returned as a *PanicError.
func runRecovered(ctx context.Context, kw *kindWorker, row *Row) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Trace: string(debug.Stack())}
		}
	}()
	return kw.run(ctx, row)
}

// wrapWork returns next wrapped in m.
func wrapWork(m WorkMiddleware, row *Row, next func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return m.Work(ctx, row, next) }
}

// insertChain runs insert (which inserts rows) inside the client's
// insert middleware; with middleware, rows are checked again before
// insert runs.
func (c *Client) insertChain(ctx context.Context, rows []*Row, insert func(ctx context.Context) ([]InsertResult, error)) ([]InsertResult, error) {
	if len(c.insertMW) == 0 {
		return insert(ctx)
	}
	next := func(ctx context.Context) ([]InsertResult, error) {
		for i, r := range rows {
			if err := checkMutable(r); err != nil {
				return nil, fmt.Errorf("jobs: insert: job %d after the insert middleware: %w", i, err)
			}
		}
		return insert(ctx)
	}
	for i := len(c.insertMW) - 1; i >= 0; i-- {
		m, inner := c.insertMW[i], next
		next = func(ctx context.Context) ([]InsertResult, error) { return m.InsertMany(ctx, rows, inner) }
	}
	return next(ctx)
}

// handleError asks the client's error handler about a failed attempt
// of row and reports whether it asked for the job to be cancelled.
func (c *Client) handleError(ctx context.Context, row *Row, err error) (cancel bool) {
	eh := c.cfg.ErrorHandler
	if eh == nil {
		return false
	}
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("error handler panicked; ignored", "id", row.ID, "kind", row.Kind, "panic", v)
			cancel = false
		}
	}()
	var res *ErrorHandlerResult
	if p := (*PanicError)(nil); errors.As(err, &p) {
		res = eh.HandlePanic(ctx, row, p.Value, p.Trace)
	} else {
		res = eh.HandleError(ctx, row, err)
	}
	return res != nil && res.SetCancelled
}
