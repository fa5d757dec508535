package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// The tests of this file check the portable default claim at its edges:
// a caller's context that ends while a guarded update waits for a row lock
// another transaction holds, a lock held past the store's lock-wait limit,
// a connection killed in the middle of a claim, a context that ends just
// as a statement is handed to the driver, and many claimers contending for
// the same rows. After each, every row is checked: a row returned to the
// claimer is claimed by it in the table, and every other row is as it was.

// edgeClaim is the claim of these tests: pending rows, lowest priority
// first, marked processing by owner.
func edgeClaim(owner string, limit int) dao.ClaimRequest {
	return dao.ClaimRequest{
		Where:   dao.Eq("status", "pending"),
		Set:     dao.Set{"status": "processing", "owner": owner, "attempts": dao.Incr(1)},
		Limit:   limit,
		OrderBy: []dao.Order{dao.Asc("priority")},
	}
}

// seedOrdered inserts n pending rows with priorities 0..n-1 and returns
// their ids in claim order.
func seedOrdered(t testing.TB, s *store, n int) []int64 {
	t.Helper()
	items := make([]*job, n)
	for i := range items {
		items[i] = &job{Name: fmt.Sprintf("edge-%d", i), Status: "pending", Priority: int64(i)}
	}
	if err := s.Create(context.Background(), items...); err != nil {
		t.Fatal(err)
	}
	out := make([]int64, n)
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// checkClaimed checks that the rows returned to owner are exactly the rows
// the table shows claimed (by owner, once), and that every other row of
// all is untouched (pending, never attempted).
func checkClaimed(t *testing.T, s *store, all []int64, owner string, returned []job) {
	t.Helper()
	rows, err := s.Find(context.Background(), dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]job{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	got := ids(returned)
	for _, id := range all {
		r := byID[id]
		if slices.Contains(got, id) {
			if r.Status != "processing" || r.Owner == nil || *r.Owner != owner || r.Attempts != 1 {
				t.Errorf("PHANTOM: row %d was returned to %s but the table says status=%s owner=%v attempts=%d", id, owner, r.Status, deref(r.Owner), r.Attempts)
			}
			continue
		}
		if r.Status != "pending" || r.Owner != nil || r.Attempts != 0 {
			t.Errorf("STRANDED: row %d was returned to no one but the table says status=%s owner=%v attempts=%d", id, r.Status, deref(r.Owner), r.Attempts)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

// claimAll claims every pending row and checks that exactly want (in any
// order) come back.
func claimAll(t *testing.T, s *store, want []int64) {
	t.Helper()
	got, err := s.Claim(context.Background(), edgeClaim("after", 100))
	if err != nil {
		t.Fatalf("claiming the rows left: %v", err)
	}
	g := ids(got)
	slices.Sort(g)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("claiming the rows left returned %v, want %v", g, w)
	}
}

// holder is another session's transaction, idle after a locking read.
type holder struct {
	tx   *sql.Tx
	once sync.Once
}

// hold opens a transaction at iso on a connection of db the store does not
// use, locks the rows ids with SELECT … FOR UPDATE, and stays idle in
// transaction until release.
func hold(t *testing.T, db *gorm.DB, s *store, iso sql.IsolationLevel, ids ...int64) *holder {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sqlDB.BeginTx(context.Background(), &sql.TxOptions{Isolation: iso})
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{tx: tx}
	t.Cleanup(h.release)
	for _, id := range ids {
		var got int64
		stmt := "SELECT id FROM " + quoteTable(s) + " WHERE id = " + placeholder(s, 1) + " FOR UPDATE"
		if err := tx.QueryRowContext(context.Background(), stmt, id).Scan(&got); err != nil {
			t.Fatalf("lock row %d: %v", id, err)
		}
	}
	return h
}

func (h *holder) release() { h.once.Do(func() { _ = h.tx.Rollback() }) }

func quoteTable(s *store) string {
	if s.DB().Dialector.Name() == "mysql" {
		return "`" + s.TableName() + "`"
	}
	return `"` + s.TableName() + `"`
}

func placeholder(s *store, n int) string {
	if s.DB().Dialector.Name() == "postgres" {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// rowLockBackends are the servers with row locks, each with a store on
// the portable default.
var rowLockBackends = []backend{
	{"postgres", testdb.Postgres},
	{"mysql", testdb.MySQL},
}

var holderIsolations = []struct {
	name string
	iso  sql.IsolationLevel
}{
	{"read_committed", sql.LevelReadCommitted},
	{"repeatable_read", sql.LevelRepeatableRead},
}

// A claim whose context ends while its guarded update waits for a row
// lock another transaction holds: the store ends the update on the server
// (PostgreSQL's cancel request, KILL QUERY on MySQL and MariaDB) and reads
// its answer, so the call returns soon after the context ends, whether the
// holder would outlast the lock-wait limit (3 s here) or let go within it
// (2 s): no rows, an error wrapping context.Canceled, the held row not
// claimed, nothing claimed behind the caller's back, and the rows the
// claim did not reach still claimable. Before, the call waited for the
// holder or the limit.
func TestPortableClaimCanceledWhileWaitingForALock(t *testing.T) {
	for _, b := range rowLockBackends {
		for _, iso := range holderIsolations {
			for _, releaseAfter := range []time.Duration{5 * time.Second, 2 * time.Second} {
				outlasts := releaseAfter > 3*time.Second
				t.Run(fmt.Sprintf("%s/%s/holder_outlasts_limit=%v", b.name, iso.name, outlasts), func(t *testing.T) {
					db := b.open(t)
					s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyPortable), sqlstore.WithLockWaitLimit(3*time.Second))
					all := seedOrdered(t, s, 4)
					h := hold(t, b.open(t), s, iso.iso, all[0])
					time.AfterFunc(releaseAfter, h.release)

					const cancelAfter = 200 * time.Millisecond
					ctx, cancel := context.WithCancel(context.Background())
					time.AfterFunc(cancelAfter, cancel)
					began := time.Now()
					got, err := s.Claim(ctx, edgeClaim("me", 4))
					took := time.Since(began)
					t.Logf("claim returned %v, %v after %v", ids(got), err, took.Round(time.Millisecond))
					if !errors.Is(err, context.Canceled) {
						t.Errorf("error = %v, want context.Canceled", err)
					}
					if len(got) != 0 {
						t.Errorf("claim returned %v, want nothing (its first candidate was held until after the cancellation)", ids(got))
					}
					// The interrupt returns well before the holder lets go
					// (2 s) or the lock-wait limit (3 s) would end the wait;
					// the bound leaves room for a loaded machine (the
					// conformance suite's DeadlineBehindLock holds the
					// 250 ms target).
					if limit := cancelAfter + 1300*time.Millisecond; took > limit {
						t.Errorf("claim took %v, more than %v: the waiting update was not ended when the context was", took.Round(time.Millisecond), limit)
					}
					// Let the holder go, and give an update left running on
					// the server time to commit before the table is read.
					h.release()
					time.Sleep(300 * time.Millisecond)
					checkClaimed(t, s, all, "me", got)
					var rest []int64
					for _, id := range all {
						if !slices.Contains(ids(got), id) {
							rest = append(rest, id)
						}
					}
					claimAll(t, s, rest)
				})
			}
		}
	}
}

// A row lock held past the store's lock-wait limit, without cancellation:
// the rows claimed before the held row are returned with a retryable
// ErrBusy; the held row and the rows after it are not claimed.
func TestPortableClaimLockWaitLimit(t *testing.T) {
	for _, b := range rowLockBackends {
		for _, iso := range holderIsolations {
			t.Run(b.name+"/"+iso.name, func(t *testing.T) {
				db := b.open(t)
				sqlDB, err := db.DB()
				if err != nil {
					t.Fatal(err)
				}
				sqlDB.SetMaxOpenConns(1) // the settings read below are the claim's connection's
				s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyPortable), sqlstore.WithLockWaitLimit(time.Second))
				all := seedOrdered(t, s, 4)
				setting := "SELECT current_setting('lock_timeout')"
				if b.name == "mysql" {
					setting = "SELECT CAST(@@innodb_lock_wait_timeout AS CHAR)"
				}
				var before, after string
				if err := sqlDB.QueryRow(setting).Scan(&before); err != nil {
					t.Fatal(err)
				}
				h := hold(t, b.open(t), s, iso.iso, all[2])
				time.AfterFunc(5*time.Second, h.release)
				began := time.Now()
				got, err := s.Claim(context.Background(), edgeClaim("me", 4))
				took := time.Since(began)
				h.release()
				t.Logf("claim returned %v, %v after %v", ids(got), err, took.Round(time.Millisecond))
				if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) {
					t.Errorf("error = %v, want a retryable ErrBusy", err)
				}
				if !slices.Equal(ids(got), all[:2]) {
					t.Errorf("claim returned %v, want %v, the rows before the held one", ids(got), all[:2])
				}
				// The limit was the statement's alone: the session keeps
				// its own setting.
				if err := sqlDB.QueryRow(setting).Scan(&after); err != nil || after != before {
					t.Errorf("session lock-wait setting after the claim = %q (%v), want %q as before", after, err, before)
				}
				time.Sleep(200 * time.Millisecond)
				checkClaimed(t, s, all, "me", got)
				claimAll(t, s, all[2:])
			})
		}
	}
}

// The claimer's connection killed by the server while its guarded update
// waits for a lock (MariaDB KILL CONNECTION, PostgreSQL
// pg_terminate_backend): the rows committed before are returned, the error
// is ErrUnavailable, the update under way is rolled back, and no row is
// returned that is not claimed.
func TestPortableClaimConnectionKilled(t *testing.T) {
	for _, b := range rowLockBackends {
		t.Run(b.name, func(t *testing.T) {
			idQuery, waiting, kill := "SELECT CONNECTION_ID()",
				"SELECT COUNT(*) FROM information_schema.processlist WHERE id = ? AND info LIKE '%UPDATE%'",
				"KILL CONNECTION %d"
			if b.name == "postgres" {
				idQuery, waiting, kill = "SELECT pg_backend_pid()",
					"SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ? AND wait_event_type = 'Lock'",
					"SELECT pg_terminate_backend(%d)"
			}
			admin := b.open(t)
			db := b.open(t)
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			sqlDB.SetMaxOpenConns(1) // the claim runs on the one connection whose id is read below
			// The lock-wait limit outlasts the watcher below by far: on a
			// loaded machine (a CI run) its reads once took about 10 s to
			// see the claim wait, and the limit ended the wait first.
			s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyPortable), sqlstore.WithLockWaitLimit(45*time.Second))
			all := seedOrdered(t, s, 4)
			var connID int64
			if err := sqlDB.QueryRow(idQuery).Scan(&connID); err != nil {
				t.Fatal(err)
			}
			h := hold(t, admin, s, sql.LevelReadCommitted, all[2])
			killed := make(chan error, 1)
			go func() {
				// Kill once the claim waits for the held row's lock: the
				// rows before it are claimed and the connection runs an
				// UPDATE.
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					var done, running int64
					err := admin.Raw("SELECT COUNT(*) FROM " + quoteTable(s) + " WHERE owner = 'me'").Scan(&done).Error
					if err == nil {
						err = admin.Raw(waiting, connID).Scan(&running).Error
					}
					if err != nil {
						killed <- err
						return
					}
					if done == 2 && running == 1 {
						killed <- admin.Exec(fmt.Sprintf(kill, connID)).Error
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				killed <- errors.New("the claim never waited for the held row")
			}()
			got, err := s.Claim(context.Background(), edgeClaim("me", 4))
			if kerr := <-killed; kerr != nil {
				t.Fatalf("kill: %v", kerr)
			}
			h.release()
			t.Logf("claim whose connection was killed returned %v, %v", ids(got), err)
			if !errors.Is(err, dao.ErrUnavailable) || !dao.IsRetryable(err) {
				t.Errorf("error = %v, want a retryable ErrUnavailable", err)
			}
			if !slices.Equal(ids(got), all[:2]) {
				t.Errorf("claim returned %v, want %v, the rows committed before the kill", ids(got), all[:2])
			}
			time.Sleep(200 * time.Millisecond)
			checkClaimed(t, s, all, "me", got)
			claimAll(t, s, all[2:])
		})
	}
}

