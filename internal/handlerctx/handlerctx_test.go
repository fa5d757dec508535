package handlerctx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/internal/handlerctx"
)

var (
	errOwner   = errors.New("owner")
	errOwner2  = errors.New("owner again")
	errHandler = errors.New("handler")
)

// TestCancelOrder checks the causes of a Context after each order of the
// owner's and a handler's cancellations: context.Cause is the first
// cause either gave, OwnCause the owner's first, as with a handler's
// own context under the owner's.
func TestCancelOrder(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cancel          func(c *handlerctx.Context)
		cause, ownCause error
	}{
		{"none", func(*handlerctx.Context) {}, nil, nil},
		{"owner", func(c *handlerctx.Context) { c.CancelOwn(errOwner) }, errOwner, errOwner},
		{"handler", func(c *handlerctx.Context) { c.Cancel(errHandler) }, errHandler, nil},
		{"handler then owner", func(c *handlerctx.Context) { c.Cancel(errHandler); c.CancelOwn(errOwner) }, errHandler, errOwner},
		{"owner then handler", func(c *handlerctx.Context) { c.CancelOwn(errOwner); c.Cancel(errHandler) }, errOwner, errOwner},
		{"owner twice", func(c *handlerctx.Context) { c.CancelOwn(errOwner); c.CancelOwn(errOwner2) }, errOwner, errOwner},
		{"owner nil then owner", func(c *handlerctx.Context) { c.CancelOwn(nil); c.CancelOwn(errOwner) }, context.Canceled, errOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type key struct{}
			parent := context.WithValue(context.Background(), key{}, "v")
			c := handlerctx.New(parent)
			tc.cancel(c)
			var ctx context.Context = c
			if got := context.Cause(ctx); got != tc.cause {
				t.Errorf("context.Cause = %v, want %v", got, tc.cause)
			}
			if got := c.OwnCause(); got != tc.ownCause {
				t.Errorf("OwnCause = %v, want %v", got, tc.ownCause)
			}
			if (ctx.Err() != nil) != (tc.cause != nil) {
				t.Errorf("Err = %v with cause %v", ctx.Err(), tc.cause)
			}
			if ctx.Value(key{}) != "v" {
				t.Error("the parent's value is lost")
			}
			// A context under it ends with it, with its cause.
			child, stop := context.WithCancel(ctx)
			defer stop()
			if tc.cause != nil {
				<-child.Done()
				if got := context.Cause(child); got != tc.cause {
					t.Errorf("child's cause = %v, want %v", got, tc.cause)
				}
			} else if child.Err() != nil {
				t.Errorf("child ended: %v", child.Err())
			}
		})
	}
}

// TestParentEnds checks that a Context ends with its parent, with the
// parent's cause, and that OwnCause stays nil.
func TestParentEnds(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	c := handlerctx.New(parent)
	cancel(errOwner2)
	<-c.Done()
	if got := context.Cause(c); got != errOwner2 {
		t.Errorf("context.Cause = %v, want %v", got, errOwner2)
	}
	if got := c.OwnCause(); got != nil {
		t.Errorf("OwnCause = %v, want nil", got)
	}
}
