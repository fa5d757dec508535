package sqlstore

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
)

var _ driver.EachUpdater[struct{ ID int64 }] = (*sqlDriver[struct{ ID int64 }])(nil)

// UpdateEach implements [driver.EachUpdater]. On PostgreSQL with the array
// plan of Insert (pgx's own connections; see newArrayInsert) it is one
// UPDATE … FROM unnest(…) per 10,000 rows (dialects.Renderer.UpdateArrays),
// returning the keys it wrote. Elsewhere, and when the catalog does not
// give a column's type, it writes row by row inside one transaction (the
// caller's when the store is bound to one): one guarded UPDATE per row,
// with a locking count before it where the server reports changed rather
// than matched rows (MySQL and MariaDB without CLIENT_FOUND_ROWS); a row
// counts as written when the UPDATE matched it. With an error the rows of
// that transaction are rolled back and no key is returned.
func (s *sqlDriver[T]) UpdateEach(ctx context.Context, u driver.EachUpdate) ([]any, error) {
	if a := s.arrays; a != nil && !a.refused.Load() {
		if keys, done, err := s.updateArrays(ctx, u); done {
			return keys, err
		}
	}
	var keys []any
	run := func(pool gorm.ConnPool) error {
		keys = keys[:0]
		for _, vals := range u.Rows {
			where, set := driver.EachRow(u, vals)
			st, err := s.r.Update(s.table, where, set)
			if err != nil {
				return err
			}
			if !s.foundRows {
				cst, err := s.r.LockingCount(s.table, where)
				if err != nil {
					return err
				}
				var matched int64
				if err := pool.QueryRowContext(ctx, cst.SQL, cst.Args...).Scan(&matched); err != nil {
					return mapCtxError(ctx, err)
				}
				if matched == 0 {
					continue
				}
			}
			n, err := s.exec(ctx, pool, st)
			if err != nil {
				return err
			}
			if n > 0 {
				keys = append(keys, vals[0])
			}
		}
		return nil
	}
	if err := s.atomically(ctx, run); err != nil {
		return nil, mapCtxError(ctx, err)
	}
	return keys, nil
}

// updateArrays is UpdateEach by arrays on PostgreSQL. done is false, with
// nothing written, when the catalog does not give a column's type or the
// driver refuses arrays: the caller then writes row by row.
func (s *sqlDriver[T]) updateArrays(ctx context.Context, u driver.EachUpdate) (keys []any, done bool, err error) {
	types, err := s.arrays.columnTypes(ctx, s.pool, s.r.QuoteTable(s.table.Name))
	if err != nil {
		return nil, false, nil
	}
	names := append(append([]string(nil), u.Match...), u.Columns...)
	cols := make([]dialects.ArrayColumn, len(names))
	for i, n := range names {
		typ, ok := types[n]
		if !ok {
			return nil, false, nil
		}
		cols[i] = dialects.ArrayColumn{Name: n, Type: typ}
	}
	for first := 0; first < len(u.Rows); first += arrayInsertRows {
		chunk := u.Rows[first:min(first+arrayInsertRows, len(u.Rows))]
		arrays := make([]any, len(cols))
		for j := range cols {
			arrays[j] = eachArray(chunk, j)
		}
		st, ok, err := s.r.UpdateArrays(s.table, cols, len(u.Match), arrays, u.Common, u.Where)
		if !ok || err != nil {
			if first == 0 {
				return nil, false, nil
			}
			return keys, true, err
		}
		got, err := queryKeys(ctx, s.pool, st)
		if err != nil {
			if first == 0 && isArgConversion(err) {
				s.arrays.refused.Store(true)
				return nil, false, nil
			}
			return keys, true, mapCtxError(ctx, err)
		}
		keys = append(keys, got...)
	}
	return keys, true, nil
}

// eachArray returns column j of rows as the slice bound for it: a typed
// slice when every value is of one plain type (pgx encodes it without
// reflection), else []any, in which nil is NULL.
func eachArray(rows [][]any, j int) any {
	switch rows[0][j].(type) {
	case string:
		if out, ok := typed[string](rows, j); ok {
			return out
		}
	case int64:
		if out, ok := typed[int64](rows, j); ok {
			return out
		}
	case time.Time:
		if out, ok := typed[time.Time](rows, j); ok {
			return out
		}
	case bool:
		if out, ok := typed[bool](rows, j); ok {
			return out
		}
	}
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r[j]
	}
	return out
}

// typed returns column j of rows as a []V, false when a value is not a V.
func typed[V any](rows [][]any, j int) ([]V, bool) {
	out := make([]V, len(rows))
	for i, r := range rows {
		v, ok := r[j].(V)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}
