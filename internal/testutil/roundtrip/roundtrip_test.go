package roundtrip_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

type task struct {
	ID       int64  `gorm:"primaryKey"`
	Status   string `gorm:"size:32"`
	Priority int64
	Owner    string `gorm:"size:32"`
}

// open returns a counting GORM handle on backend, skipping (or failing,
// when required) like internal/testutil/testdb when the server is unreachable.
func open(t *testing.T, backend string, c *roundtrip.Counter) *gorm.DB {
	t.Helper()
	var dsn string
	switch backend {
	case "postgres":
		dsn = testdb.PostgresDSN()
	case "mysql":
		dsn = mysqlDSN(t, true)
	case "sqlite":
		dsn = sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "rt.db"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := roundtrip.OpenGorm(ctx, backend, dsn, c, testdb.Config())
	if err != nil {
		if backend == "sqlite" {
			t.Fatal(err)
		}
		testdb.Unreachable(t, backend, err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

// mysqlDSN returns the MySQL test DSN ($CLAIMSTORE_MYSQL_DSN or the
// local server) with interpolateParams set to interpolate.
func mysqlDSN(t *testing.T, interpolate bool) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.MySQLDSN())
	if err != nil {
		t.Fatalf("%s: %v", testdb.EnvMySQL, err)
	}
	cfg.InterpolateParams = interpolate
	return cfg.FormatDSN()
}

func TestCountsEachCall(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var c roundtrip.Counter
			db := open(t, backend, &c)
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			c.Reset()
			step := func(what string, want int64, f func() error) {
				t.Helper()
				if err := f(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got := c.Reset(); got != want {
					t.Errorf("%s: counted %d, want %d", what, got, want)
				}
			}
			step("exec", 1, func() error { _, err := sqlDB.ExecContext(ctx, "SELECT 1"); return err })
			step("query", 1, func() error {
				var n int
				return sqlDB.QueryRowContext(ctx, "SELECT 2").Scan(&n)
			})
			step("begin+exec+commit", 3, func() error {
				tx, err := sqlDB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
					return err
				}
				return tx.Commit()
			})
			step("begin+rollback", 2, func() error {
				tx, err := sqlDB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				return tx.Rollback()
			})
			// SQLite prepares in the process: the prepare is not counted
			prepared := int64(3)
			if backend == "sqlite" {
				prepared = 2
			}
			step("prepare+exec+exec", prepared, func() error {
				st, err := sqlDB.PrepareContext(ctx, "SELECT 1")
				if err != nil {
					return err
				}
				defer st.Close()
				if _, err := st.ExecContext(ctx); err != nil {
					return err
				}
				_, err = st.ExecContext(ctx)
				return err
			})
		})
	}
}

// Without interpolateParams, go-sql-driver answers an Exec with arguments
// with driver.ErrSkip and database/sql prepares and executes instead: two
// round trips (the ErrSkip is not counted). With it, one.
func TestMySQLInterpolateParams(t *testing.T) {
	var c roundtrip.Counter
	db := open(t, "mysql", &c) // with interpolateParams=true
	sqlDB, _ := db.DB()
	ctx := context.Background()
	c.Reset()
	if _, err := sqlDB.ExecContext(ctx, "SELECT ?", 1); err != nil {
		t.Fatal(err)
	}
	if got := c.Reset(); got != 1 {
		t.Errorf("interpolated exec counted %d, want 1", got)
	}

	var c2 roundtrip.Counter
	plain, err := roundtrip.Open("mysql", mysqlDSN(t, false), &c2)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.ExecContext(ctx, "SELECT ?", 1); err != nil {
		t.Fatal(err)
	}
	if got := c2.Reset(); got != 2 {
		t.Errorf("prepared exec counted %d, want 2 (prepare, execute)", got)
	}
}

// A claim of N rows on the portable default is exactly 1 + N round trips;
// on the PostgreSQL and SQLite fast paths (their default) it is 1.
func TestClaimRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		backend string
		opts    []sqlstore.Option
		want    func(n int) int64
	}{
		{"sqlite", []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}, func(n int) int64 { return int64(1 + n) }},
		{"sqlite", nil, func(int) int64 { return 1 }},
		{"postgres", []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}, func(n int) int64 { return int64(1 + n) }},
		{"postgres", nil, func(int) int64 { return 1 }},
	} {
		t.Run(fmt.Sprintf("%s/fast=%v", tc.backend, tc.opts == nil), func(t *testing.T) {
			var c roundtrip.Counter
			c.Record(true)
			db := open(t, tc.backend, &c)
			table := testdb.Table(t, db, "rt")
			s, err := sqlstore.New[task](db, append(tc.opts, sqlstore.WithTable(table))...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			items := make([]*task, 10)
			for i := range items {
				items[i] = &task{Status: "pending", Priority: int64(i % 3)}
			}
			if err := s.Create(ctx, items...); err != nil {
				t.Fatal(err)
			}
			req := dao.ClaimRequest{
				Where:   dao.Eq("status", "pending"),
				Set:     dao.Set{"status": "claimed", "owner": "w"},
				OrderBy: []dao.Order{dao.Desc("priority")},
			}
			for _, n := range []int{1, 4, 5} {
				req.Limit = n
				c.Reset()
				got, err := s.Claim(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != n {
					t.Fatalf("claimed %d rows, want %d", len(got), n)
				}
				sent := c.Recorded()
				if rt := c.Reset(); rt != tc.want(n) {
					t.Errorf("claim of %d rows: %d round trips, want %d: %q", n, rt, tc.want(n), sent)
				}
				if caps := s.Capabilities().ClaimRoundTrips; int64(caps.For(n)) != tc.want(n) {
					t.Errorf("Capabilities().ClaimRoundTrips = %v, disagrees with %d for %d rows", caps, tc.want(n), n)
				}
			}
		})
	}
}