// Many claimers contending for the same rows on MySQL and MariaDB: InnoDB
// may pick a guarded update as a deadlock victim (1213); that rolls back
// the one update, which is a lost race, not an error. No claim fails and
// no row is claimed twice. The rows are the conformance suite's, whose
// claim index (status, priority) the guarded update changes.
func TestPortableClaimContentionWithoutErrors(t *testing.T) {
	db := testdb.MySQL(t)
	s := confStore(t, db, testdb.Table(t, db, "contend"), sqlstore.WithStrategy(dao.StrategyPortable))
	n := 1000
	if testing.Short() {
		n = 300
	}
	items := make([]*confJob, n)
	for i := range items {
		items[i] = &confJob{Status: "ready", Priority: i % 5, Payload: fmt.Sprintf("c-%d", i), MaxAttempts: 3, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	}
	if err := s.Create(context.Background(), items...); err != nil {
		t.Fatal(err)
	}
	const claimers = 32
	var (
		mu       sync.Mutex
		received = map[int64]int{}
		calls    int
		failures []error
		wg       sync.WaitGroup
	)
	for w := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for c := 0; ; c++ {
				got, err := s.Claim(context.Background(), dao.ClaimRequest{
					Where:   dao.Eq("status", "ready"),
					Set:     dao.Set{"status": "claimed", "locked_by": owner, "attempts": dao.Incr(1)},
					Limit:   1 + (w+c)%16,
					OrderBy: []dao.Order{dao.Asc("priority")},
				})
				mu.Lock()
				calls++
				for _, r := range got {
					received[r.ID]++
				}
				if err != nil {
					failures = append(failures, err)
				}
				mu.Unlock()
				if err != nil && !dao.IsRetryable(err) {
					return
				}
				if len(got) == 0 && err == nil {
					left, err := s.Count(context.Background(), dao.Eq("status", "ready"))
					if err != nil || left == 0 {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	dups := 0
	for _, k := range received {
		if k > 1 {
			dups++
		}
	}
	t.Logf("%d claimers, %d rows: %d calls, %d failed, %d rows received, %d received more than once", claimers, n, calls, len(failures), len(received), dups)
	for i, err := range failures {
		if i == 5 {
			t.Errorf("... %d failures in all", len(failures))
			break
		}
		t.Errorf("claim under contention failed: %v", err)
	}
	if dups > 0 || len(received) != n {
		t.Errorf("%d of %d rows received, %d more than once", len(received), n, dups)
	}
}

// A caller's context that ends just as a guarded update reaches the SQLite
// driver: a driver that skips a statement whose context is done, and
// reports the previous statement's affected-row count, must not make the
// claim return a row it did not write. The update runs on a context the
// caller's cancellation does not reach, so it is written and returned, and
// the claim stops there with context.Canceled.
func TestPortableClaimSQLiteCanceledAtSend(t *testing.T) {
	db := openHookedSQLite(t, 0)
	s := newStore(t, db, sqlstore.WithStrategy(dao.StrategyPortable))
	all := seedOrdered(t, s, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := s.Claim(cancelAtSend(ctx, cancel), edgeClaim("me", 4))
	t.Logf("claim canceled as its first update was sent returned %v, %v", ids(got), err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if !slices.Equal(ids(got), all[:1]) {
		t.Errorf("claim returned %v, want %v: the one update sent", ids(got), all[:1])
	}
	checkClaimed(t, s, all, "me", got)
	claimAll(t, s, all[1:])
}
