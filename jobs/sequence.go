package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// MaxSequenceKeyLen is the longest sequence key, in bytes.
const MaxSequenceKeyLen = 191

// SequenceOpts put a job in a sequence: the jobs inserted with the same
// Key run one at a time, in insertion order (the order of their ids, as
// their inserts committed), whatever their kinds and queues. A job of a
// sequence is inserted pending ([StatePending]) and made available when
// the sequence's job before it is final; a job that fails holds its
// sequence through its retries until it completes, or is cancelled or
// discarded. A cancelled or discarded job keeps holding its sequence
// (the jobs after it wait, pending, and the retention sweep keeps it)
// unless ContinueOnCancelled or ContinueOnDiscarded says to go on; a
// sequence held so goes on once its job is retried ([Client.Retry]) and
// completes, or is deleted ([Client.Delete]).
//
// The database enforces "one at a time": a job holds its sequence through
// its SequenceHead column, under a unique index, from its promotion until
// it releases it. docs/jobs.md, "Sequences", has the states and the
// promotion.
type SequenceOpts struct {
	// Key names the sequence: 1 to [MaxSequenceKeyLen] bytes of UTF-8
	// without NUL, e.g. "customer:42". Empty: no sequence.
	Key string
	// ContinueOnCancelled makes the sequence go on after this job ends
	// cancelled; by default the jobs after it wait.
	ContinueOnCancelled bool
	// ContinueOnDiscarded makes the sequence go on after this job is
	// discarded (its last attempt failed); by default the jobs after it
	// wait.
	ContinueOnDiscarded bool
}

// isZero reports whether no option is set.
func (s SequenceOpts) isZero() bool {
	return s == SequenceOpts{}
}

// apply puts r in the sequence s names, pending, or leaves r as it is
// when s is zero. Errors wrap dao.ErrInvalidArgument.
func (s SequenceOpts) apply(r *Row) error {
	if s.isZero() {
		return nil
	}
	if s.Key == "" || len(s.Key) > MaxSequenceKeyLen || !utf8.ValidString(s.Key) || strings.IndexByte(s.Key, 0) >= 0 {
		return argerr.Errorf("sequence key %q: use 1-%d bytes of UTF-8 without NUL", s.Key, MaxSequenceKeyLen)
	}
	key := s.Key
	r.SequenceKey = &key
	r.State = StatePending
	r.SequenceRelease = StateCompleted.bit()
	if s.ContinueOnCancelled {
		r.SequenceRelease |= StateCancelled.bit()
	}
	if s.ContinueOnDiscarded {
		r.SequenceRelease |= StateDiscarded.bit()
	}
	return nil
}

// keepSequenceIn clears the sequence head in set, the outcome that moves
// r to state, when r holds its sequence and state releases it.
func keepSequenceIn(r *Row, state State, set dao.Set) {
	if r.SequenceHead != nil && state.Final() && r.SequenceRelease&state.bit() != 0 {
		set[ColSequenceHead] = nil
	}
}

// promoteSequence makes the first pending job of sequence key (lowest
// id) available, or scheduled when its time is still ahead, unless a job
// holds the sequence: the write sets the job's sequence head, which the
// unique index refuses while another job holds it, and is guarded by the
// job's pending state, so that concurrent promotions make one job the
// holder. It returns the job it promoted, as written, or nil. Errors:
// the store's, mapped.
func (c *Client) promoteSequence(ctx context.Context, key string) (*Row, error) {
	held, err := c.store.Find(ctx, dao.Query{Where: dao.Eq(ColSequenceHead, key), Limit: 1})
	if err != nil || len(held) > 0 {
		return nil, err
	}
	next, err := c.store.Find(ctx, dao.Query{
		Where:   dao.And(dao.Eq(ColSequenceKey, key), dao.Eq(ColState, string(StatePending))),
		OrderBy: []dao.Order{dao.Asc(ColID)},
		Limit:   1,
	})
	if err != nil || len(next) == 0 {
		return nil, err
	}
	r := &next[0]
	if err := c.promote(ctx, r, dao.Set{ColState: string(StateAvailable), ColSequenceHead: key}); err != nil {
		if errors.Is(err, dao.ErrDuplicate) || errors.Is(err, dao.ErrConflict) {
			return nil, nil // another promotion won
		}
		return nil, err
	}
	return r, nil
}

// promote writes set, a promotion of r out of pending, guarded by r's
// pending state, and applies it to r: the state is scheduled instead of
// available when r's time is still ahead. A queue of this process that
// got an available job is woken. It returns an error wrapping
// dao.ErrConflict when r was no longer pending. Errors: the store's,
// mapped.
func (c *Client) promote(ctx context.Context, r *Row, set dao.Set) error {
	now, err := c.now(ctx)
	if err != nil {
		return err
	}
	if r.ScheduledAt.After(now) {
		set[ColState] = string(StateScheduled)
	}
	n, err := c.retryConflict(ctx, func() (int64, error) {
		return c.store.Update(ctx, dao.And(dao.Eq(ColID, r.ID), dao.Eq(ColState, string(StatePending))), set)
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("job %d is no longer pending: %w", r.ID, dao.ErrConflict)
	}
	r.State = State(set[ColState].(string))
	if k, ok := set[ColSequenceHead].(string); ok {
		r.SequenceHead = &k
	}
	if m, ok := set[ColMetadata].(string); ok {
		r.Metadata = m
	}
	if in, ok := set[ColWorkflowInputs].(string); ok {
		r.WorkflowInputs = &in
	}
	if r.State == StateAvailable {
		c.wake(r.Queue)
		c.wakeLocal(map[string]bool{r.Queue: true})
	}
	return nil
}

// promoteInserted promotes the sequences of the jobs just inserted (out)
// outside a transaction, so that a job whose sequence is free runs at
// once, and returns such a job as promoted; a failure is logged, and the
// maintenance promotes at its next tick.
func (c *Client) promoteInserted(ctx context.Context, out []InsertResult) {
	seen := map[string]bool{}
	promoted := map[int64]*Row{}
	for _, res := range out {
		j := res.Job
		if j == nil || j.SequenceKey == nil || j.State != StatePending || seen[*j.SequenceKey] {
			continue
		}
		seen[*j.SequenceKey] = true
		r, err := c.promoteSequence(ctx, *j.SequenceKey)
		if err != nil {
			c.log.Warn("promoting a sequence after an insert failed; the maintenance will", "sequence", *j.SequenceKey, "err", err)
			break
		}
		if r != nil {
			promoted[r.ID] = r
		}
	}
	for _, res := range out {
		if j := res.Job; j != nil && promoted[j.ID] != nil {
			j.State, j.SequenceHead = promoted[j.ID].State, promoted[j.ID].SequenceHead
		}
	}
}
