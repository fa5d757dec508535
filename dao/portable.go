package dao

import (
	"context"
	"errors"
	"fmt"
)

// PortableOps is the pair of backend operations the portable default claim
// is made of. An adapter that is not on the fast path implements it and
// calls [PortableClaim].
//
// [PortableClaim] checks ctx before it calls either method and calls
// neither once ctx is done. Once a method has sent its statement, it must
// learn that statement's outcome even when ctx ends meanwhile (for
// example by running it on a context detached from ctx's cancellation,
// bounded by a store timeout) and report it: a write is never abandoned.
type PortableOps[T any] interface {
	// ReadCandidates returns up to q.Limit rows matching q.Where, in
	// q.OrderBy order. q has been checked by [Model.CheckQuery].
	ReadCandidates(ctx context.Context, q Query) ([]T, error)

	// ClaimRow writes set to the row whose primary key is row's, only if the
	// row still matches where at the moment of the write (a guarded update:
	// UPDATE … SET … WHERE pk = ? AND (<where>)), and reports whether it
	// did. It returns true only for a write known to be committed. A row
	// that another claimer took first is (false, nil) on backends whose
	// lost race is silent; backends with optimistic concurrency return an
	// error wrapping [ErrConflict]. A write whose outcome could not be
	// learned is an error (and false), never true.
	ClaimRow(ctx context.Context, row *T, where Criteria, set Set) (bool, error)
}

// PortableClaim is the portable default find-and-claim, the correctness
// floor on every backend: it reads up to req.Limit candidates with req.Where
// and req.OrderBy, then claims each with a guarded update that re-asserts
// req.Where, keeps only the rows the update affected, applies req.Set to
// them in memory (via the model schema) and returns them in candidate order.
// It costs 1 + N round trips.
//
// Invalid requests fail with [ErrInvalidArgument] before any I/O;
// req.Limit <= 0 then returns (nil, nil). Post-claim values of [Increment]
// fields are computed from the candidate read. A returned row is a
// committed claim; every other row is left as it was, so it stays
// claimable. The outcomes at the edges:
//
//   - Success: every candidate whose guarded update committed, nil.
//   - Lost race (another claimer changed a candidate after the read): that
//     row is skipped, or, on a backend that reports the race as an error,
//     the rows claimed before it are returned with that error.
//   - ctx done before the candidate read is sent: nil and an error
//     wrapping ctx.Err(); nothing is sent.
//   - ctx done after a statement was sent: that statement's outcome is
//     learned (ops guarantee it), no further statement is sent, and the
//     rows whose guarded update committed are returned with an error
//     wrapping ctx.Err(). A claim whose last statement completes before
//     ctx is seen done returns nil.
//   - A guarded update fails (lock wait past the backend's limit, lost
//     connection, timeout): the rows claimed before it are returned with
//     the error, which also wraps ctx.Err() when ctx is done by then.
//
// Whenever ctx is done when PortableClaim returns an error, the error
// satisfies errors.Is(err, ctx.Err()), so [IsRetryable] reports false.
func PortableClaim[T any](ctx context.Context, m *Model[T], ops PortableOps[T], req ClaimRequest) ([]T, error) {
	req, err := m.CheckClaim(req)
	if err != nil {
		return nil, err
	}
	if req.Limit <= 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claim: nothing sent: %w", err)
	}
	cands, err := ops.ReadCandidates(ctx, Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		return nil, stopped(ctx, "read candidates", err)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	if tr := ContextClaimTrace(ctx); tr != nil && tr.CandidatesRead != nil {
		ids := make([]any, len(cands))
		for i := range cands {
			ids[i] = m.ID(&cands[i])
		}
		tr.CandidatesRead(ctx, ids)
	}
	claimed := make([]T, 0, len(cands))
	for i := range cands {
		row := &cands[i]
		if err := ctx.Err(); err != nil {
			return claimed, fmt.Errorf("claim: stopped before the guarded update of %v, %d of %d candidates claimed: %w",
				m.ID(row), len(claimed), len(cands), err)
		}
		ok, err := ops.ClaimRow(ctx, row, req.Where, req.Set)
		if err != nil {
			return claimed, stopped(ctx, fmt.Sprintf("guarded update of %v", m.ID(row)), err)
		}
		if !ok {
			continue
		}
		err = m.Apply(row, req.Set)
		claimed = append(claimed, *row)
		if err != nil {
			return claimed, err
		}
	}
	return claimed, nil
}

// stopped wraps the error err of the claim step what, and ctx's error too
// when ctx is done and err does not already wrap it.
func stopped(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("claim: %s: %w (%w)", what, err, cerr)
	}
	return fmt.Errorf("claim: %s: %w", what, err)
}
