package outbox

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// Failure is one failed publish attempt for [Repository.MarkFailed].
type Failure struct {
	// ID is the message's primary key.
	ID int64
	// RetryCount and MaxRetries are the message's values as claimed. The
	// next state is computed from them and the write is guarded on them,
	// so a wrong value changes nothing (the id is reported as not
	// applied).
	RetryCount int
	MaxRetries int
	// Err is the publish error; its text is kept in LastError (truncated
	// to [MaxErrorLen] bytes). An error wrapping [ErrPermanent] abandons
	// the message at once.
	Err error
}

// Failed returns the [Failure] of the claimed message m with err.
func Failed(m *Message, err error) Failure {
	return Failure{ID: m.ID, RetryCount: m.RetryCount, MaxRetries: m.MaxRetries, Err: err}
}

// FailResult says what [Repository.MarkFailed] did with each message.
type FailResult struct {
	// Retrying are the messages now failed, to be retried after their
	// NextRetryAt.
	Retrying []int64
	// Abandoned are the messages that ran out of retries (or failed
	// permanently) and are now abandoned with their last error kept.
	Abandoned []int64
	// NotApplied are the messages the fence refused (see
	// [Repository.MarkPublished]); they are unchanged.
	NotApplied []int64
}

// failGroup is a set of failures that share their next state, so one
// UPDATE writes them all.
type failGroup struct {
	retryCount, maxRetries int
	abandon                bool
	errText                string
}

// errorText returns the text kept in LastError for err.
func errorText(err error) string {
	s := "unknown error"
	if err != nil {
		s = err.Error()
	}
	if len(s) <= MaxErrorLen {
		return s
	}
	s = s[:MaxErrorLen]
	for !utf8.ValidString(s) { // do not cut a rune in two
		s = s[:len(s)-1]
	}
	return s
}

// MarkFailed records failed publish attempts of messages claimed by
// workerID. Each message's RetryCount grows by one; if it then exceeds
// MaxRetries, or the error wraps [ErrPermanent], the message is abandoned,
// else it is failed with NextRetryAt = now + the retry policy's delay for
// its retry count. LastError keeps the error text either way, and the lease
// is cleared.
//
// The writes stay batched: messages are grouped by their next state —
// (retry count, max retries, abandon or retry, error text) — and each group
// is one fenced, guarded UPDATE … WHERE id IN (…). The jitter is drawn once
// per group, so messages that failed together in one batch are retried
// together (they are claimed together anyway), while separate batches and
// separate workers draw separate delays and spread out. In the common case —
// a broker outage failing a whole batch with one error — that is one UPDATE
// per distinct retry count in the batch.
//
// It is fenced like [Repository.MarkPublished]: refused ids are listed in
// the result's NotApplied and reported with a [*FenceError]
// (errors.Is(err, [ErrLeaseLost])). Errors: [dao.ErrInvalidArgument] for an
// empty workerID or a repeated id; store errors wrapped, with the result so
// far (among them that of a failed first read of the database's clock,
// before any write).
func (r *Repository) MarkFailed(ctx context.Context, workerID string, failures ...Failure) (FailResult, error) {
	var res FailResult
	if err := checkWorker(workerID); err != nil {
		return res, fmt.Errorf("outbox: mark failed: %w", err)
	}
	if len(failures) == 0 {
		return res, nil
	}
	groups := map[failGroup][]int64{}
	var order []failGroup
	seen := make(map[int64]bool, len(failures))
	for _, f := range failures {
		if seen[f.ID] {
			return res, fmt.Errorf("outbox: mark failed: %w", argerr.Errorf("id %d given twice", f.ID))
		}
		seen[f.ID] = true
		g := failGroup{
			retryCount: f.RetryCount,
			maxRetries: f.MaxRetries,
			abandon:    f.RetryCount+1 > f.MaxRetries || errors.Is(f.Err, ErrPermanent),
			errText:    errorText(f.Err),
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], f.ID)
	}
	now, err := r.time(ctx)
	if err != nil {
		return res, fmt.Errorf("outbox: mark failed: %w", err)
	}
	for _, g := range order {
		ids := groups[g]
		set := dao.Set{
			ColRetryCount:      g.retryCount + 1,
			ColLastError:       g.errText,
			ColLockedUntil:     nil,
			ColLastProcessedAt: now,
		}
		want := StatusFailed
		if g.abandon {
			want = StatusAbandoned
			set[ColNextRetryAt] = nil
		} else {
			set[ColNextRetryAt] = now.Add(r.policy.Delay(g.retryCount, r.random()))
		}
		set[ColStatus] = string(want)
		guard := dao.And(dao.Eq(ColRetryCount, g.retryCount), dao.Eq(ColMaxRetries, g.maxRetries))
		refused, err := r.fencedUpdate(ctx, workerID, ids, guard, set, func(m *Message) bool {
			return m.Status == want && m.LockedBy == workerID && m.RetryCount == g.retryCount+1
		})
		res.NotApplied = append(res.NotApplied, refused...)
		if err != nil {
			return res, fmt.Errorf("outbox: mark failed: %w", err)
		}
		done := without(ids, refused)
		if g.abandon {
			res.Abandoned = append(res.Abandoned, done...)
		} else {
			res.Retrying = append(res.Retrying, done...)
		}
	}
	if len(res.NotApplied) > 0 {
		return res, &FenceError{Op: "mark failed", Worker: workerID, IDs: res.NotApplied}
	}
	return res, nil
}

// without returns ids minus drop, keeping order.
func without(ids, drop []int64) []int64 {
	if len(drop) == 0 {
		return ids
	}
	d := make(map[int64]bool, len(drop))
	for _, id := range drop {
		d[id] = true
	}
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !d[id] {
			out = append(out, id)
		}
	}
	return out
}
