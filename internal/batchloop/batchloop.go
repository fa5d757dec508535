package batchloop

import (
	"context"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/retry"
)

// ClaimTimeout is the deadline of one claim of the relay and of the
// subscriber. The claim runs to its end (or this deadline) even when the
// loop is asked to stop, so that what it claimed is known and can be
// released. The dispatch worker's claims have a quarter of its lease.
const ClaimTimeout = 30 * time.Second

// Next says when a [Loop] claims again after a turn.
type Next int

const (
	// Again claims at once: the batch was full, more may be waiting.
	Again Next = iota
	// Short waits the poll interval: the batch was smaller than asked.
	Short
	// Idle waits the idle backoff: nothing was claimed, or the claim failed.
	Idle
)

// Loop is one batch loop. Run calls Ready, then Claim, then Wait, until
// ctx ends, one of them says stop, or Claim fails with an error wrapping
// [dao.ErrInvalidArgument] (a request the store refuses, which no retry
// cures).
type Loop struct {
	// Log receives the claim failures (see [Failures]).
	Log *slog.Logger
	// Ready, optional, waits until there is room for a claim; false ends
	// the loop.
	Ready func(ctx context.Context) bool
	// Claim claims one batch and hands it out (its outcomes may be
	// written later, in the background); it says when to claim again,
	// and returns the claim's error.
	Claim func(ctx context.Context) (Next, error)
	// Wait waits as next says before the next turn; false ends the loop.
	Wait func(ctx context.Context, next Next) bool
}

// Run runs the loop until ctx ends (nil) or a claim fails with an error
// wrapping [dao.ErrInvalidArgument] (that error). Other claim errors are
// logged once per episode of consecutive failures, unless ctx has ended.
func (l *Loop) Run(ctx context.Context) error {
	f := Failures{Log: l.Log, Msg: "claim failed"}
	defer f.Stop()
	for ctx.Err() == nil {
		if l.Ready != nil && !l.Ready(ctx) {
			return nil
		}
		next, err := l.Claim(ctx)
		switch {
		case err == nil:
			f.OK()
		case errors.Is(err, dao.ErrInvalidArgument):
			return err
		case ctx.Err() == nil:
			f.Fail(err)
		}
		if !l.Wait(ctx, next) {
			return nil
		}
	}
	return nil
}

// Failures logs an episode of consecutive failures of one operation once:
// the first failure at WARN (Msg, its error and whether dao.IsRetryable
// accepts it), each further one at DEBUG, and the end of the episode
// (the next success, or Stop) at WARN with the number of failures and how
// long the episode lasted. The zero Failures with Log and Msg set is
// ready; it is not safe for concurrent use.
type Failures struct {
	Log *slog.Logger
	Msg string

	n     int
	first time.Time
	last  error
}

// Fail records a failure with err.
func (f *Failures) Fail(err error) {
	f.n++
	f.last = err
	if f.n == 1 {
		f.first = time.Now()
		f.Log.Warn(f.Msg, "err", err, "retryable", dao.IsRetryable(err))
		return
	}
	f.Log.Debug(f.Msg, "err", err, "retryable", dao.IsRetryable(err), "failures", f.n)
}

// OK records a success: it ends the episode under way, if any.
func (f *Failures) OK() { f.end("succeeded") }

// Stop ends the episode under way, if any, as the loop stops.
func (f *Failures) Stop() { f.end("stopped") }

// end logs the end of the episode under way: "<Msg>: episode ended" with
// the number of failures, how long it lasted, the last error and how it
// ended (the operation succeeded, or the loop stopped); at WARN after
// several failures, at INFO after one (whose WARN said it all).
func (f *Failures) end(how string) {
	if f.n == 0 {
		return
	}
	level := slog.LevelInfo
	if f.n > 1 {
		level = slog.LevelWarn
	}
	f.Log.Log(context.Background(), level, f.Msg+": episode ended", "failures", f.n,
		"for", time.Since(f.first).Round(time.Millisecond), "last_err", f.last, "ended", how)
	f.n, f.last = 0, nil
}

// Backoff paces a loop by its poll interval: Again claims at once, Short
// waits PollInterval, Idle waits PollInterval after the first idle turn and twice the
// previous wait after each further one, up to Max. Each wait is shortened
// by up to Jitter of itself at random (0.2: up to 20 %), so that loops
// that started together do not poll in step.
type Backoff struct {
	PollInterval, Max time.Duration
	Jitter            float64

	idle time.Duration
}

// Wait waits as next says, or until ctx ends, and reports whether ctx is
// still live.
func (b *Backoff) Wait(ctx context.Context, next Next) bool {
	switch next {
	case Again:
		b.idle = 0
		return ctx.Err() == nil
	case Short:
		b.idle = 0
		return b.sleep(ctx, b.PollInterval)
	default:
		if b.idle == 0 {
			b.idle = b.PollInterval
		} else {
			b.idle = min(2*b.idle, b.Max)
		}
		return b.sleep(ctx, b.idle)
	}
}

func (b *Backoff) sleep(ctx context.Context, d time.Duration) bool {
	if b.Jitter > 0 {
		d -= time.Duration(mrand.Float64() * b.Jitter * float64(d))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ClaimContext returns the context of one claim: ctx's values, not its
// cancellation (a claim runs to its end so that what it claimed is owned
// and can be released), and a deadline d from now.
func ClaimContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// Write runs one fenced write that ends a batch (a mark, a release, an
// outcome): with ctx's values, not its cancellation (it runs while the
// loop stops), within timeout, retried while it fails with an error
// internal/retry retries (a busy database, a lost connection), since a
// row left unmarked is handed out again after its lease. It returns op's
// last result.
func Write[V any](ctx context.Context, timeout time.Duration, op func(ctx context.Context) (V, error)) (V, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return retry.Retryable(wctx, 0, func() (V, error) { return op(wctx) })
}

// Outcome is what the handling of one batch came to: the ids to mark done
// (published, acked), the failures to record through the retry policy,
// and the ids to release unhandled. Size is the batch's size.
type Outcome[F any] struct {
	Size     int
	Done     []int64
	Failed   []F
	Released []int64
}

// LogMark logs the error of a mark (op names it: "mark published",
// "ack", …) of n rows, of which refused were refused by the fence: a
// lease lost (errors.Is(err, lost)) at the level lostAt (another worker
// holds the rows now), another error at failAt (the rows are claimed
// again after their lease). It reports whether err is an error other than
// a lost lease.
func LogMark(log *slog.Logger, lostAt, failAt slog.Level, lost error, op string, n, refused int, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, lost):
		log.Log(context.Background(), lostAt, op+": lease lost; another worker holds the rows", "rows", n, "refused", refused, "err", err)
		return false
	default:
		log.Log(context.Background(), failAt, op+" failed; the rows are claimed again after their lease", "rows", n, "err", err)
		return true
	}
}

// StartWindow is how long after a claim was sent its rows may still be
// started: the lease less two ticks. A row started later could not have
// its first renewal sent (at the next tick) and written (within another
// tick) before its lease ends; such a claim hands out nothing.
func StartWindow(lease, tick time.Duration) time.Duration {
	return lease - 2*tick
}
