package outboxenv_test

import (
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
)

// The streams of the demo and the benchmarks keep a message id at least
// as long as a relay with default settings may publish it again.
func TestDuplicateWindowCoversRetryHorizon(t *testing.T) {
	h := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), outbox.RelayConfig{})
	w := outboxenv.DuplicateWindow(outbox.RelayConfig{})
	t.Logf("retry horizon %v, duplicate window %v", h, w)
	if w < h || w%time.Minute != 0 || w-h >= time.Minute {
		t.Fatalf("DuplicateWindow = %v for a retry horizon of %v; want the horizon rounded up to a minute", w, h)
	}
}

// A relay with a publish window may publish a message again later than
// one without (a mark can wait behind the one before it): the stream's
// window follows the relay's settings.
func TestDuplicateWindowFollowsRelaySettings(t *testing.T) {
	cfg := outbox.RelayConfig{Window: 4, Lease: time.Minute, WriteTimeout: time.Minute}
	h := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), cfg)
	w := outboxenv.DuplicateWindow(cfg)
	t.Logf("retry horizon %v, duplicate window %v", h, w)
	if w < h || w-h >= time.Minute || w <= outboxenv.DuplicateWindow(outbox.RelayConfig{}) {
		t.Fatalf("DuplicateWindow = %v for a retry horizon of %v; want the horizon rounded up to a minute, above the default's", w, h)
	}
}
