package dispatch

import (
	"net/http"
)

// Ready returns the readiness handler: it answers 200 "ready" while Run
// claims rows, and 503 "draining" (or "not running") from the moment the
// context of Run ends — before claiming stops — so a load balancer or
// Kubernetes stops routing to the process while it drains.
func (w *Worker[T]) Ready() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Header().Set("Cache-Control", "no-store")
		if w.IsReady() {
			rw.WriteHeader(http.StatusOK)
			_, _ = rw.Write([]byte("ready\n"))
			return
		}
		rw.WriteHeader(http.StatusServiceUnavailable)
		if w.running.Load() {
			_, _ = rw.Write([]byte("draining\n"))
		} else {
			_, _ = rw.Write([]byte("not running\n"))
		}
	})
}

// Live returns the liveness handler: it answers 200 "alive" for as long
// as the process serves it, draining included, so an orchestrator does
// not kill a worker that is finishing its in-flight rows.
func (w *Worker[T]) Live() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Header().Set("Cache-Control", "no-store")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte("alive\n"))
	})
}

// IsReady reports whether Run is running and its context has not ended
// (it reads the context itself, so it turns false the moment the context
// is cancelled); the readiness handler answers from it.
func (w *Worker[T]) IsReady() bool {
	ctx := w.runCtx.Load()
	return ctx != nil && (*ctx).Err() == nil
}
