package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

func TestRetryableRetriesUntilSuccess(t *testing.T) {
	calls := 0
	v, err := Retryable(context.Background(), 0, func() (int, error) {
		calls++
		if calls < 3 {
			return 0, fmt.Errorf("write: %w", dao.ErrUnavailable)
		}
		return 7, nil
	})
	if v != 7 || err != nil || calls != 3 {
		t.Fatalf("Retryable = %d, %v after %d calls; want 7, nil after 3", v, err, calls)
	}
}

func TestRetryableStopsAtOtherErrors(t *testing.T) {
	calls := 0
	_, err := Retryable(context.Background(), 0, func() (int, error) {
		calls++
		return 0, fmt.Errorf("write: %w", dao.ErrInvalidArgument)
	})
	if !errors.Is(err, dao.ErrInvalidArgument) || calls != 1 {
		t.Fatalf("Retryable = %v after %d calls; want ErrInvalidArgument after 1", err, calls)
	}
}

func TestRetryableStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	calls := 0
	_, err := Retryable(ctx, 0, func() (int, error) {
		calls++
		return 0, dao.ErrBusy
	})
	if !errors.Is(err, dao.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) || calls < 2 {
		t.Fatalf("Retryable = %v after %d calls; want ErrBusy joined with the deadline, after several calls", err, calls)
	}
}

func TestRetryableStopsAfterTries(t *testing.T) {
	calls := 0
	_, err := Retryable(context.Background(), 3, func() (int, error) {
		calls++
		return 0, dao.ErrConflict
	})
	if !errors.Is(err, dao.ErrConflict) || calls != 3 {
		t.Fatalf("Retryable = %v after %d calls; want ErrConflict after 3", err, calls)
	}
}

func TestRetryableUpToBoundsTheWait(t *testing.T) {
	calls := 0
	began := time.Now()
	_, err := RetryableUpTo(context.Background(), 8, 30*time.Millisecond, func() (int, error) {
		calls++
		return 0, dao.ErrUnavailable
	})
	// 7 waits of at most 30 ms × 1.5; with Retryable's 1 s cap they
	// would add up to about 2.5 s.
	if took := time.Since(began); !errors.Is(err, dao.ErrUnavailable) || calls != 8 || took > time.Second {
		t.Fatalf("RetryableUpTo = %v after %d calls in %v; want ErrUnavailable after 8 calls within 1 s", err, calls, took)
	}
}
