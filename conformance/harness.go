package conformance

import (
	"os"
	"slices"
	"testing"

	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
)

// Harness connects the suite to one backend.
type Harness struct {
	// NewStore returns a store of [Job] over a fresh, empty table (or
	// index, or in-memory store). The harness creates the table and removes
	// it when t finishes (t.Cleanup). It is called once per test, and may
	// call t.Fatal or t.Skip. Required.
	NewStore func(t *testing.T) dao.Store[Job]

	// HoldLock, optional, takes from another connection the lock a
	// competing writer would hold on the row whose id is id, and keeps it
	// until release is called: on a backend with row locks a row lock (for
	// PostgreSQL: SELECT … FOR UPDATE in an open transaction), on a backend
	// whose writers serialize the database write lock (for SQLite: BEGIN
	// IMMEDIATE). s is a store NewStore returned in the same test. The
	// suite uses it to force the lost race on a fast-path store (one
	// statement, no candidate stage) and on a store whose lost race is
	// [dao.LostRaceBusy]. Required for such a store: without it the check
	// [CheckHeldLock] fails, unless Skip names it. The SQL adapter's
	// complete harness, sqlstoretest.Harness, provides it.
	HoldLock func(t *testing.T, s dao.Store[Job], id int64) (release func())

	// Skip opts out of checks by name. A check that needs something the
	// harness does not give (HoldLock for [CheckHeldLock]) fails the run,
	// so that a missing harness capability never passes unnoticed, unless
	// its name is listed here: then it is skipped, and says why. A name
	// that is not one of the checks [Run] can skip ([Skippable]) fails the
	// run.
	Skip []string

	// Models, optional, opens the stores of the models section: everyday
	// GORM models (gorm.Model with soft delete and timestamps, UUID keys, a
	// typed enum, columns with explicit SQL types, an embedded struct with
	// a column prefix, a naming strategy with a table prefix). Without it
	// the section fails, unless Skip names [CheckModels].
	Models *ModelStores
	// Leases, optional, returns a lease store over a fresh, empty lease
	// table (or index, or in-memory store), removed when t finishes, for
	// the leader-election checks of the coordination section. It is called
	// once per check; the electors of one check share the store it
	// returns. Without it those checks fail, unless Skip names [CheckLeader].
	Leases func(t *testing.T) coord.LeaseStore

	// Locker, optional, returns the try-lock the coordination section
	// tests (coord.WithLock), over the same database as s, a store
	// NewStore returned in the same test. nil means s itself, which then
	// must be a coord.Locker (every *dao.Table is, through its TryLock).
	Locker func(t *testing.T, s dao.Store[Job]) coord.Locker

	// KillLockHolder, optional, ends from another connection the database
	// session that runs tx, the transaction a try-lock passed to its unit
	// of work (PostgreSQL: pg_terminate_backend; MySQL and MariaDB: KILL),
	// and returns once the server has accepted the request. Required for
	// [CheckLockHolderKilled] unless Skip names it.
	KillLockHolder func(t *testing.T, tx any)

	// Nodes, optional, are other ways into the same database: for a
	// cluster whose every node takes writes (MariaDB Galera Cluster), one
	// per node other than the one NewStore's stores use. The concurrent
	// checks (no double claim, the cancel sweep, leader election, the
	// try-lock's mutual exclusion) spread their claimers, candidates and
	// holders over the stores NewStore returned and those of Nodes, round
	// robin. Empty: everything goes through NewStore's stores.
	Nodes []Node

	// Unsupported names the checks whose feature the backend refuses by
	// design, as its documentation states: only [CheckTryLock] (for
	// example the try-lock on MariaDB Galera Cluster, where GET_LOCK is
	// local to a node; see dialects.Behaviours). Such a check asserts the
	// refusal instead: every try, through every node, returns an error
	// wrapping errors.ErrUnsupported and runs nothing. A name that is not
	// CheckTryLock fails the run.
	Unsupported []string

	// Rows and Workers size the concurrent no-double-claim test: Workers
	// goroutines claim Rows rows until none is left. Zero means 5000 rows
	// (500 with -short) and 16 workers.
	Rows, Workers int
}

