//go:build linux

package hatest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/mysql"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// The Galera cluster is started once, by the first test that needs it,
// and stopped by TestMain.
var galera struct {
	once sync.Once
	c    *hatest.GaleraCluster
	err  error
}

// galeraCluster returns the three-node cluster, all nodes Synced,
// starting it on first use (about 45 s).
func galeraCluster(ctx context.Context, t testing.TB) *hatest.GaleraCluster {
	t.Helper()
	haEnabled(t)
	galera.once.Do(func() {
		start := time.Now()
		galera.c, galera.err = hatest.StartGaleraCluster(ctx, hatest.GaleraOptions{Script: "../../../scripts/galera-cluster.sh"})
		if galera.err == nil {
			t.Logf("Galera cluster up in %.1fs", time.Since(start).Seconds())
		}
	})
	if galera.err != nil {
		t.Fatal(galera.err)
	}
	if err := galera.c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return galera.c
}

// openGaleraNodes opens one pool of at most conns connections on each
// node, closed at cleanup.
func openGaleraNodes(ctx context.Context, t testing.TB, c *hatest.GaleraCluster, conns int) []*gorm.DB {
	t.Helper()
	return openGaleraNodesWith(ctx, t, c, conns, "")
}

// openGaleraNodesWith is openGaleraNodes with params, "&name=value..."
// appended to each node's DSN (a system variable there is set on every
// connection).
func openGaleraNodesWith(ctx context.Context, t testing.TB, c *hatest.GaleraCluster, conns int, params string) []*gorm.DB {
	t.Helper()
	var dbs []*gorm.DB
	for _, n := range hatest.GaleraNodes {
		db, err := sqlstore.Open(ctx, "mariadb", c.DSN(n)+params)
		if err != nil {
			t.Fatalf("open %s: %v", n, err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.SetMaxOpenConns(conns)
		dbs = append(dbs, testdb.CloseAtCleanup(t, db))
	}
	return dbs
}

// TestGaleraTryLock checks the try-lock on Galera, where GET_LOCK is local
// to a node (MariaDB Galera Cluster docs, "Known Limitations"): a Locker
// over each node either refuses with errors.ErrUnsupported, and runs
// nothing, or never lets two holders of one key run at once. Two
// goroutines per node try the same key ten times each, holding it
// 200 ms.
func TestGaleraTryLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dbs := openGaleraNodes(ctx, t, galeraCluster(ctx, t), 4)
	var holders, most, ran, refused atomic.Int64
	var other []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, db := range dbs {
		l, err := sqlstore.NewLocker(db)
		if err != nil {
			t.Fatalf("NewLocker on %s: %v", hatest.GaleraNodes[i], err)
		}
		for range 2 {
			wg.Go(func() {
				for range 10 {
					ok, err := l.TryLock(ctx, "galera-key", func(ctx context.Context, _ any) error {
						n := holders.Add(1)
						defer holders.Add(-1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(200 * time.Millisecond)
						return nil
					})
					switch {
					case errors.Is(err, errors.ErrUnsupported):
						refused.Add(1)
					case err != nil:
						mu.Lock()
						other = append(other, err)
						mu.Unlock()
					case ok:
						ran.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("60 tries over 3 nodes: %d ran, %d refused (errors.ErrUnsupported), most holders at once %d, other errors %d",
		ran.Load(), refused.Load(), most.Load(), len(other))
	if len(other) > 0 {
		t.Errorf("errors other than errors.ErrUnsupported: %v", other[0])
	}
	if most.Load() > 1 {
		t.Errorf("%d holders of one key at once across the nodes: the try-lock is not exclusive on Galera", most.Load())
	}
	if refused.Load() > 0 && ran.Load() > 0 {
		t.Errorf("some tries refused and others ran: the refusal must be every time")
	}
	if refused.Load() == 0 && ran.Load() == 0 {
		t.Errorf("no try ran and none was refused: the try-lock was never taken")
	}
}

// TestGaleraClaimBurnDown claims rows through all three nodes at once
// (8 claimers per node, claims of 1 and of 50, the portable default and
// the fast path) and counts every row returned: none may be returned
// twice or never. A conflict between nodes is found at commit
// (certification) and comes back as a deadlock error (1213), which the
// claim retries; the nodes' certification failures and brute-force
// aborts are logged.
func TestGaleraClaimBurnDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	for _, strategy := range []dao.Strategy{dao.StrategyPortable, dao.StrategyFastPath} {
		for _, batch := range []int{1, 50} {
			t.Run(fmt.Sprintf("%s/batch%d", strategy, batch), func(t *testing.T) {
				galeraBurnDown(ctx, t, c, strategy, batch)
			})
		}
	}
}

func galeraBurnDown(ctx context.Context, t *testing.T, c *hatest.GaleraCluster, strategy dao.Strategy, batch int) {
	const perNode = 8
	dbs := openGaleraNodes(ctx, t, c, perNode+2)
	r := burnDown(ctx, t, dbs, dbs, 2000, perNode, strategy, batch)
	t.Logf("%s, claims of %d, 3 nodes × %d claimers: %s", strategy, batch, perNode, r)
	if r.twice > 0 || r.never > 0 {
		t.Errorf("%d rows returned twice, %d never", r.twice, r.never)
	}
	if len(r.errs) > 0 {
		t.Errorf("%d claims returned an error, the first: %v", len(r.errs), r.errs[0])
	}
	// Every conflict a claim absorbed was a 1213 returned to it: a
	// certification failure, a brute-force abort by another node's write
	// set, or a deadlock within one node. The nodes count more than the
	// claims see: a node retries an autocommit statement once itself
	// (wsrep_retry_autocommit) before it returns the error.
	if most := r.certFails + r.bfAborts + r.deadlocks; r.conflicts > most {
		t.Errorf("the claims absorbed %d conflicts, more than the nodes' certification failures, brute-force aborts and deadlocks (%d)", r.conflicts, most)
	}
	if strategy == dao.StrategyFastPath && batch > 1 && r.conflicts == 0 {
		t.Errorf("no conflict counted by the claims' trace, with %d certification failures and %d brute-force aborts on the nodes", r.certFails, r.bfAborts)
	}
}

// burnResult is what a burn-down measured.
type burnResult struct {
	rows, claims        int
	took                time.Duration
	twice, never        int
	errs                []error
	certFails, bfAborts int64
	// deadlocks are the nodes' Innodb_deadlocks: deadlocks found within
	// one node.
	deadlocks int64
	// conflicts are the conflicts the claims absorbed, as
	// dao.ClaimTrace.Conflict reported them.
	conflicts int64
}

func (r burnResult) String() string {
	return fmt.Sprintf("%d rows in %v (%.0f rows/s), %d claims: %d returned twice, %d never, %d errors returned; conflicts absorbed %d; certification failures %d (%.1f per 1,000 claims), brute-force aborts %d, deadlocks %d",
		r.rows, r.took.Round(time.Millisecond), float64(r.rows)/r.took.Seconds(), r.claims, r.twice, r.never, len(r.errs),
		r.conflicts, r.certFails, 1000*float64(r.certFails)/float64(max(r.claims, 1)), r.bfAborts, r.deadlocks)
}

// burnDown creates a table of rows ready rows through all[0] and claims
// them until none is left with perDB claimers on each pool of claimers
// (claims of batch rows, the given strategy), counting every row
// returned; all are the pools whose nodes' certification counters are
// summed. The table is dropped at tb's cleanup.
func burnDown(ctx context.Context, tb testing.TB, all, claimers []*gorm.DB, rows, perDB int, strategy dao.Strategy, batch int) burnResult {
	tb.Helper()
	table := readyTable(tb, all[0], "ha_galera", rows)
	before := certStats(tb, all)
	returned := make([]atomic.Int32, rows+1)
	var claims, conflicts atomic.Int64
	ctx = dao.WithClaimTrace(ctx, &dao.ClaimTrace{Conflict: func(context.Context) { conflicts.Add(1) }})
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i, db := range claimers {
		store, err := sqlstore.New[haJob](db, sqlstore.WithTable(table), sqlstore.WithStrategy(strategy))
		if err != nil {
			tb.Fatal(err)
		}
		for w := range perDB {
			name := fmt.Sprintf("p%d-w%d", i, w)
			wg.Go(func() {
				for ctx.Err() == nil {
					got, err := store.Claim(ctx, dao.ClaimRequest{
						Where: dao.Eq("state", "ready"),
						Set:   dao.Set{"state": "claimed", "locked_by": name, "locked_until": time.Now().Add(time.Minute)},
						Limit: batch,
					})
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						n := len(errs)
						mu.Unlock()
						if n > 100 {
							return
						}
						continue
					}
					claims.Add(1)
					if len(got) == 0 {
						return
					}
					for _, r := range got {
						returned[r.ID].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	r := burnResult{rows: rows, claims: int(claims.Load()), took: time.Since(start), errs: errs, conflicts: conflicts.Load()}
	for id := 1; id <= rows; id++ {
		switch n := returned[id].Load(); {
		case n == 0:
			r.never++
		case n > 1:
			r.twice++
		}
	}
	after := certStats(tb, all)
	r.certFails, r.bfAborts, r.deadlocks = after[0]-before[0], after[1]-before[1], after[2]-before[2]
	if left, err := syncedCount(ctx, all[len(all)-1], `SELECT COUNT(*) FROM `+table+` WHERE state <> 'claimed'`); err != nil || left != 0 {
		tb.Errorf("rows not claimed, read on the last node: %d (%v)", left, err)
	}
	return r
}

// syncedCount runs the COUNT query on one connection of db that, on a
// Galera node, first waits until the node has applied every write the
// cluster committed before the read (wsrep_sync_wait = 1): without it a
// node may not yet show another node's last writes.
func syncedCount(ctx context.Context, db *gorm.DB, query string) (int64, error) {
	galera, err := dialects.DetectGalera(ctx, db)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		if galera {
			if err := conn.Exec("SET SESSION wsrep_sync_wait = 1").Error; err != nil {
				return err
			}
			defer conn.Exec("SET SESSION wsrep_sync_wait = 0")
		}
		return conn.Raw(query).Scan(&n).Error
	})
	return n, err
}

// readyTable creates, through db, a table of haJob rows 1 to rows, all
// ready (MariaDB's seq_1_to_N sequence engine fills it in one
// statement), named prefix_<random> and dropped at tb's cleanup.
func readyTable(tb testing.TB, db *gorm.DB, prefix string, rows int) string {
	tb.Helper()
	table := testdb.Table(tb, db, prefix)
	if err := db.Exec(`CREATE TABLE ` + table + ` (id bigint PRIMARY KEY, state varchar(16) NOT NULL, locked_by varchar(64), locked_until datetime(6), KEY (state))`).Error; err != nil {
		tb.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO ` + table + ` (id, state) SELECT seq, 'ready' FROM seq_1_to_` + fmt.Sprint(rows)).Error; err != nil {
		tb.Fatal(err)
	}
	return table
}

// certStats sums wsrep_local_cert_failures, wsrep_local_bf_aborts and
// Innodb_deadlocks over the nodes (a server outside a cluster has no
// wsrep_ counters: 0).
func certStats(t testing.TB, dbs []*gorm.DB) [3]int64 {
	t.Helper()
	var out [3]int64
	for _, db := range dbs {
		for i, name := range []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts", "Innodb_deadlocks"} {
			var v struct {
				VariableName string
				Value        int64
			}
			if err := db.Raw("SHOW GLOBAL STATUS LIKE ?", name).Scan(&v).Error; err != nil {
				t.Fatal(err)
			}
			out[i] += v.Value
		}
	}
	return out
}

// galeraRegister is a row that fenced writes change; LeaderTerm records
// the term of the last one.
type galeraRegister struct {
	ID         int64  `gorm:"primaryKey;autoIncrement:false"`
	Value      string `gorm:"size:64;not null"`
	LeaderTerm *int64
}

// TestGaleraLeasesAndFencing checks leader election and fencing through
// different nodes. Four candidates per node race for one lease (TTL
// 1 s) for 6 s, each holder pausing past its lease so that the others
// take it over: each term has one holder, whichever node it acquired
// through. A candidate whose attempt lost a conflict with another node's
// at certification gets an error wrapping dao.ErrConflict (a deadlock,
// 1213) and tries again at its next attempt, as coord.Elector does. Then a leader elected through g1 writes
// a register under its fence, its lease ends, a new leader is elected
// through g2 and writes under its newer term, and the deposed leader's
// fenced write, sent through g1, is refused: coord.ErrFenced, or
// dao.ErrConflict when g1 has not applied the newer write yet and
// certification aborts the stale one.
func TestGaleraLeasesAndFencing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dbs := openGaleraNodes(ctx, t, galeraCluster(ctx, t), 6)
	leaseTable := testdb.Table(t, dbs[0], "ha_galera_leases")
	leases := make([]*sqlstore.Leases, len(dbs))
	for i, db := range dbs {
		l, err := sqlstore.NewLeases(db, leaseTable)
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	if err := leases[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// The race: every term has one holder.
	holders := map[int64]map[string]bool{} // term -> holders that held it
	var mu sync.Mutex
	var acquired, refusedErrs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	raceCtx, stopRace := context.WithTimeout(ctx, 6*time.Second)
	defer stopRace()
	for i, l := range leases {
		for c := range 4 {
			id := fmt.Sprintf("%s-c%d", hatest.GaleraNodes[i], c)
			wg.Go(func() {
				for raceCtx.Err() == nil {
					lease, held, err := l.AcquireLease(raceCtx, "galera-leader", id, time.Second)
					switch {
					case err != nil && raceCtx.Err() == nil:
						refusedErrs.Add(1)
						firstErr.CompareAndSwap(nil, err)
						if !errors.Is(err, dao.ErrConflict) {
							t.Errorf("candidate %s: %v; want only dao.ErrConflict (a certification conflict)", id, err)
						}
					case held:
						acquired.Add(1)
						mu.Lock()
						if holders[lease.Term] == nil {
							holders[lease.Term] = map[string]bool{}
						}
						holders[lease.Term][id] = true
						mu.Unlock()
						// A holder that pauses past its lease: the
						// others take it over in a new term.
						time.Sleep(1200 * time.Millisecond)
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	shared := 0
	for term, hs := range holders {
		if len(hs) > 1 {
			shared++
			t.Errorf("term %d held by %d candidates: %v", term, len(hs), hs)
		}
	}
	t.Logf("12 candidates on 3 nodes for 6 s: %d acquisitions or renewals, %d terms (term: holders %v), %d terms with more than one holder, %d errors (first: %v)",
		acquired.Load(), len(holders), holders, shared, refusedErrs.Load(), firstErr.Load())
	if len(holders) < 2 {
		t.Errorf("%d terms in 6 s with a 1 s lease: the lease never changed hands", len(holders))
	}

	// Fencing across nodes.
	regTable := testdb.Table(t, dbs[0], "ha_galera_register")
	if err := dbs[0].Table(regTable).Migrator().CreateTable(&galeraRegister{}); err != nil {
		t.Fatal(err)
	}
	reg := make([]dao.Store[galeraRegister], len(dbs))
	for i, db := range dbs {
		s, err := sqlstore.New[galeraRegister](db, sqlstore.WithTable(regTable))
		if err != nil {
			t.Fatal(err)
		}
		reg[i] = s
	}
	const name = "galera-fence"
	old, held, err := leases[0].AcquireLease(ctx, name, "old-leader", time.Second)
	if err != nil || !held {
		t.Fatalf("old leader through g1: %+v, %v, %v", old, held, err)
	}
	oldFence, err := coord.NewFence(name, old.Term)
	if err != nil {
		t.Fatal(err)
	}
	if created, err := coord.FencedUpsert(ctx, reg[0], oldFence, "leader_term", &galeraRegister{ID: 1, Value: "old"}, dao.Set{"value": "old"}); err != nil || !created {
		t.Fatalf("old leader's write through g1: %v, %v", created, err)
	}
	time.Sleep(1500 * time.Millisecond) // the old lease ends
	cur, held, err := leases[1].AcquireLease(ctx, name, "new-leader", time.Second)
	if err != nil || !held || cur.Term <= old.Term {
		t.Fatalf("new leader through g2: %+v, %v, %v; want a term above %d", cur, held, err, old.Term)
	}
	newFence, err := coord.NewFence(name, cur.Term)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := coord.FencedUpdate(ctx, reg[1], newFence, "leader_term", dao.Eq("id", int64(1)), dao.Set{"value": "new"}); err != nil || n != 1 {
		t.Fatalf("new leader's write through g2: %d, %v", n, err)
	}
	n, err := coord.FencedUpdate(ctx, reg[0], oldFence, "leader_term", dao.Eq("id", int64(1)), dao.Set{"value": "late"})
	t.Logf("deposed leader (term %d) writing through g1 after the leader of term %d wrote through g2: %d rows, %v", old.Term, cur.Term, n, err)
	// Refused either way: g1 has applied the newer write (the fence's
	// criteria match nothing: coord.ErrFenced), or not yet (the update
	// matches locally and certification aborts it: dao.ErrConflict).
	if n != 0 || !(errors.Is(err, coord.ErrFenced) || errors.Is(err, dao.ErrConflict)) {
		t.Errorf("deposed leader's write through g1: %d rows, %v; want 0 and coord.ErrFenced or dao.ErrConflict", n, err)
	}
	kept, err := syncedCount(ctx, dbs[2], fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE id = 1 AND value = 'new' AND leader_term = %d", regTable, cur.Term))
	if err != nil || kept != 1 {
		t.Errorf("register read through g3: %d rows with the new leader's write (%v), want 1", kept, err)
	}
}

// TestGaleraNodeKilledMidBurnDown kills g3 with SIGKILL while claimers on
// all three nodes burn down a table, each claim leased for 5 s and its
// rows marked done by an update guarded by the claim's owner token. Rows
// whose claim or mark was lost with g3 are claimed again once their lease
// ends. Every row must end done, none marked twice (the guarded mark
// cannot succeed twice); the claimers on g1 and g2 go on claiming (the
// longest pause is logged: the cluster waits for evs.suspect_timeout,
// PT2S as the cluster script sets it, Galera's default PT5S, before
// it drops the dead node), and g3 must rejoin
// (IST) and read the same table.
func TestGaleraNodeKilledMidBurnDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	const rows, perNode, batch, lease = 3000, 4, 20, 5 * time.Second
	dbs := openGaleraNodes(ctx, t, c, perNode+2)
	table := readyTable(t, dbs[0], "ha_galera_kill", rows)
	marked := make([]atomic.Int32, rows+1)    // marked[id]: guarded marks that changed row id
	var lastSurvivor, longestGap atomic.Int64 // unix nanos of the last claim answered on g1 or g2; longest wait since the kill
	var errCount [3]atomic.Int64
	var killedAt atomic.Int64
	var wg sync.WaitGroup
	runCtx, stop := context.WithTimeout(ctx, 3*time.Minute)
	defer stop()
	left := func() int64 {
		n, err := syncedCount(ctx, dbs[0], `SELECT COUNT(*) FROM `+table+` WHERE state <> 'done'`)
		if err != nil {
			return -1
		}
		return n
	}
	for i, db := range dbs {
		store, err := sqlstore.New[haJob](db, sqlstore.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		for w := range perNode {
			wg.Go(func() {
				for seq := 0; runCtx.Err() == nil; seq++ {
					owner := fmt.Sprintf("%s-w%d-%d", hatest.GaleraNodes[i], w, seq)
					now := time.Now().UTC()
					got, err := store.Claim(runCtx, dao.ClaimRequest{
						Where: dao.Or(dao.Eq("state", "ready"), dao.And(dao.Eq("state", "claimed"), dao.Le("locked_until", now))),
						Set:   dao.Set{"state": "claimed", "locked_by": owner, "locked_until": now.Add(lease)},
						Limit: batch,
					})
					if err != nil {
						errCount[i].Add(1)
						time.Sleep(200 * time.Millisecond)
						continue
					}
					if i != 2 {
						// The longest wait, since the kill, between
						// claims answered on g1 or g2.
						now := time.Now().UnixNano()
						prev := lastSurvivor.Swap(now)
						if k := killedAt.Load(); k != 0 {
							gap := now - max(prev, k)
							for m := longestGap.Load(); gap > m && !longestGap.CompareAndSwap(m, gap); m = longestGap.Load() {
							}
						}
					}
					if len(got) == 0 {
						if i != 2 && left() == 0 {
							return
						}
						time.Sleep(100 * time.Millisecond)
						continue
					}
					for _, r := range got {
						n, err := store.Update(runCtx, dao.And(dao.Eq("id", r.ID), dao.Eq("state", "claimed"), dao.Eq("locked_by", owner)), dao.Set{"state": "done"})
						if err != nil {
							errCount[i].Add(1)
							break // the lease ends; another claim takes the rest
						}
						marked[r.ID].Add(int32(n))
					}
				}
			})
		}
	}
	time.Sleep(time.Second)
	if err := c.KillNode(ctx, "g3"); err != nil {
		t.Fatal(err)
	}
	killedAt.Store(time.Now().UnixNano())
	t.Logf("g3 killed with %d rows left", left())
	// The claimers on g1 and g2 stop once every row is done; those on g3
	// when the run's context ends.
	for ctx.Err() == nil && left() != 0 {
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()
	// A row done with no mark answered is one whose mark committed but
	// whose answer was lost (with g3, or a connection cut): done once.
	var twice, unanswered int
	for id := 1; id <= rows; id++ {
		switch n := marked[id].Load(); {
		case n == 0:
			unanswered++
		case n > 1:
			twice++
		}
	}
	lost := left()
	t.Logf("%d rows, 3 nodes × %d claimers, g3 killed after 1 s: %d marked done twice, %d lost, %d done with the mark's answer lost; errors on g1 %d, g2 %d, g3 %d; longest wait between claims answered on g1 or g2 after the kill %v",
		rows, perNode, twice, lost, unanswered, errCount[0].Load(), errCount[1].Load(), errCount[2].Load(), time.Duration(longestGap.Load()).Round(time.Millisecond))
	if twice > 0 || lost != 0 {
		t.Errorf("%d rows marked done twice, %d not done", twice, lost)
	}
	rejoinAndCount(ctx, t, c, "g3", `SELECT COUNT(*) FROM `+table+` WHERE state = 'done'`, rows)
}

// rejoinAndCount starts node again, waits until it has rejoined, and
// checks that query, a COUNT read on it with wsrep_sync_wait, gives
// want.
func rejoinAndCount(ctx context.Context, t *testing.T, c *hatest.GaleraCluster, node, query string, want int64) {
	t.Helper()
	start := time.Now()
	if err := c.StartNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	db, err := sqlstore.Open(ctx, "mariadb", c.DSN(node))
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	got, err := syncedCount(ctx, db, query)
	if err != nil || got != want {
		t.Errorf("%s read on %s after it rejoined: %d (%v), want %d", query, node, got, err, want)
	}
	t.Logf("%s rejoined in %v and reads %d (%s)", node, time.Since(start).Round(time.Millisecond), got, query)
}

// BenchmarkGaleraBurnDown measures the claim burn-down — 20,000 rows,
// 24 claimers, claims of 50, on MariaDB's default (portable) claim and
// on the fast path — on the local single MariaDB server, through one
// node of the Galera cluster (the 24 claimers on g1) and through all
// three (8 on each), with the certification failures per 1,000 claims:
//
//	CLAIMSTORE_HA=1 GOWORK=off go test -run '^$' -bench GaleraBurnDown -benchtime 1x ./tools/internal/hatest/
func BenchmarkGaleraBurnDown(b *testing.B) {
	ctx := context.Background()
	c := galeraCluster(ctx, b)
	nodes := openGaleraNodes(ctx, b, c, 26)
	single := testdb.MySQL(b)
	if sqlDB, err := single.DB(); err == nil {
		sqlDB.SetMaxOpenConns(26)
	}
	const rows, claimers, batch = 20000, 24, 50
	for _, strategy := range []dao.Strategy{dao.StrategyPortable, dao.StrategyFastPath} {
		for _, tc := range []struct {
			name          string
			all, claimers []*gorm.DB
			perDB         int
		}{
			{"single-server", []*gorm.DB{single}, []*gorm.DB{single}, claimers},
			{"galera-one-node", nodes, nodes[:1], claimers},
			{"galera-three-nodes", nodes, nodes, claimers / 3},
		} {
			b.Run(fmt.Sprintf("%s/%s", strategy, tc.name), func(b *testing.B) {
				var total burnResult
				for range b.N {
					r := burnDown(ctx, b, tc.all, tc.claimers, rows, tc.perDB, strategy, batch)
					if r.twice > 0 || r.never > 0 || len(r.errs) > 0 {
						b.Fatalf("%s", r)
					}
					b.Logf("%s", r)
					total.rows += r.rows
					total.claims += r.claims
					total.took += r.took
					total.certFails += r.certFails
				}
				b.ReportMetric(float64(total.rows)/total.took.Seconds(), "rows/s")
				b.ReportMetric(1000*float64(total.certFails)/float64(max(total.claims, 1)), "certfail/1000claims")
			})
		}
	}
}
