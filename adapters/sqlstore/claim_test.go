package sqlstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mysqlbackend "github.com/claimstore/claimstore/adapters/mysql"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

func claimReq(owner string, limit int) dao.ClaimRequest {
	return dao.ClaimRequest{
		Where:   dao.Eq("status", "pending"),
		Set:     dao.Set{"status": "processing", "owner": owner, "attempts": dao.Incr(1)},
		Limit:   limit,
		OrderBy: []dao.Order{dao.Desc("priority")},
	}
}

// The claim returns the rows in their post-claim state, in order, and the
// database holds the same state.
func TestClaimReturnsPostClaimStateInOrder(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		items := seed(t, s, 6) // priorities 0,1,2,0,1,2
		got, err := s.Claim(ctx, claimReq("w1", 4))
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{items[2].ID, items[5].ID, items[1].ID, items[4].ID}; !equal(ids(got), want) {
			t.Fatalf("claimed %v, want %v", ids(got), want)
		}
		for _, r := range got {
			if r.Status != "processing" || r.Owner == nil || *r.Owner != "w1" || r.Attempts != 1 {
				t.Fatalf("returned row not in post-claim state: %+v", r)
			}
			stored, err := s.Get(ctx, r.ID)
			if err != nil || stored.Status != "processing" || stored.Attempts != 1 {
				t.Fatalf("stored row %+v, %v", stored, err)
			}
		}
		rest, err := s.Claim(ctx, claimReq("w2", 10))
		if err != nil || len(rest) != 2 {
			t.Fatalf("second claim: %d rows, %v", len(rest), err)
		}
		none, err := s.Claim(ctx, claimReq("w3", 10))
		if err != nil || len(none) != 0 {
			t.Fatalf("third claim: %v, %v", ids(none), err)
		}
		if rows, err := s.Claim(ctx, claimReq("w4", 0)); rows != nil || err != nil {
			t.Fatalf("Limit 0: %v, %v", rows, err)
		}
		if _, err := s.Claim(ctx, dao.ClaimRequest{Limit: 1}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("empty Set: %v", err)
		}
	})
}

// When the Set changes an ordering column, the rows still come back in
// the order in which they were chosen (the pre-claim values).
func TestClaimOrderWhenSetChangesOrderColumn(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		items := seed(t, s, 4) // priorities 0,1,2,0
		got, err := s.Claim(ctx, dao.ClaimRequest{
			Where:   dao.Eq("status", "pending"),
			Set:     dao.Set{"status": "processing", "priority": int64(9)},
			Limit:   3,
			OrderBy: []dao.Order{dao.Asc("priority")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{items[0].ID, items[3].ID, items[1].ID}; !equal(ids(got), want) {
			t.Fatalf("claimed %v, want %v", ids(got), want)
		}
		for _, r := range got {
			if r.Priority != 9 {
				t.Fatalf("row %d priority %d, want 9", r.ID, r.Priority)
			}
		}
	})
}

// Claim on a store bound to a transaction is refused and changes nothing;
// the other methods run inside the transaction.
func TestClaimInTransaction(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		seed(t, s, 3)
		err := s.DB().Transaction(func(tx *gorm.DB) error {
			ts := s.WithTx(tx)
			rows, err := ts.Claim(ctx, claimReq("w1", 10))
			if !errors.Is(err, dao.ErrInTransaction) || rows != nil {
				t.Errorf("Claim in WithTx = %v, %v; want ErrInTransaction", rows, err)
			}
			// a store built on the transaction handle detects it too
			ns, err := sqlstore.New[job](tx, sqlstore.WithTable(s.TableName()))
			if err != nil {
				return err
			}
			if _, err := ns.Claim(ctx, claimReq("w1", 10)); !errors.Is(err, dao.ErrInTransaction) {
				t.Errorf("Claim on New(tx) = %v; want ErrInTransaction", err)
			}
			if err := ts.Create(ctx, &job{Name: "in-tx", Status: "pending"}); err != nil {
				return err
			}
			if n, err := ts.Count(ctx, dao.Criteria{}); err != nil || n != 4 {
				t.Errorf("Count in tx = %d, %v; want 4", n, err)
			}
			return errors.New("roll back")
		})
		if err == nil || err.Error() != "roll back" {
			t.Fatalf("transaction: %v", err)
		}
		if n, err := s.Count(ctx, dao.Eq("status", "pending")); err != nil || n != 3 {
			t.Fatalf("after rollback: %d pending, %v; want 3 (nothing claimed, insert rolled back)", n, err)
		}
		if _, err := s.WithTx(nil).Count(ctx, dao.Criteria{}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("WithTx(nil): %v", err)
		}
	})
}

