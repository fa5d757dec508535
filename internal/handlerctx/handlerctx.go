// Package handlerctx is the context of one handler call of a dispatch
// worker: a context of context.WithCancelCause that the worker cancels
// (a lost lease, a drain) and that a handler of the same module (package
// jobs) may cancel too (a job's cancel request), keeping apart the first
// cause the worker gave. A handler so needs no cancellable context of its
// own under it, whose creation, linked to this one, costs more than the
// job it runs when the job does nothing.
package handlerctx

import (
	"context"
	"sync/atomic"
)

// Context is the context of one handler call. It is a context.Context
// (the embedded one: Done, Err, Deadline, Value and so context.Cause are
// those of a context.WithCancelCause of its parent); the worker ends it
// with CancelOwn, a handler with Cancel.
type Context struct {
	context.Context
	cancel context.CancelCauseFunc
	own    atomic.Pointer[error] // the first non-nil cause of CancelOwn
}

// New returns a Context under parent.
func New(parent context.Context) *Context {
	ctx, cancel := context.WithCancelCause(parent)
	return &Context{Context: ctx, cancel: cancel}
}

// CancelOwn cancels c with cause, as the context's owner (the worker):
// the first non-nil cause it is given is OwnCause's, whether or not c was
// cancelled before (then context.Cause keeps the earlier cause). A nil
// cause cancels with context.Canceled and is not recorded.
func (c *Context) CancelOwn(cause error) {
	if cause != nil {
		c.own.CompareAndSwap(nil, &cause)
	}
	c.cancel(cause)
}

// Cancel cancels c with cause, as a handler does: context.Cause(c) is
// cause unless c was cancelled before; OwnCause does not change.
func (c *Context) Cancel(cause error) { c.cancel(cause) }

// OwnCause returns the first non-nil cause CancelOwn was given, nil when
// none: what context.Cause would return for the owner's own context were
// the handler's cancellations made on a context under it.
func (c *Context) OwnCause() error {
	if p := c.own.Load(); p != nil {
		return *p
	}
	return nil
}
