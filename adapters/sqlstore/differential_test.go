package sqlstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/difftest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// diffIterations is the number of generated cases per backend (some five
// calls each): a few seconds per backend, also under the race detector.
func diffIterations() int {
	if testing.Short() {
		return 50
	}
	return 200
}

// diffTarget returns a migrated store of difftest.Row over a fresh table
// of db, for difftest.Run.
func diffTarget(t *testing.T, db *gorm.DB, opts ...sqlstore.Option) difftest.Target {
	t.Helper()
	table := testdb.Table(t, db, "diff")
	s, err := sqlstore.New[difftest.Row](db, append(opts, sqlstore.WithTable(table))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var name dialects.Name
	if !s.As(&name) {
		t.Fatal("a SQL store gives its dialect to As")
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		t.Fatal(err)
	}
	tbl := dialects.Table{Name: table, PrimaryKey: "id"}
	return difftest.Target{
		Store: s,
		Reset: func(ctx context.Context) error {
			return db.WithContext(ctx).Exec("DELETE FROM " + r.QuoteTable(table)).Error
		},
		Explain: func(op difftest.Op) string {
			if op.Where.IsAll() {
				return ""
			}
			st, err := r.Count(tbl, op.Where)
			if err != nil {
				return err.Error()
			}
			_, w, _ := strings.Cut(st.SQL, " WHERE ")
			return "WHERE " + w
		},
	}
}

// mysqlFoundRows opens the MySQL/MariaDB test database with Open, which
// sets clientFoundRows: Update and the guarded claim write then trust the
// affected-row count instead of counting the matching rows first.
func mysqlFoundRows(t testing.TB) *gorm.DB {
	t.Helper()
	testdb.MySQL(t) // skips, or fails when required, if the server is down
	db, err := sqlstore.Open(context.Background(), "mysql", testdb.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	return db
}

// TestDifferential runs random call sequences on every SQL backend and
// claim path and on the memory store, and compares results and tables
// after every call. CLAIMSTORE_DIFF_SEED and CLAIMSTORE_DIFF_ITERATIONS
// change the seed and the number of cases.
func TestDifferential(t *testing.T) {
	cases := []struct {
		name string
		open func(testing.TB) *gorm.DB
		opts []sqlstore.Option
	}{
		{"sqlite", sqliteFile, nil},
		{"sqlite_portable", sqliteFile, []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}},
		{"postgres", testdb.Postgres, nil},
		{"postgres_portable", testdb.Postgres, []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyPortable)}},
		{"mysql", testdb.MySQL, nil},
		{"mysql_found_rows", mysqlFoundRows, nil},
		{"mysql_fast_path", testdb.MySQL, []sqlstore.Option{sqlstore.WithStrategy(dao.StrategyFastPath)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := difftest.ConfigFromEnv(t, diffIterations())
			difftest.Run(t, diffTarget(t, c.open(t), c.opts...), cfg)
		})
	}
}

var _ dao.Store[difftest.Row] = (*dao.Table[difftest.Row])(nil)
