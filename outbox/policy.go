package outbox

import (
	"fmt"
	"math"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// RetryPolicy decides when a failed message is tried again and when it is
// given up. The delay before retry number n+1 (after n earlier failures,
// n >= 0) is
//
//	d = min(BaseDelay × Multiplier^n, MaxDelay)
//
// reduced by a random fraction of at most Jitter: the delay used is drawn
// uniformly from [d × (1 − Jitter), d]. It never exceeds MaxDelay.
type RetryPolicy struct {
	// BaseDelay is the delay before the first retry; > 0.
	BaseDelay time.Duration
	// Multiplier grows the delay after every further failure; >= 1.
	Multiplier float64
	// MaxDelay caps the delay; >= BaseDelay.
	MaxDelay time.Duration
	// Jitter is the largest fraction of the delay removed at random, in
	// [0, 1]; 0 makes delays deterministic, 1 is "full jitter".
	Jitter float64
	// MaxRetries is the default [Message.MaxRetries] for messages added
	// with MaxRetries 0; >= 0.
	MaxRetries int
}

// DefaultRetryPolicy returns the policy a repository uses unless told
// otherwise: 1 s base delay doubling up to 5 min, 20 % jitter, 10 retries.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{BaseDelay: time.Second, Multiplier: 2, MaxDelay: 5 * time.Minute, Jitter: 0.2, MaxRetries: 10}
}

// Validate reports a setting out of range as an error wrapping
// [dao.ErrInvalidArgument].
func (p RetryPolicy) Validate() error {
	switch {
	case p.BaseDelay <= 0:
		return fmt.Errorf("%w: retry policy: base delay must be > 0, got %v", dao.ErrInvalidArgument, p.BaseDelay)
	case math.IsNaN(p.Multiplier) || p.Multiplier < 1:
		return fmt.Errorf("%w: retry policy: multiplier must be >= 1, got %v", dao.ErrInvalidArgument, p.Multiplier)
	case p.MaxDelay < p.BaseDelay:
		return fmt.Errorf("%w: retry policy: max delay %v is below base delay %v", dao.ErrInvalidArgument, p.MaxDelay, p.BaseDelay)
	case math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter > 1:
		return fmt.Errorf("%w: retry policy: jitter must be in [0, 1], got %v", dao.ErrInvalidArgument, p.Jitter)
	case p.MaxRetries < 0:
		return fmt.Errorf("%w: retry policy: max retries must be >= 0, got %d", dao.ErrInvalidArgument, p.MaxRetries)
	}
	return nil
}

// Backoff returns the delay before the retry that follows failure number
// retryCount+1 (retryCount earlier failures), before jitter: BaseDelay ×
// Multiplier^retryCount, capped at MaxDelay. A negative retryCount counts
// as 0.
func (p RetryPolicy) Backoff(retryCount int) time.Duration {
	if retryCount < 0 {
		retryCount = 0
	}
	d := float64(p.BaseDelay) * math.Pow(p.Multiplier, float64(retryCount))
	if math.IsInf(d, 0) || math.IsNaN(d) || d >= float64(p.MaxDelay) {
		return p.MaxDelay
	}
	return time.Duration(d)
}

// Delay returns [RetryPolicy.Backoff] with jitter applied: u is a uniform
// random number in [0, 1) and the result is Backoff × (1 − Jitter × u).
func (p RetryPolicy) Delay(retryCount int, u float64) time.Duration {
	d := p.Backoff(retryCount)
	return d - time.Duration(p.Jitter*u*float64(d))
}
