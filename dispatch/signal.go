package dispatch

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// ShutdownContext returns a context that ends on SIGTERM or interrupt
// (SIGINT), and its stop function (signal.NotifyContext): pass it to
// [Worker.Run] so that a rolling deploy's SIGTERM drains the worker. A
// second signal after stop is called kills the process as usual.
func ShutdownContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
