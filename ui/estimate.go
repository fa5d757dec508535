package ui

import (
	"context"
	"encoding/json"
	"math"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
)

// estimator reads PostgreSQL's planner statistics of one table: the number
// of rows (pg_class.reltuples, scaled to the table's current size as the
// planner does) and the frequency of each common value of the status
// column (pg_stats.most_common_vals and most_common_freqs; PostgreSQL
// manual, "Statistics Used by the Planner", section 14.2, and "pg_stats",
// section 54.27). The library's stores count exactly; the console needs an
// estimate only when a status holds so many rows that counting them would
// cost more than the page is worth, and no store offers one, so this is
// the console's only statement of its own: a catalog read, its table and
// column names bound as parameters.
type estimator struct {
	db            *gorm.DB
	table, column string
}

// newEstimator returns the estimator of store's table, or nil when the
// store is not a PostgreSQL table.
func newEstimator(store any, column string) *estimator {
	a, ok := store.(dao.Aser)
	if !ok {
		return nil
	}
	var db *gorm.DB
	if !a.As(&db) || db == nil || db.Dialector.Name() != "postgres" {
		return nil
	}
	n, ok := store.(dao.TableNamer)
	if !ok {
		return nil
	}
	return &estimator{db: db, table: n.TableName(), column: column}
}

// estimateSQL returns the estimated row count and the status column's most
// common values with their frequencies, as JSON arrays.
const estimateSQL = `SELECT
  CASE WHEN c.reltuples < 0 THEN -1
       WHEN c.relpages = 0 THEN c.reltuples
       ELSE c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8) END,
  COALESCE(array_to_json(s.most_common_vals::text::text[])::text, '[]'),
  COALESCE(array_to_json(s.most_common_freqs)::text, '[]')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = ?
WHERE c.oid = to_regclass(?)`

// estimate returns the estimated number of rows of each common status, or
// nil when the table has no statistics yet (never analyzed) or the read
// fails: the caller then counts.
func (e *estimator) estimate(ctx context.Context) map[string]int64 {
	var (
		rows        float64
		vals, freqs string
	)
	row := e.db.WithContext(ctx).Raw(estimateSQL, e.column, quoteIdent(e.table)).Row()
	if err := row.Scan(&rows, &vals, &freqs); err != nil || rows < 0 {
		return nil
	}
	var vs []string
	var fs []float64
	if json.Unmarshal([]byte(vals), &vs) != nil || json.Unmarshal([]byte(freqs), &fs) != nil || len(vs) != len(fs) {
		return nil
	}
	out := make(map[string]int64, len(vs))
	for i, v := range vs {
		out[v] = int64(math.Round(rows * fs[i]))
	}
	return out
}

// quoteIdent quotes a table name for to_regclass, so that a name with
// capitals is found as it was created.
func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
