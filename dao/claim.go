package dao

import (
	"context"
	"errors"
	"fmt"
)

// Claim atomically selects up to req.Limit rows matching req.Where, applies
// req.Set to them and returns them in their post-claim state, in
// req.OrderBy order (primary key last). No two concurrent callers, in one
// process or many, ever receive the same row. A returned row is a
// committed claim; every other row is left as it was, so it stays
// claimable.
//
// With [StrategyFastPath] the backend's single operation claims the rows
// (its outcomes are documented by the backend package). With
// [StrategyPortable] the store reads up to req.Limit candidates, then
// claims each with a guarded update that re-asserts req.Where (UPDATE …
// WHERE pk = ? AND (<where>), or a write conditioned on the version read),
// keeps the rows the update affected, applies req.Set to them in memory and
// returns them in candidate order: 1 + N round trips. Its outcomes at the
// edges:
//
//   - Success: every candidate whose guarded update committed, nil.
//   - Lost race (another claimer changed a candidate after the read): that
//     row is skipped, or, on a backend that reports the race as an error
//     ([LostRaceConflict], [LostRaceBusy]), the rows claimed before it are
//     returned with that error.
//   - ctx done before the candidate read is sent: nil and an error
//     wrapping ctx.Err(); nothing is sent.
//   - ctx done after a statement was sent: that statement's outcome is
//     learned (the backend runs it detached from ctx's cancellation,
//     bounded by [Capabilities].ClaimTimeout), no further statement is
//     sent, and the rows whose guarded update committed are returned with
//     an error wrapping ctx.Err(). A claim whose last statement completes
//     before ctx is seen done returns nil.
//   - A guarded update fails (lock wait past the backend's limit, lost
//     connection, timeout): the rows claimed before it are returned with
//     the error, which also wraps ctx.Err() when ctx is done by then.
//
// Post-claim values of [Increment] fields are computed from the candidate
// read. Whenever ctx is done when Claim returns an error, the error
// satisfies errors.Is(err, ctx.Err()), so [IsRetryable] reports false.
//
// Invalid requests fail with [ErrInvalidArgument] before any I/O;
// req.Limit <= 0 then returns (nil, nil). A store bound to a transaction
// ([Table.WithTx], or a driver built on one) returns [ErrInTransaction] and
// does nothing.
func (t *Table[T]) Claim(ctx context.Context, req ClaimRequest) ([]T, error) {
	if t.err != nil {
		return nil, fmt.Errorf("claimstore: claim: %w", t.err)
	}
	if t.inTx {
		return nil, fmt.Errorf("claimstore: claim: %w", ErrInTransaction)
	}
	req, err := t.check.claim(req)
	if err != nil {
		return nil, fmt.Errorf("claimstore: claim: %w", err)
	}
	if req.Limit <= 0 {
		return nil, nil
	}
	req.Where = t.scope(req.Where)
	if req.Set, err = t.stampSet(req.Set, t.claimNow); err != nil {
		return nil, fmt.Errorf("claimstore: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claimstore: claim: nothing sent: %w", err)
	}
	if t.claimer != nil {
		rows, err := t.claimer.ClaimBatch(ctx, req)
		if err != nil {
			return rows, fmt.Errorf("claimstore: claim: %w", withCtx(ctx, err))
		}
		return rows, nil
	}
	return t.claimPortable(ctx, req)
}

// claimPortable is the guarded per-row claim of a checked request.
func (t *Table[T]) claimPortable(ctx context.Context, req ClaimRequest) ([]T, error) {
	m := t.drv.Model()
	cands, err := t.drv.ReadCandidates(ctx, Query{Where: req.Where, OrderBy: req.OrderBy, Limit: req.Limit})
	if err != nil {
		return nil, stopped(ctx, "read candidates", err)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	if tr := ContextClaimTrace(ctx); tr != nil && tr.CandidatesRead != nil {
		ids := make([]any, len(cands))
		for i := range cands {
			ids[i] = m.ID(&cands[i].Row)
		}
		tr.CandidatesRead(ctx, ids)
	}
	claimed := make([]T, 0, len(cands))
	for i := range cands {
		row := &cands[i].Row
		if err := ctx.Err(); err != nil {
			return claimed, fmt.Errorf("claimstore: claim: stopped before the guarded update of %v, %d of %d candidates claimed: %w",
				m.ID(row), len(claimed), len(cands), err)
		}
		ok, err := t.drv.ClaimRow(ctx, &cands[i], req.Where, req.Set)
		if err != nil {
			return claimed, stopped(ctx, fmt.Sprintf("guarded update of %v", m.ID(row)), err)
		}
		if !ok {
			continue
		}
		err = m.Apply(row, req.Set)
		claimed = append(claimed, *row)
		if err != nil {
			return claimed, fmt.Errorf("claimstore: claim: %w", err)
		}
	}
	return claimed, nil
}

// withCtx returns err, wrapping ctx's error too when ctx is done and err
// does not already wrap it.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// stopped wraps the error err of the claim step what, and ctx's error too
// when ctx is done and err does not already wrap it.
func stopped(ctx context.Context, what string, err error) error {
	return fmt.Errorf("claimstore: claim: %s: %w", what, withCtx(ctx, err))
}
