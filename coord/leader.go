// Leader election.
//
// An [Elector] campaigns for the leadership of one election name over a
// [LeaseStore]: a lease table (claimstore_leaders by default) with one row
// per name holding the leader's id, its term, when the term began and
// when the lease expires. The row is acquired, renewed and taken over in
// one statement whose expiry test runs on the database's clock, so the
// candidates' clocks never decide who leads. The leader renews every
// RenewInterval (Lease/3 by default); a follower tries every PollInterval.
// The term grows by one at every change of leader (a takeover of an
// expired or released lease) and stays while the same leader renews, so
// it is a fencing token: [FencedUpdate], [FencedUpsert] and [Leader.Fence]
// make a write change nothing once a newer term has written the row. A
// term also travels on its own, as a [Fence] (an election name and a
// term), to fence the writes of another process.
//
// A leader gives up its leadership locally before its lease can have
// expired by the database's clock: at the start of the last successful
// renewal plus lease minus SafetyMargin, measured on the local monotonic
// clock. The lease was written at or after that start, so it expires at
// or after start + lease on the database's clock; the margin covers the rate
// difference between the two clocks. On shutdown the leader resigns: the
// row is released and a follower takes over at its next poll.
//
// docs/leader-election.md describes the table, the statement of each
// backend, the clock rules, how to choose a lease and how to fence writes.

package coord

import (
	"context"

	"github.com/claimstore/claimstore/dao/driver"
)

// LeaseStore keeps the leader leases an [Elector] campaigns over; the
// adapters provide it (sqlstore.NewLeases, memstore.NewLeases,
// esstore.NewLeases). See [driver.LeaseStore] for its contract.
type LeaseStore = driver.LeaseStore

// Lease is one lease row as a [LeaseStore] reports it.
type Lease = driver.Lease

// ErrNotLeader reports that a fenced write was refused before anything
// was sent because the caller's leadership has ended locally (its
// context is done or its lease may have expired). It matches [ErrFenced]
// (errors.Is), the one check for every refused fenced write.
var ErrNotLeader error = notLeader{}

// notLeader is the type of ErrNotLeader: its own message, and ErrFenced
// beneath it.
type notLeader struct{}

func (notLeader) Error() string { return "coord: not the leader" }
func (notLeader) Unwrap() error { return ErrFenced }

// Leader is one term of leadership won by an [Elector]. It is a value:
// it keeps describing that term after the leadership has ended, and
// [Leader.Active] says whether it still holds.
type Leader struct {
	name, id string
	term     int64
	ctx      context.Context // done when the leadership ends locally
}

// Name returns the election name.
func (l Leader) Name() string { return l.name }

// ID returns the id of the candidate that won the term.
func (l Leader) ID() string { return l.id }

// Term returns the term of this leadership: a number that grows by at
// least one at every change of leader of the election, usable as a
// fencing token.
func (l Leader) Term() int64 { return l.term }

// Context returns a context that is canceled when this leadership ends
// locally (lost, expired by the local safety margin, resigned or the
// elector stopped). A zero Leader's context is already canceled.
func (l Leader) Context() context.Context {
	if l.ctx == nil {
		return canceledCtx
	}
	return l.ctx
}

// Active reports whether the leadership still holds locally: its
// context is not done.
func (l Leader) Active() bool { return l.ctx != nil && l.ctx.Err() == nil }

var canceledCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Token returns l's election name and term as a [Fence]: a value that can
// travel (written into a job or a message) and fence a write made later,
// by any process, with [FencedUpdate] or [FencedUpsert]; its
// [Fence.Criteria] is the fence of a write of your own. Unlike l, the
// Fence does not know whether the leadership still holds locally.
func (l Leader) Token() Fence { return Fence{Name: l.name, Term: l.term} }

// fenceToken implements [Fencer]: it returns l.Token(), and
// [ErrNotLeader] (which matches [ErrFenced]) when the leadership has
// ended locally, so that a fenced write refuses at once, before anything
// is sent.
func (l Leader) fenceToken() (Fence, error) {
	if !l.Active() {
		return l.Token(), ErrNotLeader
	}
	return l.Token(), nil
}
