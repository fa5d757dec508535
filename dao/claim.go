package dao

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/claimstore/claimstore/dao/driver"
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
// claims them with guarded updates that re-assert req.Where (UPDATE …
// WHERE pk = ? AND (<where>), or a write conditioned on the version read),
// one per candidate, until req.Limit rows are claimed; it keeps the rows
// the update affected, applies req.Set to them in memory and returns them
// in candidate order: 1 + N round trips. It tries the candidates in order;
// with spread on (the default, [WithClaimSpread]) a claim that loses a race
// continues at a random untried candidate, stops after two lost races in a
// row, and while the store's claims lose races it reads a wider window of
// candidates (8 × req.Limit, at most 1,000 beyond it), so that contending
// claimers do not all race for the same rows. Its outcomes at the edges:
//
//   - Success: every candidate whose guarded update committed, nil.
//   - Lost race (another claimer changed a candidate after the read): that
//     row is skipped, or, on a backend that reports the race as an error
//     ([LostRaceConflict], [LostRaceBusy]), the rows claimed before it are
//     returned with that error.
//   - Contention: fewer rows than eligible ones were left, never an error
//     on a [LostRaceSkip] backend; a row a claim passed over is untouched.
//   - ctx done before the candidate read is sent: nil and an error
//     wrapping ctx.Err(); nothing is sent.
//   - ctx done after a statement was sent: that statement's outcome is
//     learned (the backend runs it detached from ctx's cancellation,
//     bounded by [Capabilities].ClaimTimeout), no further statement is
//     sent, and the rows whose guarded update committed are returned with
//     an error wrapping ctx.Err(). A claim whose last statement completes
//     before ctx is seen done returns nil. A backend that can end a
//     statement waiting for a lock (the SQL backends: a cancel request,
//     KILL QUERY, SQLite's busy wait) ends it when ctx ends and reads its
//     answer, so the call returns shortly after ctx ends rather than at
//     the backend's lock-wait limit.
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
	req, ok, err := t.checkedClaim(req, t.claimNow)
	if err != nil {
		return nil, fmt.Errorf("claimstore: claim: %w", err)
	}
	if !ok {
		return nil, nil
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

// ClaimInTx claims as [Table.Claim] does, inside the transaction the
// store is bound to ([Table.WithTx]), for a caller that must claim
// together with other writes of its own, such as a claim that first takes
// a lock row serializing the claimers of a queue (package jobs' global
// limits). It runs the backend's single-operation claim in that
// transaction: the rows are locked and written when it returns, other
// claimers pass over them (SKIP LOCKED) or wait for the transaction, and
// they are claimed for everyone once the caller commits; a rollback
// leaves them as they were. It returns the rows in their post-claim state,
// in req.OrderBy order (primary key last).
//
// Backends: PostgreSQL runs the statement of its fast-path claim
// (SELECT … FOR UPDATE SKIP LOCKED in a common table expression and
// UPDATE … RETURNING; PostgreSQL manual, "The Locking Clause"); SQLite
// its one UPDATE … RETURNING, under the write lock the transaction holds
// ("The RETURNING Clause"); MySQL 8.0.1+ and MariaDB 10.6+ a locking
// read (FOR UPDATE SKIP LOCKED) and an UPDATE by primary key, which
// should run in a READ COMMITTED transaction so that the locking read
// takes no gap locks (MySQL manual, "Locking Reads"; MariaDB, "SKIP
// LOCKED"); SQL Server its UPDATE … OUTPUT with READPAST. The rows are
// claimed on the fast path whatever the store's claim strategy.
//
// Errors: [ErrInvalidArgument] for a store not bound to a transaction or
// an invalid request (nothing sent); an error wrapping
// [errors.ErrUnsupported] for a backend without a claim inside a
// transaction (memory, Elasticsearch, MySQL before 8.0.1, MariaDB before
// 10.6; nothing sent); the database's errors, mapped, after which the
// caller should roll back. req.Limit <= 0 returns (nil, nil).
func (t *Table[T]) ClaimInTx(ctx context.Context, req ClaimRequest) ([]T, error) {
	if t.err != nil {
		return nil, fmt.Errorf("claimstore: claim in tx: %w", t.err)
	}
	c, ok := t.drv.(driver.TxClaimer[T])
	if !ok {
		return nil, fmt.Errorf("claimstore: claim in tx: %w: %s claims in no caller transaction", errors.ErrUnsupported, t.caps.Backend)
	}
	if !t.inTx {
		return nil, fmt.Errorf("claimstore: claim in tx: %w: the store is not bound to a transaction (see WithTx)", ErrInvalidArgument)
	}
	req, ok, err := t.checkedClaim(req, false)
	if err != nil {
		return nil, fmt.Errorf("claimstore: claim in tx: %w", err)
	}
	if !ok {
		return nil, nil
	}
	rows, err := c.ClaimInTx(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("claimstore: claim in tx: %w", withCtx(ctx, err))
	}
	return rows, nil
}

// checkedClaim returns req checked against the model (an error wrapping
// ErrInvalidArgument), its Where scoped to the store's rows and its Set
// stamped with the automatic timestamps (by the database's clock with
// claimNow); ok is false, with no error, for a request that claims
// nothing (Limit <= 0).
func (t *Table[T]) checkedClaim(req ClaimRequest, claimNow bool) (ClaimRequest, bool, error) {
	req, err := t.check.claim(req)
	if err != nil || req.Limit <= 0 {
		return req, false, err
	}
	req.Where = t.scope(req.Where)
	if req.Set, err = t.stampSet(req.Set, claimNow); err != nil {
		return req, false, err
	}
	return req, true, nil
}

// claimPortable is the guarded per-row claim of a checked request.
func (t *Table[T]) claimPortable(ctx context.Context, req ClaimRequest) ([]T, error) {
	m := t.drv.Model()
	win := req.Limit
	contended := !t.strict && t.contended.Load()
	if contended {
		win = spreadLimit(req.Limit)
	}
	cands, err := t.drv.ReadCandidates(ctx, Query{Where: req.Where, OrderBy: req.OrderBy, Limit: win})
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
	w := newWalk(len(cands), !t.strict)
	claimed := make([]T, 0, len(cands))
	won := make([]int, 0, len(cands)) // candidate index of each claimed row
	// done sorts the claimed rows into candidate order, the claim's
	// OrderBy order.
	done := func() []T {
		if sort.IsSorted(byIndex[T]{won, claimed}) {
			return claimed
		}
		sort.Sort(byIndex[T]{won, claimed})
		return claimed
	}
	for i, ok := w.next(); ok && len(claimed) < req.Limit; i, ok = w.next() {
		row := &cands[i].Row
		if err := ctx.Err(); err != nil {
			return done(), fmt.Errorf("claimstore: claim: stopped before the guarded update of %v, %d of %d candidates claimed: %w",
				m.ID(row), len(claimed), len(cands), err)
		}
		ok, err := t.drv.ClaimRow(ctx, &cands[i], req.Where, req.Set)
		if err != nil {
			return done(), stopped(ctx, fmt.Sprintf("guarded update of %v", m.ID(row)), err)
		}
		w.outcome(ok)
		if !ok {
			if !t.strict && !contended {
				t.contended.Store(true)
				contended = true
			}
			continue
		}
		err = m.Apply(row, req.Set)
		claimed, won = append(claimed, *row), append(won, i)
		if err != nil {
			return done(), fmt.Errorf("claimstore: claim: %w", err)
		}
	}
	if contended && w.lostAny == 0 {
		t.contended.Store(false)
	}
	return done(), nil
}

// spreadLostInARow is how many lost races in a row end a portable claim
// that spreads ([WithClaimSpread]): it then returns the rows it won. Its
// candidates are largely taken by other claimers by then, and a fresh
// candidate read by the next claim costs less than trying the rest.
const spreadLostInARow = 2

// The candidate window of a contended spreading claim: spreadWindow times
// its limit, at most spreadWindowExtra candidates beyond the limit.
const (
	spreadWindow      = 8
	spreadWindowExtra = 1000
)

// spreadLimit returns the candidate window of a contended spreading claim
// of limit rows: spreadWindow times limit, at most spreadWindowExtra
// beyond it.
func spreadLimit(limit int) int {
	extra := spreadWindowExtra
	if limit <= extra/(spreadWindow-1) {
		extra = limit * (spreadWindow - 1)
	}
	if limit > math.MaxInt-extra {
		return limit
	}
	return limit + extra
}

// walk is the order in which a portable claim tries its n candidates:
// strictly 0, 1, …, n-1 without spread; with spread the same until a lost
// race, after which it continues at a random untried candidate, goes on
// in order after each win, and ends after spreadLostInARow lost races in
// a row.
type walk struct {
	spread  bool
	cur     int   // the candidate last tried; -1 before the first
	lost    int   // lost races in a row
	lostAny int   // lost races in all
	jump    bool  // the next candidate is a random untried one
	untried []int // candidate indexes not tried yet, in no order
	at      []int // at[i] is i's position in untried, -1 once tried
}

func newWalk(n int, spread bool) *walk {
	w := &walk{spread: spread, cur: -1, untried: make([]int, n), at: make([]int, n)}
	for i := range n {
		w.untried[i], w.at[i] = i, i
	}
	return w
}

// next returns the next candidate to try, or false when the claim should
// stop trying.
func (w *walk) next() (int, bool) {
	if len(w.untried) == 0 || (w.spread && w.lost >= spreadLostInARow) {
		return 0, false
	}
	i := w.cur + 1
	if w.jump || i >= len(w.at) || w.at[i] < 0 {
		if w.spread {
			i = w.untried[rand.IntN(len(w.untried))]
		} else {
			i = w.untried[0]
			for _, u := range w.untried {
				i = min(i, u)
			}
		}
	}
	w.take(i)
	w.cur = i
	return i, true
}

// take removes i from the untried candidates.
func (w *walk) take(i int) {
	p, last := w.at[i], w.untried[len(w.untried)-1]
	w.untried[p], w.at[last] = last, p
	w.untried = w.untried[:len(w.untried)-1]
	w.at[i] = -1
}

// outcome records whether the candidate last returned by next was won.
func (w *walk) outcome(won bool) {
	if won {
		w.lost, w.jump = 0, false
		return
	}
	w.lost++
	w.lostAny++
	w.jump = w.spread
}

// byIndex sorts claimed rows by their candidate index.
type byIndex[T any] struct {
	idx  []int
	rows []T
}

func (b byIndex[T]) Len() int           { return len(b.idx) }
func (b byIndex[T]) Less(i, j int) bool { return b.idx[i] < b.idx[j] }
func (b byIndex[T]) Swap(i, j int) {
	b.idx[i], b.idx[j] = b.idx[j], b.idx[i]
	b.rows[i], b.rows[j] = b.rows[j], b.rows[i]
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
