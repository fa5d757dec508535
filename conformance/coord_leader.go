package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
)

// Timing of the leader checks: short enough to keep the section fast,
// long enough that a loaded test machine does not lose leases by
// scheduling delays alone. Wall-clock bounds are generous multiples of
// these; the measured times are logged.
const (
	leaderTTL    = 1500 * time.Millisecond
	leaderRenew  = leaderTTL / 3
	leaderPoll   = 150 * time.Millisecond
	leaderMargin = leaderTTL / 10
	// leaderSlack is added to every time bound of the section.
	leaderSlack = 2 * time.Second
)

// LeaderConfig returns the elector configuration of the leader checks for
// election name and candidate id: TTL 1.5 s, renewals every 0.5 s,
// followers polling every 150 ms, a safety margin of 150 ms, logs
// discarded. Backend tests of their own (several processes, dropped
// connections) use it to time their electors alike.
func LeaderConfig(name, id string) coord.ElectorConfig {
	return coord.ElectorConfig{
		Name: name, ID: id, Lease: leaderTTL, RenewInterval: leaderRenew, PollInterval: leaderPoll,
		SafetyMargin: leaderMargin, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// CheckLeader names the leader-election part of the coordination
// section, which needs [Harness.Leases].
const CheckLeader = "Coordination/Leader"

// LeaderHandoverBound is the longest the leader checks allow between a
// leader's crash (its renewals stop) and a successor's election: TTL plus
// one renew interval and one poll, plus a generous allowance for a
// loaded machine.
const LeaderHandoverBound = leaderTTL + leaderRenew + leaderPoll + leaderSlack

// testLeader runs the leader-election checks of the coordination section.
func testLeader(t *testing.T, h Harness) {
	if h.Leases == nil {
		h.lacks(t, CheckLeader, "Leases", "leader election")
	}
	t.Run("LeaseStore", func(t *testing.T) { testLeaseStore(t, h) })
	t.Run("OneLeaderPerTerm", func(t *testing.T) { testOneLeaderPerTerm(t, h) })
	t.Run("Crash", func(t *testing.T) { testLeaderCrash(t, h) })
	t.Run("Fencing", func(t *testing.T) { testLeaderFencing(t, h) })
}

// testLeaseStore checks the lease operations one by one.
func testLeaseStore(t *testing.T, h Harness) {
	ls := h.Leases(t)
	ctx := context.Background()
	const name = "conformance-lease"
	if _, err := ls.GetLease(ctx, name); !errors.Is(err, dao.ErrNotFound) {
		t.Fatalf("GetLease of a new name: err = %v, want ErrNotFound", err)
	}
	first, held, err := ls.AcquireLease(ctx, name, "a", 5*time.Second)
	if err != nil || !held || first.Term != 1 || first.Holder != "a" {
		t.Fatalf("first AcquireLease = %+v, %v, %v; want held by a in term 1", first, held, err)
	}
	if d := first.ExpiresAt.Sub(first.Now); d < 4900*time.Millisecond || d > 5*time.Second {
		t.Errorf("first lease expires %v after the store's now, want 5s", d)
	}
	renewed, held, err := ls.AcquireLease(ctx, name, "a", 5*time.Second)
	if err != nil || !held || renewed.Term != 1 || renewed.ExpiresAt.Before(first.ExpiresAt) || !renewed.ElectedAt.Equal(first.ElectedAt) {
		t.Fatalf("renewal = %+v, %v, %v; want held in term 1, expiring no earlier than %v, elected at %v", renewed, held, err, first.ExpiresAt, first.ElectedAt)
	}
	other, held, err := ls.AcquireLease(ctx, name, "b", 5*time.Second)
	if err != nil || held || other.Holder != "a" || other.Term != 1 {
		t.Fatalf("AcquireLease by b of a's unexpired lease = %+v, %v, %v; want a's lease in term 1, not held", other, held, err)
	}
	if ok, err := ls.ReleaseLease(ctx, name, "b", 1); err != nil || ok {
		t.Fatalf("ReleaseLease by b of a's lease = %v, %v; want false", ok, err)
	}
	if ok, err := ls.ReleaseLease(ctx, name, "a", 2); err != nil || ok {
		t.Fatalf("ReleaseLease by a of a term it does not hold = %v, %v; want false", ok, err)
	}
	if ok, err := ls.ReleaseLease(ctx, name, "a", 1); err != nil || !ok {
		t.Fatalf("ReleaseLease by a = %v, %v; want true", ok, err)
	}
	got, err := ls.GetLease(ctx, name)
	if err != nil || !got.Expired() || got.Holder != "a" || got.Term != 1 {
		t.Fatalf("GetLease after release = %+v, %v; want a's expired lease of term 1", got, err)
	}
	taken, held, err := ls.AcquireLease(ctx, name, "b", 200*time.Millisecond)
	if err != nil || !held || taken.Holder != "b" || taken.Term != 2 {
		t.Fatalf("AcquireLease by b of a released lease = %+v, %v, %v; want held by b in term 2", taken, held, err)
	}
	// Let b's short lease expire by the store's clock; b taking it again
	// is a new term too.
	time.Sleep(400 * time.Millisecond)
	again, held, err := ls.AcquireLease(ctx, name, "b", 5*time.Second)
	if err != nil || !held || again.Term != 3 {
		t.Fatalf("AcquireLease by b of its own expired lease = %+v, %v, %v; want held in term 3", again, held, err)
	}
	if _, held, err := ls.AcquireLease(ctx, "conformance-other", "a", 5*time.Second); err != nil || !held {
		t.Fatalf("AcquireLease of a second name = %v, %v; want held (names are independent)", held, err)
	}
	for _, bad := range []struct {
		name, holder string
		ttl          time.Duration
	}{
		{"", "a", time.Second}, {name, "", time.Second}, {name, "a", 0}, {name, "a", -time.Second},
		{name, "a", 1500 * time.Microsecond}, {name, "a", 25 * time.Hour}, {string(make([]byte, 192)), "a", time.Second},
		{name, "a\x00b", time.Second}, {"\xff", "a", time.Second},
	} {
		if _, _, err := ls.AcquireLease(ctx, bad.name, bad.holder, bad.ttl); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("AcquireLease(%q, %q, %v): err = %v, want ErrInvalidArgument", bad.name, bad.holder, bad.ttl, err)
		}
	}
	if got, err := ls.GetLease(ctx, name); err != nil || got.Holder != "b" || got.Term != 3 {
		t.Errorf("after refused calls GetLease = %+v, %v; want b's lease of term 3 unchanged", got, err)
	}
}

// election runs electors of one name and records every term they win.
type election struct {
	t     *testing.T
	store coord.LeaseStore
	name  string

	mu      sync.Mutex
	won     []won            // in the order OnElected ran
	holders map[int64]string // term → the one candidate that won it
	active  map[string]bool  // candidates whose OnElected has not returned
	changed chan struct{}    // signaled at every election
}

type won struct {
	term int64
	id   string
	at   time.Time
}

func newElection(t *testing.T, store coord.LeaseStore, name string) *election {
	return &election{t: t, store: store, name: name, holders: map[int64]string{}, active: map[string]bool{}, changed: make(chan struct{}, 100)}
}

// start runs an elector with id over store (the election's store when
// nil) until the returned stop is called; stop waits for Run to return.
func (el *election) start(id string, store coord.LeaseStore) (e *coord.Elector, stop func()) {
	t := el.t
	if store == nil {
		store = el.store
	}
	cfg := LeaderConfig(el.name, id)
	cfg.OnElected = func(ctx context.Context, l coord.Leader) {
		el.mu.Lock()
		for other := range el.active {
			t.Errorf("%s won term %d while %s still led", id, l.Term(), other)
		}
		if prev, ok := el.holders[l.Term()]; ok && prev != id {
			t.Errorf("term %d won by %s and by %s", l.Term(), prev, id)
		}
		if n := len(el.won); n > 0 && el.won[n-1].term > l.Term() {
			t.Errorf("%s won term %d after term %d had been won: terms went back", id, l.Term(), el.won[n-1].term)
		}
		el.holders[l.Term()] = id
		el.won = append(el.won, won{term: l.Term(), id: id, at: time.Now()})
		el.active[id] = true
		el.mu.Unlock()
		select {
		case el.changed <- struct{}{}:
		default:
		}
		<-ctx.Done()
		el.mu.Lock()
		delete(el.active, id)
		el.mu.Unlock()
	}
	e, err := coord.NewElector(store, cfg)
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Logf("elector %s: %v", id, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return e, stop
}

// waitElected waits for an election after index n of won and returns it.
func (el *election) waitElected(n int, within time.Duration) (won, bool) {
	deadline := time.After(within)
	for {
		el.mu.Lock()
		if len(el.won) > n {
			w := el.won[n]
			el.mu.Unlock()
			return w, true
		}
		el.mu.Unlock()
		select {
		case <-el.changed:
		case <-deadline:
			return won{}, false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// last returns the number of elections so far and the latest one.
func (el *election) last() (int, won) {
	el.mu.Lock()
	defer el.mu.Unlock()
	return len(el.won), el.won[len(el.won)-1]
}

// testOneLeaderPerTerm runs four electors; five times the leader resigns
// (and starts again as a follower) and another must take over within one
// poll, in a strictly greater term. OnElected checks that no two
// candidates lead at once and that no term has two leaders.
func testOneLeaderPerTerm(t *testing.T, h Harness) {
	ls := h.Leases(t)
	lss := h.leaseStores(t, ls)
	el := newElection(t, ls, "conformance-one-leader")
	const candidates = 4
	electors := map[string]*coord.Elector{}
	stops := map[string]func(){}
	via := map[string]coord.LeaseStore{} // candidate → the node it runs through
	for i := range candidates {
		id := fmt.Sprintf("candidate-%d", i)
		via[id] = lss[i%len(lss)]
		electors[id], stops[id] = el.start(id, via[id])
	}
	first, ok := el.waitElected(0, leaderTTL+leaderSlack)
	if !ok {
		t.Fatalf("no leader among %d electors after %v", candidates, leaderTTL+leaderSlack)
	}
	t.Logf("first leader %s, term %d", first.id, first.term)
	// A resigned lease is taken over at the next poll of a follower
	// (150 ms): well before the lease could have expired by itself, at
	// least TTL minus the renew interval (1 s) after the resignation.
	bound := leaderTTL - leaderRenew
	var worst time.Duration
	for round := range 5 {
		n, cur := el.last()
		l, leading := electors[cur.id].Leader()
		if !leading || l.Term() != cur.term {
			t.Fatalf("round %d: %s won term %d but Leader() = %d, %v", round, cur.id, cur.term, l.Term(), leading)
		}
		resigned := time.Now()
		stops[cur.id]()
		if l.Active() {
			t.Errorf("round %d: the resigned leader's Leader is still active", round)
		}
		next, ok := el.waitElected(n, LeaderHandoverBound)
		if !ok {
			t.Fatalf("round %d: no leader within %v after %s resigned term %d", round, LeaderHandoverBound, cur.id, cur.term)
		}
		took := next.at.Sub(resigned)
		worst = max(worst, took)
		t.Logf("round %d: %s resigned term %d; %s won term %d after %v", round, cur.id, cur.term, next.id, next.term, took.Round(time.Millisecond))
		if next.term <= cur.term {
			t.Errorf("round %d: term %d after term %d: terms must strictly increase", round, next.term, cur.term)
		}
		if took >= bound {
			t.Errorf("round %d: handover after resign took %v, not less than %v (TTL minus renew interval, the earliest the lease could have expired by itself): the lease was not released", round, took, bound)
		}
		electors[cur.id], stops[cur.id] = el.start(cur.id, via[cur.id])
	}
	t.Logf("handover after resign: worst %v (poll interval %v)", worst.Round(time.Millisecond), leaderPoll)
}

// crashable is a lease store whose every call fails once crash is
// called, as if the process had died or its connection had dropped: the
// elector can neither renew nor resign.
type crashable struct {
	coord.LeaseStore
	mu      sync.Mutex
	crashed bool
}

var errCrashed = fmt.Errorf("conformance: candidate crashed: %w", dao.ErrUnavailable)

func (c *crashable) crash() { c.mu.Lock(); c.crashed = true; c.mu.Unlock() }

func (c *crashable) down() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.crashed }

func (c *crashable) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (coord.Lease, bool, error) {
	if c.down() {
		return coord.Lease{}, false, errCrashed
	}
	return c.LeaseStore.AcquireLease(ctx, name, holder, ttl)
}

func (c *crashable) ReleaseLease(ctx context.Context, name, holder string, term int64) (bool, error) {
	if c.down() {
		return false, errCrashed
	}
	return c.LeaseStore.ReleaseLease(ctx, name, holder, term)
}

// testLeaderCrash runs three electors and crashes the leader twice: its
// store fails every call (no renewal, no release) and its elector is
// stopped. Another must be elected within TTL plus one renew interval and
// one poll (generously bounded), in a greater term, and the crashed one
// must have given up locally.
func testLeaderCrash(t *testing.T, h Harness) {
	store := h.Leases(t)
	lss := h.leaseStores(t, store)
	el := newElection(t, store, "conformance-crash")
	stores := map[string]*crashable{}
	electors := map[string]*coord.Elector{}
	stops := map[string]func(){}
	for i := range 3 {
		id := fmt.Sprintf("candidate-%d", i)
		stores[id] = &crashable{LeaseStore: lss[i%len(lss)]}
		electors[id], stops[id] = el.start(id, stores[id])
	}
	if _, ok := el.waitElected(0, leaderTTL+leaderSlack); !ok {
		t.Fatal("no leader among 3 electors")
	}
	for round := range 2 {
		n, cur := el.last()
		l, _ := electors[cur.id].Leader()
		crashed := time.Now()
		stores[cur.id].crash()
		next, ok := el.waitElected(n, LeaderHandoverBound)
		if !ok {
			t.Fatalf("round %d: no leader within %v after %s (term %d) crashed", round, LeaderHandoverBound, cur.id, cur.term)
		}
		took := next.at.Sub(crashed)
		t.Logf("round %d: %s crashed in term %d; %s won term %d after %v (TTL %v, renew interval %v, poll %v)",
			round, cur.id, cur.term, next.id, next.term, took.Round(time.Millisecond), leaderTTL, leaderRenew, leaderPoll)
		if next.term <= cur.term {
			t.Errorf("round %d: term %d after term %d", round, next.term, cur.term)
		}
		if l.Active() {
			t.Errorf("round %d: the crashed leader still leads locally when %s was elected", round, next.id)
		}
		stops[cur.id]()
	}
}

// testLeaderFencing checks that a deposed leader's fenced write changes
// nothing: FencedUpdate refuses at once once the leadership has ended
// locally, and a write fenced with the old term that reaches the store
// anyway (a leader paused between its check and its write) matches no row
// the newer term has written.
func testLeaderFencing(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	rows := seed(t, s, 1, nil)
	id := rows[0].ID
	// The priority column holds the term of the last fenced write.
	const fence = "priority"
	store := h.Leases(t)
	lss := h.leaseStores(t, store)
	el := newElection(t, store, "conformance-fencing")
	a := &crashable{LeaseStore: store}
	ea, _ := el.start("old-leader", a)
	first, ok := el.waitElected(0, leaderTTL+leaderSlack)
	if !ok || first.id != "old-leader" {
		t.Fatalf("old-leader not elected: %+v, %v", first, ok)
	}
	old, leading := ea.Leader()
	if !leading {
		t.Fatal("old-leader does not lead")
	}
	if n, err := coord.FencedUpdate(ctx, s, old, fence, dao.Eq("id", id), dao.Set{"payload": "by-old"}); err != nil || n != 1 {
		t.Fatalf("old leader's fenced write while leading = %d, %v; want 1 row", n, err)
	}
	// The new leader is elected through another node, when there is one.
	eb, _ := el.start("new-leader", lss[1%len(lss)])
	a.crash()
	next, ok := el.waitElected(1, LeaderHandoverBound)
	if !ok || next.id != "new-leader" || next.term <= old.Term() {
		t.Fatalf("new-leader not elected after old-leader's crash: %+v, %v", next, ok)
	}
	cur, leading := eb.Leader()
	if !leading {
		t.Fatal("new-leader does not lead")
	}
	if n, err := coord.FencedUpdate(ctx, s, cur, fence, dao.Eq("id", id), dao.Set{"payload": "by-new"}); err != nil || n != 1 {
		t.Fatalf("new leader's fenced write = %d, %v; want 1 row", n, err)
	}
	if n, err := coord.FencedUpdate(ctx, s, old, fence, dao.Eq("id", id), dao.Set{"payload": "late"}); !errors.Is(err, coord.ErrNotLeader) || n != 0 {
		t.Errorf("deposed leader's FencedUpdate = %d, %v; want 0 rows and ErrNotLeader", n, err)
	}
	// The old term's token travels without the leader (a job or a message
	// carries it): it cannot tell that its term ended, so the write is
	// sent and the database refuses it: ErrFenced, not ErrNotLeader.
	if n, err := coord.FencedUpdate(ctx, s, old.Token(), fence, dao.Eq("id", id), dao.Set{"payload": "late"}); !errors.Is(err, coord.ErrFenced) || errors.Is(err, coord.ErrNotLeader) || n != 0 {
		t.Errorf("FencedUpdate with the deposed leader's token = %d, %v; want 0 rows and ErrFenced (the database's refusal)", n, err)
	}
	late := rows[0]
	late.Payload = "late"
	if created, err := coord.FencedUpsert(ctx, s, old.Token(), fence, &late, dao.Set{"payload": "late"}); !errors.Is(err, coord.ErrFenced) || errors.Is(err, coord.ErrNotLeader) || created {
		t.Errorf("FencedUpsert with the deposed leader's token: created %v, %v; want ErrFenced (the database's refusal)", created, err)
	}
	// The same write as FencedUpdate sends, sent anyway.
	n, err := s.Update(ctx, dao.And(dao.Eq("id", id), old.Token().Criteria(fence)), dao.Set{"payload": "late", fence: old.Term()})
	if err != nil || n != 0 {
		t.Errorf("deposed leader's write fenced with term %d = %d rows, %v; want 0 rows", old.Term(), n, err)
	}
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Payload != "by-new" || int64(got.Priority) != cur.Term() {
		t.Errorf("row after the deposed leader's write: payload %q, fence %d; want %q, %d", got.Payload, got.Priority, "by-new", cur.Term())
	}
}