// fastStores returns, per database, a function that opens a store on the
// fast path in the subtest it is given (which skips when its server is
// down): PostgreSQL and SQLite (their default), MySQL or MariaDB opted in.
func fastStores() map[string]func(*testing.T) *store {
	return map[string]func(*testing.T) *store{
		"postgres": func(t *testing.T) *store { return newStore(t, testdb.Postgres(t)) },
		"mysql": func(t *testing.T) *store {
			return newStore(t, testdb.MySQL(t), sqlstore.WithStrategy(dao.StrategyFastPath))
		},
		"sqlite": func(t *testing.T) *store {
			return newStore(t, testdb.SQLite(t), sqlstore.WithStrategy(dao.StrategyFastPath))
		},
	}
}

// On the fast path, concurrent claimers take disjoint rows and together
// take every row.
func TestFastPathConcurrentClaimsDisjoint(t *testing.T) {
	for name, open := range fastStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			if s.Capabilities().Strategy != dao.StrategyFastPath {
				t.Fatal("store not on the fast path")
			}
			ctx := context.Background()
			const rows, workers = 200, 8
			batch := make([]*job, rows)
			for i := range batch {
				batch[i] = &job{Name: "c" + strconv.Itoa(i), Status: "pending", Priority: int64(i % 5)}
			}
			if err := s.Create(ctx, batch...); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[int64]int{}
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						got, err := s.Claim(ctx, claimReq("w", 7))
						if err != nil {
							t.Error(err)
							return
						}
						if len(got) > 7 {
							t.Errorf("claimed %d rows with limit 7", len(got))
						}
						if len(got) == 0 {
							// SKIP LOCKED may come back empty while other
							// claimers hold the last rows; stop when none
							// is left.
							if n, err := s.Count(ctx, dao.Eq("status", "pending")); err != nil || n == 0 {
								return
							}
							continue
						}
						mu.Lock()
						for _, r := range got {
							seen[r.ID]++
							if r.Status != "processing" || r.Attempts != 1 {
								t.Errorf("row %d returned in state %+v", r.ID, r)
							}
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(seen) != rows {
				t.Fatalf("claimed %d distinct rows, want %d", len(seen), rows)
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("row %d claimed %d times", id, n)
				}
			}
		})
	}
}

// A row another transaction holds locked is skipped without waiting, and
// the fast path costs the round trips Capabilities states.
func TestFastPathSkipsLockedRowsAndCountsRoundTrips(t *testing.T) {
	for name, opts := range map[string][]sqlstore.Option{
		"postgres": nil,
		"mysql":    {sqlstore.WithStrategy(dao.StrategyFastPath)},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dsn := testdb.PostgresDSN()
			if name == "mysql" {
				testdb.MySQL(t)
				dsn = testdb.MySQLDSN()
			} else {
				testdb.Postgres(t)
			}
			var c roundtrip.Counter
			db, err := roundtrip.OpenGorm(ctx, name, dsn, &c, testdb.Config())
			if err != nil {
				t.Fatal(err)
			}
			testdb.CloseAtCleanup(t, db)
			s := newStore(t, db, opts...)
			items := seed(t, s, 5) // priorities 0,1,2,0,1
			held := db.Begin()
			if held.Error != nil {
				t.Fatal(held.Error)
			}
			defer held.Rollback()
			var locked []int64
			if err := held.Table(s.TableName()).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
				Where("id = ?", items[2].ID).Pluck("id", &locked).Error; err != nil || len(locked) != 1 {
				t.Fatalf("lock row: %v %v", locked, err)
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			// A claim that finds nothing readies the connection: on MySQL
			// and MariaDB the first claim with a deadline on a connection
			// reads its thread id for KILL QUERY (one round trip, once).
			if none, err := s.Claim(lctx, dao.ClaimRequest{Where: dao.Eq("id", -1), Set: dao.Set{"status": "processing"}, Limit: 1}); err != nil || len(none) != 0 {
				t.Fatalf("warm-up claim: %v, %v", none, err)
			}
			c.Reset()
			got, err := s.Claim(lctx, claimReq("w", 3))
			if err != nil {
				t.Fatal(err)
			}
			if want := []int64{items[1].ID, items[4].ID, items[0].ID}; !equal(ids(got), want) {
				t.Fatalf("claimed %v with row %d locked, want %v", ids(got), items[2].ID, want)
			}
			if n, want := c.Reset(), int64(s.Capabilities().ClaimRoundTrips.For(3)); n != want {
				t.Fatalf("claim took %d round trips, Capabilities says %d", n, want)
			}
		})
	}
}

