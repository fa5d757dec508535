package sqlstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// job is the adapter tests' model: a unique name, a nullable lease and an
// integer counter.
type job struct {
	ID          int64      `gorm:"primaryKey"`
	Name        string     `gorm:"size:64;uniqueIndex"`
	Status      string     `gorm:"size:32;index"`
	Priority    int64      `gorm:"not null"`
	Attempts    int64      `gorm:"not null"`
	Owner       *string    `gorm:"size:64"`
	LockedUntil *time.Time `gorm:"precision:6"`
}

type backend struct {
	name string
	open func(testing.TB) *gorm.DB
}

var backends = []backend{
	{"sqlite", testdb.SQLite},
	{"postgres", testdb.Postgres},
	{"mysql", testdb.MySQL},
}

// each runs f once per backend in a subtest with a fresh, migrated store.
func each(t *testing.T, f func(t *testing.T, s *store), opts ...sqlstore.Option) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			f(t, newStore(t, db, opts...))
		})
	}
}

// store is a store of the tests, with the name of its table.
type store struct {
	*dao.Table[job]
	name string
}

// DB returns the GORM handle the store runs on.
func (s *store) DB() *gorm.DB {
	var db *gorm.DB
	if !s.As(&db) {
		panic("a SQL store gives its *gorm.DB to As")
	}
	return db
}

// TableName returns the store's table.
func (s *store) TableName() string { return s.name }

// Dialect returns the store's dialect.
func (s *store) Dialect() dialects.Name {
	var n dialects.Name
	if !s.As(&n) {
		panic("a SQL store gives its dialect to As")
	}
	return n
}

// WithTx returns the store bound to tx.
func (s *store) WithTx(tx any) *store { return &store{s.Table.WithTx(tx), s.name} }

func newStore(t testing.TB, db *gorm.DB, opts ...sqlstore.Option) *store {
	t.Helper()
	table := testdb.Table(t, db, "sqlstore")
	s, err := sqlstore.New[job](db, append(opts, sqlstore.WithTable(table))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &store{s, table}
}

func seed(t testing.TB, s dao.Store[job], n int) []*job {
	t.Helper()
	items := make([]*job, n)
	for i := range items {
		items[i] = &job{Name: "job-" + string(rune('a'+i)), Status: "pending", Priority: int64(i % 3)}
	}
	if err := s.Create(context.Background(), items...); err != nil {
		t.Fatal(err)
	}
	return items
}

func ids(rows []job) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCRUD(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		items := seed(t, s, 6)
		for i, it := range items {
			if it.ID == 0 || (i > 0 && it.ID <= items[i-1].ID) {
				t.Fatalf("generated ids not filled in ascending order: %d after %v", it.ID, items[:i])
			}
		}

		got, err := s.Get(ctx, items[2].ID)
		if err != nil || got.Name != items[2].Name || got.Status != "pending" {
			t.Fatalf("Get = %+v, %v", got, err)
		}
		if _, err := s.Get(ctx, int64(1<<40)); !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("Get(missing) error = %v, want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, "not a number"); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("Get(bad id) error = %v, want ErrInvalidArgument", err)
		}

		// priorities are 0,1,2,0,1,2: order by priority desc, id asc
		rows, err := s.Find(ctx, dao.Query{Where: dao.Ge("priority", 1), OrderBy: []dao.Order{dao.Desc("priority")}, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{items[2].ID, items[5].ID, items[1].ID}; !equal(ids(rows), want) {
			t.Fatalf("Find = %v, want %v", ids(rows), want)
		}
		all, err := s.Find(ctx, dao.Query{})
		if err != nil || len(all) != 6 {
			t.Fatalf("Find(all) = %d rows, %v", len(all), err)
		}

		n, err := s.Count(ctx, dao.In("priority", 0, 2))
		if err != nil || n != 4 {
			t.Fatalf("Count = %d, %v; want 4", n, err)
		}

		n, err = s.Update(ctx, dao.Eq("priority", 0), dao.Set{"status": "failed", "attempts": dao.Incr(2)})
		if err != nil || n != 2 {
			t.Fatalf("Update = %d, %v; want 2", n, err)
		}
		got, _ = s.Get(ctx, items[3].ID)
		if got.Status != "failed" || got.Attempts != 2 {
			t.Fatalf("after Update: %+v", got)
		}
		if _, err := s.Update(ctx, dao.Criteria{}, dao.Set{}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("Update(empty set) error = %v", err)
		}

		n, err = s.Delete(ctx, dao.Ne("status", "failed"), 3)
		if err != nil || n != 3 {
			t.Fatalf("Delete = %d, %v; want 3", n, err)
		}
		left, _ := s.Find(ctx, dao.Query{})
		// the non-failed rows are items 1, 2, 4, 5; the three smallest ids go
		if want := []int64{items[0].ID, items[3].ID, items[5].ID}; !equal(ids(left), want) {
			t.Fatalf("after Delete: %v, want %v", ids(left), want)
		}
		if _, err := s.Delete(ctx, dao.Criteria{}, 0); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("Delete(limit 0) error = %v", err)
		}
		if _, err := s.Find(ctx, dao.Query{Where: dao.Eq("nope", 1)}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("Find(unknown field) error = %v", err)
		}
		if err := s.Create(ctx, nil); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("Create(nil) error = %v", err)
		}
	})
}

