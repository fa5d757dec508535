package outbox

import (
	"cmp"
	"time"
)

// RetryHorizon returns the longest time, in the absence of relay crashes,
// between the first and the last publish of one message by relays
// configured with cfg over a repository with retry policy p (messages
// added with MaxRetries 0, which take p.MaxRetries): the window a broker's
// de-duplication must cover for a retried message to be stored once.
//
// A message is published in at most R+1 attempts (R = p.MaxRetries). An
// attempt ends, at the latest, when its mark is written — no later than
// cfg.Lease after the claim plus cfg.WriteTimeout — or, when the mark is
// lost, when the lease ends; the next attempt waits the backoff before
// retry n, p.Backoff(n) (jitter only shortens it), and up to
// cfg.MaxPollInterval more until an idle relay polls. So
//
//	horizon = Σ_{n=0}^{R-1} p.Backoff(n) + (R+1) × (Lease + WriteTimeout + MaxPollInterval)
//
// With cfg.Window above 1 a batch's mark may first wait for the loop's
// previous mark, which takes up to WriteTimeout too: each attempt then
// counts Lease + 2 × WriteTimeout + MaxPollInterval.
//
// A relay that dies after publishing a batch and before marking it leaves
// the batch to be claimed again when the lease ends without counting a
// retry: each such crash adds one more (Lease + WriteTimeout +
// MaxPollInterval). Zero Lease, WriteTimeout and MaxPollInterval in cfg
// count as their defaults (DefaultLease, DefaultWriteTimeout,
// DefaultMaxPollInterval; a deprecated MarkTimeout counts when
// WriteTimeout is zero), so RetryHorizon(DefaultRetryPolicy(),
// RelayConfig{}) is the horizon of a relay with default settings; [Relay]'s
// Config method returns a relay's own settings. p is taken as valid.
func RetryHorizon(p RetryPolicy, cfg RelayConfig) time.Duration {
	var h time.Duration
	for n := range p.MaxRetries {
		h += p.Backoff(n)
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, cfg.MarkTimeout, DefaultWriteTimeout)
	if cfg.MaxPollInterval == 0 {
		cfg.MaxPollInterval = DefaultMaxPollInterval
	}
	marks := time.Duration(1)
	if cfg.Window > 1 {
		marks = 2
	}
	attempt := cfg.Lease + marks*cfg.WriteTimeout + cfg.MaxPollInterval
	return h + time.Duration(p.MaxRetries+1)*attempt
}