// Node opens, through another way into the database of a [Harness] (a
// connection to another node of a cluster), the stores a check already
// made, over the same tables.
type Node struct {
	// Store returns a store over the table of s, a store NewStore
	// returned in the same test, through this node; it creates and drops
	// nothing. Required.
	Store func(t *testing.T, s dao.Store[Job]) dao.Store[Job]
	// Leases returns a lease store over the table of ls, a store
	// Harness.Leases returned in the same check, through this node; it
	// creates and drops nothing. Required when Harness.Leases is given.
	Leases func(t *testing.T, ls coord.LeaseStore) coord.LeaseStore
}

// CheckHeldLock names the check that needs [Harness.HoldLock]: the lost
// race of a fast path or of [dao.LostRaceBusy], forced with a lock held
// from another connection.
const CheckHeldLock = "LostRace/HeldLock"

// InChild reports whether this process is a child the suite started: the
// test binary run again by [RunStress], by the multi-process checks of
// [RunJobs] or by [RunLockProcesses], which runs the calling test again.
// A test that starts servers before it calls the suite connects to the
// parent's servers instead when InChild is true.
func InChild() bool {
	return os.Getenv(envChild) != "" || os.Getenv(envJobsChild) != ""
}

// Skippable returns the names [Harness.Skip] accepts.
func Skippable() []string {
	return []string{CheckHeldLock, CheckModels, CheckTryLock, CheckLockHolderKilled, CheckLeader}
}

// checkSkip fails t when h.Skip names a check that cannot be skipped.
func (h Harness) checkSkip(t *testing.T) {
	t.Helper()
	for _, name := range h.Skip {
		if !slices.Contains(Skippable(), name) {
			t.Fatalf("conformance: Harness.Skip names %q, which is not one of the checks that can be skipped: %q", name, Skippable())
		}
	}
}

// lacks ends the check named check, which needs the harness field field
// for what it tests: skipped when h.Skip names the check, failed otherwise.
func (h Harness) lacks(t *testing.T, check, field, what string) {
	t.Helper()
	if slices.Contains(h.Skip, check) {
		t.Skipf("Harness.%s is nil and Harness.Skip names %q: %s is not tested", field, check, what)
	}
	t.Fatalf("Harness.%s is nil, so %s cannot be tested: give Harness.%s (sqlstoretest.Harness does for the SQL adapter), or name %q in Harness.Skip to opt out of this check",
		field, what, field, check)
}

// stores returns s, a store NewStore returned, and a store over its table
// through each of h.Nodes: the stores the concurrent checks spread over.
func (h Harness) stores(t *testing.T, s dao.Store[Job]) []dao.Store[Job] {
	t.Helper()
	out := []dao.Store[Job]{s}
	for _, n := range h.Nodes {
		out = append(out, n.Store(t, s))
	}
	return out
}

// leaseStores returns ls, a store Leases returned, and a lease store over
// its table through each of h.Nodes.
func (h Harness) leaseStores(t *testing.T, ls coord.LeaseStore) []coord.LeaseStore {
	t.Helper()
	out := []coord.LeaseStore{ls}
	for _, n := range h.Nodes {
		out = append(out, n.Leases(t, ls))
	}
	return out
}

func (h Harness) rows() int {
	switch {
	case h.Rows > 0:
		return h.Rows
	case testing.Short():
		return 500
	}
	return 5000
}

func (h Harness) workers() int {
	if h.Workers > 0 {
		return h.Workers
	}
	return 16
}

