// Package retry runs a store operation again while it fails with an error
// a retry can cure (dao.IsRetryable: a busy database, a lost connection, a
// version conflict), with exponential backoff from
// github.com/cenkalti/backoff/v5, until it succeeds, fails otherwise or
// ctx ends.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/claimstore/claimstore/dao"
)

// The backoff between attempts: 20 ms doubling to 1 s, each wait spread
// by ±50 % so that workers that failed together do not retry together.
const (
	initialWait = 20 * time.Millisecond
	maxWait     = time.Second
)

// Retryable runs op until it returns nil or an error dao.IsRetryable does
// not accept (returned at once), until it has run tries times (0: no
// limit), or until ctx ends, and returns op's last result. When ctx ends
// first the error joins op's last error with ctx's cause, so errors.Is
// finds both. The waits between attempts start at 20 ms and double up to
// 1 s; see [RetryableUpTo] for a shorter longest wait.
func Retryable[T any](ctx context.Context, tries uint, op func() (T, error)) (T, error) {
	return RetryableUpTo(ctx, tries, maxWait, op)
}

// RetryableUpTo is [Retryable] with the longest wait between two attempts
// longest (at least the first wait, 20 ms), for a caller whose time to
// succeed is short, such as a leader's renewal within its lease: the
// waits start at 20 ms and double up to longest, each spread by ±50 %.
func RetryableUpTo[T any](ctx context.Context, tries uint, longest time.Duration, op func() (T, error)) (T, error) {
	return While(ctx, tries, longest, dao.IsRetryable, op)
}

// While is [RetryableUpTo] with the errors to retry chosen by retryable
// instead of dao.IsRetryable, for a caller that may retry only some of
// them (opening a SQLite file retries dao.ErrBusy, not a missing file).
func While[T any](ctx context.Context, tries uint, longest time.Duration, retryable func(error) bool, op func() (T, error)) (T, error) {
	var last error
	v, err := backoff.Retry(ctx, func() (T, error) {
		v, err := op()
		last = err
		if err != nil && !retryable(err) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{
		InitialInterval:     initialWait,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         max(longest, initialWait),
	}), backoff.WithMaxElapsedTime(0), backoff.WithMaxTries(tries))
	if err != nil && last != nil && !errors.Is(err, last) {
		err = errors.Join(last, err)
	}
	return v, err
}

// Do is [RetryableUpTo] for an op that returns only an error.
func Do(ctx context.Context, tries uint, longest time.Duration, op func() error) error {
	_, err := RetryableUpTo(ctx, tries, longest, func() (struct{}, error) { return struct{}{}, op() })
	return err
}
