package bench

import (
	"context"
	"reflect"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// BenchmarkReadPath splits the client-side cost of reading back a claim's
// 100 rows on PostgreSQL into its layers, with a read-only statement so
// that no commit flush hides them: the same SELECT (the text dialects
// renders for the library's candidate read) through
//
//	pgx             pgxpool.Query, rows.Scan into Job
//	database-sql    database/sql over pgx stdlib, rows.Scan into Job
//	gorm-scanrows   database/sql, then GORM's (*DB).ScanRows, as sqlstore scans
//	schema-scan     database/sql, rows.Scan into the fields the model schema
//	                names for the result columns (no GORM on the read path)
//	library-find    sqlstore's Store.Find (check, render, query, ScanRows)
//
// The differences between neighbours are what each layer costs per call.
func BenchmarkReadPath(b *testing.B) {
	rb := newReadBench(b)
	b.Run("pgx", rb.pgx)
	b.Run("database-sql", rb.databaseSQL)
	b.Run("gorm-scanrows", rb.gormScanRows)
	b.Run("schema-scan", rb.schemaScan)
	b.Run("library-find", rb.libraryFind)
}

// readRows is the number of rows each read of BenchmarkReadPath returns.
const readRows = 100

// readBench is the table and the statement every layer of
// BenchmarkReadPath reads with.
type readBench struct {
	ctx   context.Context
	s     *sqlRun
	table string
	q     dao.Query
	st    dialects.Statement
}

// newReadBench loads a table on PostgreSQL (dropped when b ends) and
// renders the library's candidate read of readRows rows.
func newReadBench(b *testing.B) *readBench {
	testdb.Postgres(b)
	ctx := context.Background()
	cfg := Config{Backend: "postgres", DSN: testdb.PostgresDSN(), Rows: 1000, Workers: 1, Batch: readRows}
	s, err := openSQLRun(ctx, cfg, cfg.DSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.close) // registered first, so it runs after the tables are dropped
	t, err := s.prepare(ctx, "bench_read")
	b.Cleanup(func() {
		if err := s.drop(t); err != nil {
			b.Error(err)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	q := dao.Query{Where: PendingCriteria(), OrderBy: []dao.Order{dao.Asc("id")}, Limit: readRows}
	where, err := s.probe.CheckCriteria(q.Where)
	if err != nil {
		b.Fatal(err)
	}
	cq := dao.Query{Where: where, OrderBy: q.OrderBy, Limit: q.Limit} // ordered by the primary key already
	st, err := s.r.Select(s.libTable(t.name), cq)
	if err != nil {
		b.Fatal(err)
	}
	return &readBench{ctx: ctx, s: s, table: t.name, q: q, st: st}
}

// checkRead fails b unless a read returned readRows rows.
func checkRead(b *testing.B, got int) {
	if got != readRows {
		b.Fatalf("read %d rows, want %d", got, readRows)
	}
}

// pgx reads with pgxpool.Query and rows.Scan into Job.
func (rb *readBench) pgx(b *testing.B) {
	ctx := rb.ctx
	pool, err := NewPgxPool(ctx, rb.s.dsn, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	b.ReportAllocs()
	for b.Loop() {
		r, err := pool.Query(ctx, rb.st.SQL, rb.st.Args...)
		if err != nil {
			b.Fatal(err)
		}
		var j Job
		n := 0
		for r.Next() {
			if err := r.Scan(&j.ID, &j.Status, &j.LockedBy, &j.Attempts, &j.Payload); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if r.Err() != nil {
			b.Fatal(r.Err())
		}
		checkRead(b, n)
	}
}

// databaseSQL reads with database/sql over pgx stdlib and rows.Scan into
// Job.
func (rb *readBench) databaseSQL(b *testing.B) {
	ctx := rb.ctx
	db, _, err := openCountedSQL(ctx, "postgres", rb.s.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ReportAllocs()
	for b.Loop() {
		r, err := db.QueryContext(ctx, rb.st.SQL, rb.st.Args...)
		if err != nil {
			b.Fatal(err)
		}
		got, err := scanJobs(r, readRows)
		if err != nil {
			b.Fatal(err)
		}
		checkRead(b, len(got))
	}
}

// gormScanRows reads with database/sql, then GORM's (*DB).ScanRows, as
// sqlstore scans.
func (rb *readBench) gormScanRows(b *testing.B) {
	ctx := rb.ctx
	gdb, _, err := openCountedGorm(ctx, "postgres", rb.s.dsn)
	if err != nil {
		b.Fatal(err)
	}
	sqlDB, _ := gdb.DB()
	defer sqlDB.Close()
	b.ReportAllocs()
	for b.Loop() {
		r, err := sqlDB.QueryContext(ctx, rb.st.SQL, rb.st.Args...)
		if err != nil {
			b.Fatal(err)
		}
		var out []Job
		if r.Next() {
			if err := gdb.WithContext(ctx).ScanRows(r, &out); err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
		checkRead(b, len(out))
	}
}

// schemaScan is what sqlstore's query could do instead of ScanRows: scan
// each row straight into the fields of the result slice's element, located
// once per call from the model schema by column name.
func (rb *readBench) schemaScan(b *testing.B) {
	ctx := rb.ctx
	db, _, err := openCountedSQL(ctx, "postgres", rb.s.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	sch := rb.s.model.Schema()
	b.ReportAllocs()
	for b.Loop() {
		r, err := db.QueryContext(ctx, rb.st.SQL, rb.st.Args...)
		if err != nil {
			b.Fatal(err)
		}
		cols, _ := r.Columns()
		idx := make([][]int, len(cols))
		for i, c := range cols {
			idx[i] = sch.LookUpField(c).StructField.Index
		}
		out := make([]Job, 0, readRows)
		dest := make([]any, len(cols))
		for r.Next() {
			out = append(out, Job{})
			rv := reflect.ValueOf(&out[len(out)-1]).Elem()
			for i := range idx {
				dest[i] = rv.FieldByIndex(idx[i]).Addr().Interface()
			}
			if err := r.Scan(dest...); err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
		checkRead(b, len(out))
	}
}

// libraryFind reads with sqlstore's Store.Find (check, render, query,
// ScanRows).
func (rb *readBench) libraryFind(b *testing.B) {
	ctx := rb.ctx
	gdb, _, err := openCountedGorm(ctx, "postgres", rb.s.dsn)
	if err != nil {
		b.Fatal(err)
	}
	sqlDB, _ := gdb.DB()
	defer sqlDB.Close()
	store, err := sqlstore.New[Job](gdb, sqlstore.WithTable(rb.table))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := store.Find(ctx, rb.q)
		if err != nil {
			b.Fatal(err)
		}
		checkRead(b, len(got))
	}
}