// With a server default isolation stricter than READ COMMITTED, the fast
// path runs in an explicit READ COMMITTED transaction: three round trips,
// and Capabilities says so.
func TestPostgresStricterDefaultIsolation(t *testing.T) {
	testdb.Postgres(t) // skip or fail like every Postgres test when unreachable
	dsn := testdb.PostgresDSN()
	if strings.Contains(dsn, "://") {
		if strings.Contains(dsn, "?") {
			dsn += "&default_transaction_isolation=serializable"
		} else {
			dsn += "?default_transaction_isolation=serializable"
		}
	} else {
		dsn += " default_transaction_isolation=serializable"
	}
	var c roundtrip.Counter
	db := counted(t, "postgres", dsn, &c)
	var level string
	if err := db.Raw("SHOW transaction_isolation").Scan(&level).Error; err != nil || level != "serializable" {
		t.Fatalf("session isolation %q, %v; the DSN parameter did not apply", level, err)
	}
	s := newStore(t, db)
	if got := s.Capabilities().ClaimRoundTrips; got != (dao.RoundTrips{Fixed: 3}) {
		t.Fatalf("ClaimRoundTrips = %+v, want {3 0}", got)
	}
	seed(t, s, 5)
	c.Reset()
	got, err := s.Claim(context.Background(), claimReq("w", 3))
	if err != nil || len(got) != 3 {
		t.Fatalf("claim: %d rows, %v", len(got), err)
	}
	if n := c.Reset(); n != 3 {
		t.Fatalf("claim took %d round trips, want 3", n)
	}
}

// MySQL and MariaDB report changed rows, not matched rows. A claim whose
// Set leaves the row as it was still claims it (one extra COUNT per such
// row), and a row lost to another claimer is still skipped.
func TestMySQLUnchangedSetStillClaims(t *testing.T) {
	var c roundtrip.Counter
	db := counted(t, "mysql", testdb.MySQLDSN(), &c)
	s := newStore(t, db)
	ctx := context.Background()
	items := seed(t, s, 4)
	noop := dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "pending", "attempts": dao.Incr(0)}, Limit: 3}
	c.Reset()
	got, err := s.Claim(ctx, noop)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{items[0].ID, items[1].ID, items[2].ID}; !equal(ids(got), want) {
		t.Fatalf("claimed %v, want %v", ids(got), want)
	}
	// The store's first claim also reads the table's primary key once
	// (information_schema), to read rows through it.
	if n := c.Reset(); n != 1+1+2*3 {
		t.Fatalf("%d round trips, want 8 (the primary key read once, the candidate read, and update + count per row)", n)
	}

	// Lose items[1] between the candidate read and its guarded update.
	other, err := sqlstore.New[job](testdb.MySQL(t), sqlstore.WithTable(s.TableName()))
	if err != nil {
		t.Fatal(err)
	}
	lose := dao.WithClaimTrace(ctx, &dao.ClaimTrace{CandidatesRead: func(ctx context.Context, _ []any) {
		if _, err := other.Update(ctx, dao.Eq("id", items[1].ID), dao.Set{"status": "taken"}); err != nil {
			t.Error(err)
		}
	}})
	got, err = s.Claim(lose, noop)
	if err != nil {
		t.Fatal(err)
	}
	// the candidates were items 0, 1, 2; the portable default does not
	// read further when it loses one
	if want := []int64{items[0].ID, items[2].ID}; !equal(ids(got), want) {
		t.Fatalf("claimed %v after a lost race, want %v", ids(got), want)
	}

	// With a Set that changes the row no extra query is made.
	if _, err := s.Update(ctx, dao.Criteria{}, dao.Set{"status": "pending"}); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	got, err = s.Claim(ctx, claimReq("w", 2))
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v, %v", ids(got), err)
	}
	if n := c.Reset(); n != 3 {
		t.Fatalf("%d round trips, want 3", n)
	}
}

