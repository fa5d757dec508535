package dao

import (
	"context"
	"fmt"
)

// PortableOps is the pair of backend operations the portable default claim
// is made of. An adapter that is not on the fast path implements it and
// calls [PortableClaim].
type PortableOps[T any] interface {
	// ReadCandidates returns up to q.Limit rows matching q.Where, in
	// q.OrderBy order. q has been checked by [Model.CheckQuery].
	ReadCandidates(ctx context.Context, q Query) ([]T, error)

	// ClaimRow writes set to the row whose primary key is row's, only if the
	// row still matches where at the moment of the write (a guarded update:
	// UPDATE … SET … WHERE pk = ? AND <where>), and reports whether it did.
	// A row that another claimer took first is (false, nil) on backends
	// whose lost race is silent; backends with optimistic concurrency return
	// an error wrapping [ErrConflict].
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
// req.Limit <= 0 then returns (nil, nil). When a guarded update fails, the
// rows claimed before it are returned together with the error. Post-claim
// values of [Increment] fields are computed from the candidate read.
func PortableClaim[T any](ctx context.Context, m *Model[T], ops PortableOps[T], req ClaimRequest) ([]T, error) {
	req, err := m.CheckClaim(req)
	if err != nil {
		return nil, err
	}
	if req.Limit <= 0 {
		return nil, nil
	}
	cands, err := ops.ReadCandidates(ctx, Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		return nil, fmt.Errorf("claim: read candidates: %w", err)
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
		ok, err := ops.ClaimRow(ctx, row, req.Where, req.Set)
		if err != nil {
			return claimed, fmt.Errorf("claim: guarded update of %v: %w", m.ID(row), err)
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
