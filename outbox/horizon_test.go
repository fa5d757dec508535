package outbox_test

import (
	"testing"
	"time"

	"github.com/claimstore/claimstore/outbox"
)

// The horizon of the default policy and relay: backoffs 1+2+4+…+256 s and
// one capped at 300 s (811 s), plus 11 attempts of lease 30 s + mark
// timeout 10 s + idle poll 5 s (495 s).
func TestRetryHorizonDefaults(t *testing.T) {
	cfg := outbox.RelayConfig{Lease: outbox.DefaultLease, WriteTimeout: 10 * time.Second, MaxPollInterval: 5 * time.Second}
	got := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), cfg)
	if want := 811*time.Second + 11*45*time.Second; got != want {
		t.Fatalf("RetryHorizon(defaults) = %v, want %v", got, want)
	}
}

// Without retries the horizon is one attempt; each retry adds its backoff
// and one attempt.
func TestRetryHorizonGrowsPerRetry(t *testing.T) {
	cfg := outbox.RelayConfig{Lease: 10 * time.Second, WriteTimeout: 2 * time.Second, MaxPollInterval: time.Second}
	p := outbox.RetryPolicy{BaseDelay: time.Second, Multiplier: 3, MaxDelay: 5 * time.Second, MaxRetries: 0}
	if got := outbox.RetryHorizon(p, cfg); got != 13*time.Second {
		t.Fatalf("no retries: %v, want 13s", got)
	}
	p.MaxRetries = 3 // backoffs 1 s, 3 s, 5 s (capped)
	if got, want := outbox.RetryHorizon(p, cfg), 9*time.Second+4*13*time.Second; got != want {
		t.Fatalf("3 retries: %v, want %v", got, want)
	}
}

// Zero settings count as the relay's defaults.
func TestRetryHorizonZeroConfigIsDefaults(t *testing.T) {
	cfg := outbox.RelayConfig{Lease: outbox.DefaultLease, WriteTimeout: outbox.DefaultWriteTimeout, MaxPollInterval: outbox.DefaultMaxPollInterval}
	if got, want := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), outbox.RelayConfig{}), outbox.RetryHorizon(outbox.DefaultRetryPolicy(), cfg); got != want {
		t.Fatalf("RetryHorizon with a zero config = %v, with the defaults spelled out %v", got, want)
	}
}

// With a window of batches a mark may wait for the previous one: each
// attempt counts a second WriteTimeout.
func TestRetryHorizonWindow(t *testing.T) {
	cfg := outbox.RelayConfig{Lease: 10 * time.Second, WriteTimeout: 2 * time.Second, MaxPollInterval: time.Second, Window: 1}
	p := outbox.RetryPolicy{BaseDelay: time.Second, Multiplier: 3, MaxDelay: 5 * time.Second, MaxRetries: 3}
	if got, want := outbox.RetryHorizon(p, cfg), 9*time.Second+4*13*time.Second; got != want {
		t.Fatalf("window 1: %v, want %v", got, want)
	}
	cfg.Window = 4
	if got, want := outbox.RetryHorizon(p, cfg), 9*time.Second+4*15*time.Second; got != want {
		t.Fatalf("window 4: %v, want %v", got, want)
	}
}