// With clientFoundRows=true (as Open sets it) MySQL reports matched rows:
// Update is one statement and a claim whose Set leaves rows unchanged is
// 1 + N round trips with no extra query.
func TestMySQLClientFoundRows(t *testing.T) {
	testdb.MySQL(t) // skip or fail like every MySQL test when unreachable
	dsn, err := mysqlbackend.DSN(testdb.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	var c roundtrip.Counter
	db := counted(t, "mysql", dsn, &c)
	s := newStore(t, db)
	ctx := context.Background()
	seed(t, s, 4)
	c.Reset()
	if n, err := s.Update(ctx, dao.Criteria{}, dao.Set{"status": "pending"}); err != nil || n != 4 {
		t.Fatalf("Update = %d, %v; want 4", n, err)
	}
	if n := c.Reset(); n != 1 {
		t.Fatalf("Update took %d round trips, want 1", n)
	}
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "pending"}, Limit: 3})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim: %v, %v", ids(got), err)
	}
	if n := c.Reset(); n != 1+4 {
		t.Fatalf("claim took %d round trips, want 5 (the store's first claim reads the primary key once)", n)
	}
}

// Without clientFoundRows, Update still returns the matched count, at the
// documented price of a locking count in a transaction.
func TestMySQLUpdateWithoutClientFoundRows(t *testing.T) {
	var c roundtrip.Counter
	db := counted(t, "mysql", testdb.MySQLDSN(), &c)
	s := newStore(t, db)
	ctx := context.Background()
	seed(t, s, 4)
	c.Reset()
	if n, err := s.Update(ctx, dao.Ne("name", "job-a"), dao.Set{"status": "pending"}); err != nil || n != 3 {
		t.Fatalf("Update = %d, %v; want 3", n, err)
	}
	if n := c.Reset(); n != 4 {
		t.Fatalf("Update took %d round trips, want 4 (BEGIN, locking count, UPDATE, COMMIT)", n)
	}
	err := s.DB().Transaction(func(tx *gorm.DB) error {
		n, err := s.WithTx(tx).Update(ctx, dao.Criteria{}, dao.Set{"status": "pending"})
		if err == nil && n != 4 {
			t.Errorf("Update in a transaction = %d, want 4", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An Update whose statement fails after the locking count (here on a
// unique index) changed nothing, and says so: it returns 0 with the error,
// not the count of the rolled-back transaction.
func TestMySQLFailedUpdateWithoutClientFoundRowsCountsNothing(t *testing.T) {
	var c roundtrip.Counter
	db := counted(t, "mysql", testdb.MySQLDSN(), &c)
	s := newStore(t, db)
	ctx := context.Background()
	seed(t, s, 2)
	n, err := s.Update(ctx, dao.Eq("name", "job-b"), dao.Set{"name": "job-a"})
	if !errors.Is(err, dao.ErrDuplicate) || n != 0 {
		t.Fatalf("Update onto a duplicate name = %d, %v; want 0 and ErrDuplicate", n, err)
	}
	err = s.DB().Transaction(func(tx *gorm.DB) error {
		n, err := s.WithTx(tx).Update(ctx, dao.Eq("name", "job-b"), dao.Set{"name": "job-a"})
		if !errors.Is(err, dao.ErrDuplicate) || n != 0 {
			t.Errorf("Update onto a duplicate name in a transaction = %d, %v; want 0 and ErrDuplicate", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// counted opens backend at dsn with every round trip counted by c, closes
// the pool at cleanup, and skips (fails when required) if the server
// cannot be reached.
func counted(t *testing.T, backend, dsn string, c *roundtrip.Counter) *gorm.DB {
	t.Helper()
	db, err := roundtrip.OpenGorm(context.Background(), backend, dsn, c, testdb.Config())
	if err != nil {
		testdb.Unreachable(t, backend, err)
	}
	testdb.CloseAtCleanup(t, db)
	return db
}
