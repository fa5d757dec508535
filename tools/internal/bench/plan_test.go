package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// planOf prepares a loaded table like a run does and returns the query plan
// of the claim's candidate read (on PostgreSQL, of the whole claim
// statement) as text.
func planOf(t *testing.T, cfg Config, dsn string) (plan, table string) {
	t.Helper()
	ctx := context.Background()
	s, err := openSQLRun(ctx, cfg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close) // registered first, so it runs after the table is dropped
	tb, err := s.prepare(ctx, "bench_plan")
	t.Cleanup(func() {
		if err := s.drop(tb); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var explain string
	var args []any
	if s.dialect == "postgres" {
		stmts, err := s.claimStatements(tb.name)
		if err != nil {
			t.Fatal(err)
		}
		explain, args = "EXPLAIN "+stmts[0].SQL, stmts[0].Args
	} else {
		explain = "EXPLAIN QUERY PLAN SELECT * FROM " + s.r.QuoteTable(tb.name) + " WHERE status = 'pending' ORDER BY id LIMIT 100"
	}
	rows, err := s.admin.Raw(explain, args...).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if s, ok := vals[len(vals)-1].(string); ok {
			lines = append(lines, s)
		}
	}
	return strings.Join(lines, "\n"), tb.name
}

// The candidate read must use the eligibility index; a scan in primary-key
// order that filters out claimed rows makes every claim slower than the
// last and the benchmark quadratic.
func TestEligibilityIndexUsedSQLite(t *testing.T) {
	dsn, cleanup, err := DefaultDSN("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cleanup() })
	plan, table := planOf(t, Config{Backend: "sqlite", Rows: 5000, Workers: 1, Batch: 100}, dsn)
	if !strings.Contains(plan, "USING INDEX "+table+"_claim") {
		t.Fatalf("candidate read does not use the (status, id) index:\n%s", plan)
	}
}

func TestEligibilityIndexUsedPostgres(t *testing.T) {
	testdb.Postgres(t)
	plan, table := planOf(t, Config{Backend: "postgres", Rows: 5000, Workers: 1, Batch: 100}, testdb.PostgresDSN())
	if !strings.Contains(plan, "Index Scan using "+table+"_pending") {
		t.Fatalf("claim does not use the partial index on pending rows:\n%s", plan)
	}
}
