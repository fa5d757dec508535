package outboxenv_test

import (
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/outboxenv"
	"github.com/claimstore/claimstore/outbox"
)

// The streams of the demo and the benchmarks keep a message id at least
// as long as a relay with default settings may publish it again.
func TestDuplicateWindowCoversRetryHorizon(t *testing.T) {
	h := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), outbox.RelayConfig{})
	w := outboxenv.DuplicateWindow()
	t.Logf("retry horizon %v, duplicate window %v", h, w)
	if w < h || w%time.Minute != 0 || w-h >= time.Minute {
		t.Fatalf("DuplicateWindow() = %v for a retry horizon of %v; want the horizon rounded up to a minute", w, h)
	}
}
