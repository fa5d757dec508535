package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/ncruces/go-sqlite3/driver"
)

// TestStmtCacheEvictsInUse runs, on SQLite, five statements through a
// cache of two from four goroutines at once, on the database and in
// transactions, so that statements are evicted (and closed) while other
// goroutines run them; then changes the table's schema under the cached
// statements. Every query returns the rows it selects, under -race.
func TestStmtCacheEvictsInUse(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", SQLiteDSN(filepath.Join(t.TempDir(), "cache.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(OpenSQLiteConns)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t (x) VALUES (1), (2), (3), (4), (5)"); err != nil {
		t.Fatal(err)
	}
	c := newStmtCache(db, 2)
	// count returns the rows of t above above, read with statement k of
	// five, as q runs it.
	count := func(q interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}, k, above int) (int, error) {
		rows, err := q.QueryContext(ctx, fmt.Sprintf("SELECT x + %d FROM t WHERE x > ?", k), above)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var x int
			if err := rows.Scan(&x); err != nil {
				return 0, err
			}
			if x <= above+k {
				return 0, fmt.Errorf("statement %d read x+%d = %d, not above %d", k, k, x, above)
			}
			n++
		}
		return n, rows.Err()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				k, above := (g+i)%5, i%5
				var n int
				var err error
				if i%4 == 0 {
					// In a transaction: cached statements only.
					var tx *sql.Tx
					if tx, err = db.BeginTx(ctx, nil); err == nil {
						n, err = count(c.pool(tx), k, above)
						err = errors.Join(err, tx.Commit())
					}
				} else {
					if e := c.prepare(ctx, fmt.Sprintf("SELECT x + %d FROM t WHERE x > ?", k)); e != nil {
						e.release()
					}
					n, err = count(c.pool(db), k, above)
				}
				if err == nil && n != 5-above {
					err = fmt.Errorf("statement %d above %d: %d rows, want %d", k, above, n, 5-above)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := c.stmts.Len(); n != 2 {
		t.Errorf("the cache holds %d statements, want 2", n)
	}

	// The table is dropped and made again with another column first:
	// SQLite prepares the cached statements again.
	for _, q := range []string{"DROP TABLE t", "CREATE TABLE t (y TEXT, x INTEGER)", "INSERT INTO t (y, x) VALUES ('a', 7), ('b', 8)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 5 {
		if n, err := count(c.pool(db), k, 7); err != nil || n != 1 {
			t.Errorf("after the schema changed, statement %d: %d rows, %v; want 1", k, n, err)
		}
	}
}
