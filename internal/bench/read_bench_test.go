package bench

import (
	"context"
	"reflect"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testdb"
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
	testdb.Postgres(b)
	ctx := context.Background()
	const rows = 100
	cfg := Config{Backend: "postgres", DSN: testdb.PostgresDSN(), Rows: 1000, Workers: 1, Batch: rows}
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
	q := dao.Query{Where: PendingCriteria(), OrderBy: []dao.Order{dao.Asc("id")}, Limit: rows}
	where, err := s.probe.CheckCriteria(q.Where)
	if err != nil {
		b.Fatal(err)
	}
	cq := dao.Query{Where: where, OrderBy: q.OrderBy, Limit: q.Limit} // ordered by the primary key already
	st, err := s.r.Select(s.libTable(t.name), cq)
	if err != nil {
		b.Fatal(err)
	}
	check := func(b *testing.B, got int) {
		if got != rows {
			b.Fatalf("read %d rows, want %d", got, rows)
		}
	}

	b.Run("pgx", func(b *testing.B) {
		pool, err := NewPgxPool(ctx, s.dsn, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		b.ReportAllocs()
		for b.Loop() {
			r, err := pool.Query(ctx, st.SQL, st.Args...)
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
			check(b, n)
		}
	})
	b.Run("database-sql", func(b *testing.B) {
		db, _, err := openCountedSQL(ctx, "postgres", s.dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		b.ReportAllocs()
		for b.Loop() {
			r, err := db.QueryContext(ctx, st.SQL, st.Args...)
			if err != nil {
				b.Fatal(err)
			}
			got, err := scanJobs(r, rows)
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(got))
		}
	})
	b.Run("gorm-scanrows", func(b *testing.B) {
		gdb, _, err := openCountedGorm(ctx, "postgres", s.dsn)
		if err != nil {
			b.Fatal(err)
		}
		sqlDB, _ := gdb.DB()
		defer sqlDB.Close()
		b.ReportAllocs()
		for b.Loop() {
			r, err := sqlDB.QueryContext(ctx, st.SQL, st.Args...)
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
			check(b, len(out))
		}
	})
	b.Run("schema-scan", func(b *testing.B) {
		// What sqlstore's query could do instead of ScanRows: scan each row
		// straight into the fields of the result slice's element, located
		// once per call from the model schema by column name.
		db, _, err := openCountedSQL(ctx, "postgres", s.dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		sch := s.model.Schema()
		b.ReportAllocs()
		for b.Loop() {
			r, err := db.QueryContext(ctx, st.SQL, st.Args...)
			if err != nil {
				b.Fatal(err)
			}
			cols, _ := r.Columns()
			idx := make([][]int, len(cols))
			for i, c := range cols {
				idx[i] = sch.LookUpField(c).StructField.Index
			}
			out := make([]Job, 0, rows)
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
			check(b, len(out))
		}
	})
	b.Run("library-find", func(b *testing.B) {
		gdb, _, err := openCountedGorm(ctx, "postgres", s.dsn)
		if err != nil {
			b.Fatal(err)
		}
		sqlDB, _ := gdb.DB()
		defer sqlDB.Close()
		store, err := sqlstore.New[Job](gdb, sqlstore.WithTable(t.name))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			got, err := store.Find(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(got))
		}
	})
}