// Run runs the conformance suite against the backend of h, as subtests of
// t: CRUD, criteria semantics, ordering and limits, updates, bounded
// deletes, bad input, claim semantics, the no-double-claim check under
// concurrency, the documented lost-race behaviour the store's
// [dao.Capabilities] declares, forced deterministically, claims whose
// contexts end at random moments, the time a claim with a deadline takes
// behind a lock another connection holds ([CheckDeadlineBehindLock]), the models section (everyday GORM
// models, soft delete and timestamps; [Harness].Models) and the
// coordination section (package coord's try-lock and leader election on
// the same database; a try-lock h.Unsupported names is checked for its
// refusal). The concurrent checks spread their claimers over h.Nodes when
// it has some. Every check goes through the public [dao.Store] and
// coord APIs. A failure names the operation, the input and the rows
// involved. A check that needs a harness field h lacks
// fails, unless h.Skip names it; a name in h.Skip that no check has fails
// the run at once.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("conformance: Harness.NewStore is nil")
	}
	h.checkSkip(t)
	for _, name := range h.Unsupported {
		if name != CheckTryLock {
			t.Fatalf("conformance: Harness.Unsupported names %q; only %q can be refused", name, CheckTryLock)
		}
	}
	for i, n := range h.Nodes {
		if n.Store == nil || (h.Leases != nil && n.Leases == nil) {
			t.Fatalf("conformance: Harness.Nodes[%d] lacks Store, or Leases while Harness.Leases is given", i)
		}
	}
	t.Run("Capabilities", func(t *testing.T) { testCapabilities(t, h) })
	t.Run("CRUD", func(t *testing.T) { testCRUD(t, h) })
	t.Run("Criteria", func(t *testing.T) { testCriteria(t, h) })
	t.Run("TimeZones", func(t *testing.T) { testTimeZones(t, h) })
	t.Run("Order", func(t *testing.T) { testOrder(t, h) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, h) })
	t.Run("UpdateKeys", func(t *testing.T) { testUpdateKeys(t, h) })
	t.Run("UpdateEach", func(t *testing.T) { testUpdateEach(t, h) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, h) })
	t.Run("InvalidArgument", func(t *testing.T) { testInvalid(t, h) })
	t.Run("Claim", func(t *testing.T) { testClaim(t, h) })
	t.Run("NoDoubleClaim", func(t *testing.T) { testNoDoubleClaim(t, h) })
	t.Run("LostRace", func(t *testing.T) { testLostRace(t, h) })
	t.Run("CancelSweep", func(t *testing.T) { testCancelSweep(t, h) })
	t.Run(CheckDeadlineBehindLock, func(t *testing.T) { testDeadlineBehindLock(t, h) })
	t.Run("Models", func(t *testing.T) { testModels(t, h) })
	t.Run("Coordination", func(t *testing.T) {
		t.Run("TryLock", func(t *testing.T) { testTryLock(t, h) })
		t.Run("Leader", func(t *testing.T) { testLeader(t, h) })
	})
}

func testCapabilities(t *testing.T, h Harness) {
	c := h.NewStore(t).Capabilities()
	t.Logf("backend %q, strategy %v, %s round trips per claim, lost race: %v, collation: %v, claim timeout %v, lock-wait limit %v",
		c.Backend, c.Strategy, c.ClaimRoundTrips, c.LostRace, c.Collation, c.ClaimTimeout, c.LockWaitLimit)
	if c.Backend == "" {
		t.Error("Capabilities().Backend is empty")
	}
	if c.Collation.Name == "" {
		t.Error("Capabilities().Collation.Name is empty: a store states how it compares strings")
	}
	switch c.LostRace {
	case dao.LostRaceImpossible, dao.LostRaceSkip, dao.LostRaceBusy, dao.LostRaceConflict:
	default:
		t.Errorf("Capabilities().LostRace is %v, not one of the documented behaviours", c.LostRace)
	}
	if c.Strategy != dao.StrategyPortable && c.Strategy != dao.StrategyFastPath {
		t.Errorf("Capabilities().Strategy is %v, not the portable default or a fast path", c.Strategy)
	}
	if c.ClaimRoundTrips.Fixed < 1 {
		t.Errorf("Capabilities().ClaimRoundTrips = %+v: a claim costs at least one round trip", c.ClaimRoundTrips)
	}
	if c.Strategy == dao.StrategyFastPath && c.ClaimRoundTrips.PerRow != 0 {
		t.Errorf("Capabilities() = %+v: a fast path costs no round trip per row", c)
	}
	if c.ClaimTimeout < 0 || c.LockWaitLimit < 0 {
		t.Errorf("Capabilities() = %+v: negative claim timeout or lock-wait limit", c)
	}
	if c.ClaimTimeout > 0 && c.LockWaitLimit >= c.ClaimTimeout {
		t.Errorf("Capabilities() = %+v: the server-side lock-wait limit must end a wait before the claim timeout does, or a waiting claim's outcome is lost", c)
	}
}