// NULLs of a nullable ordering column sort as in PostgreSQL on every
// dialect: last ascending, first descending.
func TestNullOrdering(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		items := seed(t, s, 3)
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := s.Update(ctx, dao.Eq("id", items[0].ID), dao.Set{"locked_until": t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, dao.Eq("id", items[2].ID), dao.Set{"locked_until": t0}); err != nil {
			t.Fatal(err)
		}
		asc, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("locked_until")}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{items[2].ID, items[0].ID, items[1].ID}; !equal(ids(asc), want) {
			t.Errorf("ascending = %v, want %v", ids(asc), want)
		}
		desc, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Desc("locked_until")}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{items[1].ID, items[0].ID, items[2].ID}; !equal(ids(desc), want) {
			t.Errorf("descending = %v, want %v", ids(desc), want)
		}
	})
}

func TestCapabilities(t *testing.T) {
	want := map[dialects.Name]dao.Capabilities{
		dialects.Postgres: {Backend: "postgres", Strategy: dao.StrategyFastPath, Transactions: true, DatabaseClock: true, ClaimRoundTrips: dao.RoundTrips{Fixed: 1}, LostRace: dao.LostRaceSkip,
			ClaimTimeout: sqlstore.DefaultClaimTimeout},
		dialects.MariaDB: {Backend: "mariadb", Strategy: dao.StrategyPortable, Transactions: true, DatabaseClock: true, ClaimRoundTrips: dao.RoundTrips{Fixed: 1, PerRow: 1}, LostRace: dao.LostRaceSkip,
			ClaimTimeout: sqlstore.DefaultClaimTimeout, LockWaitLimit: sqlstore.DefaultLockWaitLimit},
		dialects.MySQL: {Backend: "mysql", Strategy: dao.StrategyPortable, Transactions: true, DatabaseClock: true, ClaimRoundTrips: dao.RoundTrips{Fixed: 1, PerRow: 1}, LostRace: dao.LostRaceSkip,
			ClaimTimeout: sqlstore.DefaultClaimTimeout},
		dialects.SQLite: {Backend: "sqlite", Strategy: dao.StrategyFastPath, Transactions: true, DatabaseClock: true, ClaimRoundTrips: dao.RoundTrips{Fixed: 1}, LostRace: dao.LostRaceBusy},
	}
	each(t, func(t *testing.T, s *store) {
		got := s.Capabilities()
		got.Collation = dao.Collation{} // TestCollationDeclared checks it
		if got != want[s.Dialect()] {
			t.Errorf("Capabilities = %+v, want %+v", got, want[s.Dialect()])
		}
	})
	t.Run("postgres-without-fast-path", func(t *testing.T) {
		s := newStore(t, testdb.Postgres(t), sqlstore.WithStrategy(dao.StrategyPortable))
		if got := s.Capabilities(); got.Strategy != dao.StrategyPortable || got.ClaimRoundTrips != (dao.RoundTrips{Fixed: 1, PerRow: 1}) ||
			got.LockWaitLimit != sqlstore.DefaultLockWaitLimit {
			t.Errorf("Capabilities = %+v", got)
		}
	})
	t.Run("sqlite-without-fast-path", func(t *testing.T) {
		s := newStore(t, testdb.SQLite(t), sqlstore.WithStrategy(dao.StrategyPortable))
		if got := s.Capabilities(); got.Strategy != dao.StrategyPortable || got.ClaimRoundTrips != (dao.RoundTrips{Fixed: 1, PerRow: 1}) ||
			got.LostRace != dao.LostRaceBusy {
			t.Errorf("Capabilities = %+v", got)
		}
	})
}

