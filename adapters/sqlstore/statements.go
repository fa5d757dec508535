package sqlstore

import (
	"context"
	"database/sql"
	"reflect"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// queryKeys runs st, whose result is one column of primary keys, on pool
// and returns the keys, text ([]byte from MySQL) as a string. Errors are
// mapped by mapCtxError with ctx; with an error no key is returned.
func queryKeys(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) ([]any, error) {
	rows, err := pool.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, mapCtxError(ctx, err)
	}
	defer rows.Close()
	var keys []any
	for rows.Next() {
		var k any
		if err = rows.Scan(&k); err != nil {
			break
		}
		if b, ok := k.([]byte); ok {
			k = string(b)
		}
		keys = append(keys, k)
	}
	if err := finishRows(ctx, rows, err); err != nil {
		return nil, err
	}
	return keys, nil
}

// query runs st on pool and scans every row into a T with GORM's scanner
// (gorm.DB.ScanRows), or with scanDirect or scanSQLite, so column-to-field mapping,
// serializers and scanners behave as in GORM's own finders. Rows are
// returned only when the whole result was read and the statement
// completed: the last row scanned, rows.Err() nil (the driver saw the
// command complete and, in autocommit, the server ready for the next
// query) and rows.Close() nil. Otherwise it returns no rows and the
// error, mapped by mapCtxError with ctx: rows read before a failure may
// belong to a statement the server rolled back.
func (s *sqlDriver[T]) query(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) ([]T, error) {
	rows, release, err := s.queryRows(ctx, pool, st)
	if err != nil {
		return nil, err
	}
	defer release()
	var out []T
	switch {
	case s.direct && s.plans != nil:
		out, _, err = s.scanSQLite(ctx, rows, 0)
	case s.direct:
		out, err = s.scanDirect(ctx, rows)
	case rows.Next():
		// ScanRows expects the cursor on the first row and scans the rest.
		err = s.db.WithContext(ctx).ScanRows(rows, &out)
	}
	if err := finishRows(ctx, rows, err); err != nil {
		return nil, err
	}
	return out, nil
}

// finishRows returns the outcome of a result whose rows were scanned with
// the error scanErr: scanErr, else rows.Err(), else rows.Close() (nil only
// when the statement completed), mapped by mapCtxError with ctx.
func finishRows(ctx context.Context, rows *sql.Rows, scanErr error) error {
	err := scanErr
	if err == nil {
		err = rows.Err()
	}
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		return mapCtxError(ctx, err)
	}
	return nil
}

// scanDirect scans every row of rows straight into the fields of T that
// the model schema names for the result columns, with database/sql's own
// conversions; columns that name no field (the claim statement's copies of
// the order columns) are read and dropped. It is what GORM's ScanRows does
// for these models at a fraction of its allocations: the client cost of a
// 100-row claim is dominated by row scanning.
func (s *sqlDriver[T]) scanDirect(ctx context.Context, rows *sql.Rows) ([]T, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	sch := s.model.Schema()
	fields := make([]*schema.Field, len(cols))
	for i, c := range cols {
		if f := sch.LookUpField(c); f != nil && f.DBName != "" {
			fields[i] = f
		}
	}
	var out []T
	var discard any
	dest := make([]any, len(cols))
	for rows.Next() {
		var zero T
		out = append(out, zero)
		rv := reflect.ValueOf(&out[len(out)-1]).Elem()
		for i, f := range fields {
			if f == nil {
				dest[i] = &discard
				continue
			}
			dest[i] = f.ReflectValueOf(ctx, rv).Addr().Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			// A NULL in a column whose field cannot hold one (a plain
			// string, number, bool or time): read the row again as GORM
			// does, through a pointer per field, NULL leaving the zero
			// value. database/sql lets a row be scanned again.
			if err := scanNullable(ctx, rows, fields, rv, dest); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// scanNullable scans the current row of rows into the fields of rv (a T)
// through a new pointer per field, so that a NULL leaves the field's zero
// value as GORM's scanner does; dest is scratch space of one entry per
// column.
func scanNullable(ctx context.Context, rows *sql.Rows, fields []*schema.Field, rv reflect.Value, dest []any) error {
	var discard any
	ptrs := make([]reflect.Value, len(fields))
	for i, f := range fields {
		if f == nil {
			dest[i] = &discard
			continue
		}
		ptrs[i] = reflect.New(reflect.PointerTo(f.FieldType))
		dest[i] = ptrs[i].Interface()
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	for i, f := range fields {
		if f == nil {
			continue
		}
		fv := f.ReflectValueOf(ctx, rv)
		if p := ptrs[i].Elem(); !p.IsNil() {
			fv.Set(p.Elem())
		} else {
			fv.SetZero()
		}
	}
	return nil
}

// exec runs st on pool and returns the affected-row count. Errors are
// mapped by mapCtxError with ctx.
func (s *sqlDriver[T]) exec(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) (int64, error) {
	var res sql.Result
	done, err := s.freshSchema(ctx, pool, func(pool gorm.ConnPool) (err error) {
		res, err = pool.ExecContext(ctx, st.SQL, st.Args...)
		return err
	})
	done()
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	return n, nil
}

// queryRows runs the query st on pool with freshSchema (on SQLite, once
// more on a fresh copy of the schema when the connection's copy is
// stale) and returns its rows and release, which the caller calls once
// it has finished with them: it closes rows and gives back the
// connection freshSchema took from the pool. Errors are mapped by
// mapCtxError with ctx; there is then nothing to release.
func (s *sqlDriver[T]) queryRows(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) (rows *sql.Rows, release func(), err error) {
	done, err := s.freshSchema(ctx, pool, func(pool gorm.ConnPool) (err error) {
		rows, err = pool.QueryContext(ctx, st.SQL, st.Args...)
		return err
	})
	if err != nil {
		done()
		return nil, nil, mapCtxError(ctx, err)
	}
	return rows, func() {
		rows.Close()
		done()
	}, nil
}