func TestNewRejects(t *testing.T) {
	db := testdb.SQLite(t)
	if _, err := sqlstore.New[job](nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v", err)
	}
	if _, err := sqlstore.New[job](db, sqlstore.WithTable("claimed")); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("New(reserved table) = %v", err)
	}
	if _, err := sqlstore.New[job](db, sqlstore.WithStrategy(dao.Strategy(99))); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("New(unknown strategy) = %v", err)
	}
	type noPK struct{ A, B string }
	if _, err := sqlstore.New[noPK](db); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("New(no primary key) = %v", err)
	}
}

// Update returns the rows it matched, also those that already held the
// values.
func TestUpdateCountsMatchedRows(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		seed(t, s, 3)
		n, err := s.Update(ctx, dao.Criteria{}, dao.Set{"status": "pending"})
		if err != nil || n != 3 {
			t.Fatalf("Update to the values held = %d, %v; want 3", n, err)
		}
		n, err = s.Update(ctx, dao.Eq("status", "none"), dao.Set{"status": "x"})
		if err != nil || n != 0 {
			t.Fatalf("Update matching nothing = %d, %v; want 0", n, err)
		}
	})
}

// Times written and compared in different zones compare as instants on
// every dialect (SQLite stores them as text: the store writes and binds
// them in UTC).
func TestTimesAcrossZones(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		west := time.FixedZone("UTC-7", -7*3600)
		east := time.FixedZone("UTC+9", 9*3600)
		base := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
		at := func(d time.Duration, z *time.Location) *time.Time { v := base.Add(d).In(z); return &v }
		items := []*job{
			{Name: "a", Status: "pending", LockedUntil: at(-2*time.Hour, west)},
			{Name: "b", Status: "pending", LockedUntil: at(-time.Minute, east)},
			{Name: "c", Status: "pending", LockedUntil: at(time.Minute, west)},
			{Name: "d", Status: "pending", LockedUntil: at(2*time.Hour, east)},
		}
		if err := s.Create(ctx, items...); err != nil {
			t.Fatal(err)
		}
		for _, probe := range []time.Time{base, base.In(west), base.In(east)} {
			rows, err := s.Find(ctx, dao.Query{Where: dao.Lt("locked_until", probe), OrderBy: []dao.Order{dao.Asc("locked_until")}})
			if err != nil {
				t.Fatal(err)
			}
			if want := []int64{items[0].ID, items[1].ID}; !equal(ids(rows), want) {
				t.Errorf("locked_until < %v: %v, want %v", probe, ids(rows), want)
			}
			if n, err := s.Count(ctx, dao.Eq("locked_until", *at(time.Minute, east))); err != nil || n != 1 {
				t.Errorf("Eq in another zone: %d, %v; want 1", n, err)
			}
		}
		// a Set in another zone is stored as the same instant
		if _, err := s.Update(ctx, dao.Eq("id", items[3].ID), dao.Set{"locked_until": base.Add(-3 * time.Hour).In(east)}); err != nil {
			t.Fatal(err)
		}
		first, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("locked_until")}, Limit: 1})
		if err != nil || len(first) != 1 || first[0].ID != items[3].ID {
			t.Fatalf("earliest after Update: %v, %v; want %d", ids(first), err, items[3].ID)
		}
	})
}

// A Create that needs several INSERTs is atomic: a duplicate in the last
// one leaves nothing inserted; without it every row is inserted with its
// id. A small GORM CreateBatchSize forces the batches cheaply; the
// dialect's bound-value limit splits the same way (conformance inserts
// 8,000 rows).
func TestCreateInBatchesIsAtomic(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t).Session(&gorm.Session{CreateBatchSize: 4})
			s := newStore(t, db)
			ctx := context.Background()
			const n = 10 // three INSERTs
			items := make([]*job, n)
			for i := range items {
				items[i] = &job{Name: "b" + strconv.Itoa(i), Status: "pending"}
			}
			items[n-1].Name = items[0].Name
			if err := s.Create(ctx, items...); !errors.Is(err, dao.ErrDuplicate) {
				t.Fatalf("Create with a duplicate in the last batch: %v", err)
			}
			if c, err := s.Count(ctx, dao.Criteria{}); err != nil || c != 0 {
				t.Fatalf("after a failed Create: %d rows, %v; want 0", c, err)
			}
			for i := range items {
				items[i] = &job{Name: "b" + strconv.Itoa(i), Status: "pending"}
			}
			if err := s.Create(ctx, items...); err != nil {
				t.Fatal(err)
			}
			if c, err := s.Count(ctx, dao.Criteria{}); err != nil || c != n {
				t.Fatalf("Count = %d, %v; want %d", c, err, n)
			}
			for i := 1; i < n; i++ {
				if items[i].ID <= items[i-1].ID {
					t.Fatalf("ids not filled in order: %d after %d", items[i].ID, items[i-1].ID)
				}
			}
		})
	}
}
