package sqlstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
)

// Array inserts: [Insert] on PostgreSQL writes many rows in INSERTs that
// bind one array per column (dialects.Renderer.InsertArrays) instead of
// GORM's one value per row and column. For 1,000 rows of a 16-column
// model GORM builds and binds 16,000 values and the server parses a
// 1,000-row VALUES list; the array INSERT binds 16 values and is parsed
// once per shape. The values are those GORM would write (see
// arrayInsert), so the rows stored are the same.
const (
	// arrayInsertMin is the fewest rows that go by arrays: a single row
	// goes through GORM.
	arrayInsertMin = 2
	// arrayInsertRows caps the rows of one array INSERT.
	arrayInsertRows = 10000
)

// arrayInsert is the plan of a model's array INSERT, built once by
// [newArrayInsert] for a model GORM would insert with no more than its
// create callbacks' column logic, which the plan repeats row by row:
//
//   - cols are the columns GORM writes for every row, in the model's
//     column order: a zero value takes the field's default tag value
//     (DefaultValueInterface), or the current time (GORM's NowFunc, once
//     per call) for autoCreateTime and autoUpdateTime fields, written back
//     into the item, as GORM's create does.
//   - dbDefault are the columns the database fills when their value is
//     zero (an auto-increment key, a default:(expression) tag). When every
//     row leaves one zero it is left out and read back with RETURNING into
//     the items; when every row sets it, it is written; a call whose rows
//     differ goes through GORM, which writes DEFAULT row by row.
type arrayInsert struct {
	cols      []*schema.Field
	dbDefault []*schema.Field
	// types maps column names to PostgreSQL type names, read from the
	// catalog by the first array INSERT and kept.
	types atomic.Pointer[map[string]string]
	// refused is set when the driver refused an array as a bound value
	// (a database/sql driver other than pgx's, or one wrapped by a hook
	// that checks values): every later insert goes through GORM.
	refused atomic.Bool
}

// newArrayInsert returns the array INSERT plan of s's model, or nil when
// its inserts stay with GORM: on every dialect but PostgreSQL; for a store
// built on a transaction or on another pool than *sql.DB (the driver
// cannot be checked; a store bound to a transaction with BindTx keeps its
// base store's plan); when the pool's driver connection is not pgx's own
// (Backend.Native, checked once here); for a model with associations,
// create or save hooks, or serializer fields; and when GORM's create
// callbacks, run dry on two zero rows, build another INSERT than the plan
// (a plugin that adds columns or clauses).
func newArrayInsert[T any](ctx context.Context, s *sqlDriver[T], native func(dc any) NativeConn) *arrayInsert {
	sch := s.model.Schema()
	if s.dialect != dialects.Postgres || s.inTx || native == nil ||
		len(sch.Relationships.Relations) > 0 ||
		sch.BeforeCreate || sch.AfterCreate || sch.BeforeSave || sch.AfterSave ||
		slices.ContainsFunc(sch.Fields, func(f *schema.Field) bool { return f.Serializer != nil }) {
		return nil
	}
	db, ok := s.pool.(*sql.DB)
	if !ok || !nativeDriver(ctx, db, native) {
		return nil
	}
	a := &arrayInsert{}
	for _, name := range sch.DBNames {
		f := sch.FieldsByDBName[name]
		switch {
		case !f.Creatable:
		case !f.HasDefaultValue || f.DefaultValueInterface != nil:
			a.cols = append(a.cols, f)
		default:
			a.dbDefault = append(a.dbDefault, f)
		}
	}
	if len(a.cols) == 0 || !matchesGORM(a, s) {
		return nil
	}
	return a
}

// nativeDriver reports whether a connection of db is a connection of the
// backend's own driver.
func nativeDriver(ctx context.Context, db *sql.DB, native func(dc any) NativeConn) bool {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	ok := false
	_ = conn.Raw(func(dc any) error {
		ok = native(dc) != nil
		return nil
	})
	return ok
}

// matchesGORM reports whether GORM, building (DryRun) the INSERT of two
// zero rows of the model on s's session, writes the columns of the plan,
// returns its dbDefault columns, and adds no other clause.
func matchesGORM[T any](a *arrayInsert, s *sqlDriver[T]) bool {
	rows := []T{*new(T), *new(T)}
	stmt := s.db.Session(&gorm.Session{DryRun: true, SkipDefaultTransaction: true}).Table(s.table.Name).Create(&rows).Statement
	if stmt.Error != nil {
		return false
	}
	for name := range stmt.Clauses {
		if name != "INSERT" && name != "VALUES" && name != "RETURNING" {
			return false
		}
	}
	values, ok := stmt.Clauses["VALUES"].Expression.(clause.Values)
	if !ok || len(values.Columns) != len(a.cols) {
		return false
	}
	for i, c := range values.Columns {
		if c.Name != a.cols[i].DBName {
			return false
		}
	}
	var returned []string
	if r, ok := stmt.Clauses["RETURNING"].Expression.(clause.Returning); ok {
		for _, c := range r.Columns {
			returned = append(returned, c.Name)
		}
	}
	want := make([]string, len(a.dbDefault))
	for i, f := range a.dbDefault {
		want[i] = f.DBName
	}
	return slices.Equal(returned, want)
}

// columnTypes returns the type names of s's table's columns, read from
// pg_attribute (format_type without the type modifier: the column's own
// modifier applies on assignment) the first time on pool, and nil with
// an error when the table cannot be read. A table that does not exist
// reads as no columns (to_regclass is NULL), not as an error, which
// would abort a caller's transaction; the call then goes through GORM,
// whose INSERT reports the missing table.
func (a *arrayInsert) columnTypes(ctx context.Context, pool gorm.ConnPool, quotedTable string) (map[string]string, error) {
	if t := a.types.Load(); t != nil {
		return *t, nil
	}
	rows, err := pool.QueryContext(ctx, `SELECT a.attname, format_type(a.atttypid, NULL)
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, quotedTable)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		types[name] = arrayElementType(typ)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(types) > 0 {
		a.types.Store(&types)
	}
	return types, nil
}

// arrayElementType returns the element type to cast a column's array to,
// given the column type's name without its modifier. Written without a
// length, the SQL types character and bit mean character(1) and bit(1),
// and an explicit cast to them cuts longer values silently (PostgreSQL
// manual, "Character Types", "Bit String Types"); bpchar and bit varying
// keep every value whole, and the column's own length is then checked on
// assignment, with the error a GORM INSERT gets. Other types without a
// modifier take any value of the type.
func arrayElementType(typ string) string {
	switch typ {
	case "character":
		return "bpchar"
	case "bit":
		return "bit varying"
	}
	return typ
}

// insertArrays inserts items by arrays when the plan allows this call
// (see arrayInsert), in one statement per arrayInsertRows rows, in a
// transaction when there are several and the store is not in one. done is
// false, with nothing written, when the call goes through GORM instead:
// rows that differ in which database-filled columns they set, a column
// whose type the catalog does not give as a plain type, a table the
// catalog does not hold (GORM then reports the error), or a driver that
// refuses arrays.
func (s *sqlDriver[T]) insertArrays(ctx context.Context, items []*T) (done bool, err error) {
	a := s.arrays
	omit := make([]bool, len(a.dbDefault))
	for k, f := range a.dbDefault {
		zeros := 0
		for _, it := range items {
			if _, zero := f.ValueOf(ctx, reflect.ValueOf(it).Elem()); zero {
				zeros++
			}
		}
		switch zeros {
		case len(items):
			omit[k] = true
		case 0:
		default:
			return false, nil
		}
	}
	types, err := a.columnTypes(ctx, s.pool, s.r.QuoteTable(s.table.Name))
	if err != nil {
		return false, nil
	}
	var cols []*schema.Field
	var returned []*schema.Field
	cols = append(cols, a.cols...)
	for k, f := range a.dbDefault {
		if omit[k] {
			returned = append(returned, f)
		} else {
			cols = append(cols, f)
		}
	}
	arrayCols := make([]dialects.ArrayColumn, len(cols))
	for j, f := range cols {
		typ, ok := types[f.DBName]
		if !ok {
			return false, nil
		}
		arrayCols[j] = dialects.ArrayColumn{Name: f.DBName, Type: typ}
	}
	names := make([]string, len(returned))
	for k, f := range returned {
		names[k] = f.DBName
	}
	st, ok, err := s.r.InsertArrays(s.table, arrayCols, names)
	if !ok || err != nil {
		return false, nil
	}
	now := s.db.NowFunc()
	run := func(pool gorm.ConnPool) error {
		for chunk := range slices.Chunk(items, arrayInsertRows) {
			args, err := arrayArgs(ctx, chunk, cols, now)
			if err != nil {
				return err
			}
			if err := insertChunk(ctx, pool, st.SQL, args, chunk, returned); err != nil {
				return err
			}
		}
		return nil
	}
	if len(items) <= arrayInsertRows {
		err = run(s.pool) // one statement: atomic on its own
	} else {
		err = s.atomically(ctx, run)
	}
	if err != nil && isArgConversion(err) {
		a.refused.Store(true)
		return false, nil
	}
	return true, mapCtxError(ctx, err)
}

// arrayKind is the Go slice an array INSERT binds a column's values in:
// a typed slice, which pgx encodes without reflection, for a field of a
// plain Go kind (no driver.Valuer, reached without an embedded pointer
// struct), else []any of the values GORM would bind.
type arrayKind uint8

const (
	arrayAny arrayKind = iota
	arrayString
	arrayInt
	arrayBool
	arrayFloat
	arrayBytes
	arrayTime
)

var valuerType = reflect.TypeFor[sqldriver.Valuer]()

// arrayKindOf returns the slice kind of field f.
func arrayKindOf(f *schema.Field) arrayKind {
	t := f.FieldType
	if t.Implements(valuerType) || reflect.PointerTo(t).Implements(valuerType) || !driver.DirectField(f) {
		return arrayAny
	}
	switch {
	case t == timeType:
		return arrayTime
	case t == bytesType:
		return arrayBytes
	}
	switch t.Kind() {
	case reflect.String:
		return arrayString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return arrayInt
	case reflect.Bool:
		return arrayBool
	case reflect.Float32, reflect.Float64:
		return arrayFloat
	}
	return arrayAny
}

// column collects one column's values of a chunk.
type column struct {
	f       *schema.Field
	kind    arrayKind
	strings []string
	ints    []int64
	bools   []bool
	floats  []float64
	bytes   [][]byte
	times   []time.Time
	anys    []any
}

func newColumn(f *schema.Field, n int) *column {
	c := &column{f: f, kind: arrayKindOf(f)}
	switch c.kind {
	case arrayString:
		c.strings = make([]string, 0, n)
	case arrayInt:
		c.ints = make([]int64, 0, n)
	case arrayBool:
		c.bools = make([]bool, 0, n)
	case arrayFloat:
		c.floats = make([]float64, 0, n)
	case arrayBytes:
		c.bytes = make([][]byte, 0, n)
	case arrayTime:
		c.times = make([]time.Time, 0, n)
	default:
		c.anys = make([]any, 0, n)
	}
	return c
}

// add appends the field's value in rv.
func (c *column) add(ctx context.Context, rv reflect.Value) {
	if c.kind == arrayAny {
		v, _ := c.f.ValueOf(ctx, rv)
		c.anys = append(c.anys, v)
		return
	}
	fv := c.f.ReflectValueOf(ctx, rv)
	switch c.kind {
	case arrayString:
		c.strings = append(c.strings, fv.String())
	case arrayInt:
		c.ints = append(c.ints, fv.Int())
	case arrayBool:
		c.bools = append(c.bools, fv.Bool())
	case arrayFloat:
		c.floats = append(c.floats, fv.Float())
	case arrayBytes:
		c.bytes = append(c.bytes, fv.Bytes())
	case arrayTime:
		c.times = append(c.times, fv.Interface().(time.Time))
	}
}

// arg returns the collected slice.
func (c *column) arg() any {
	switch c.kind {
	case arrayString:
		return c.strings
	case arrayInt:
		return c.ints
	case arrayBool:
		return c.bools
	case arrayFloat:
		return c.floats
	case arrayBytes:
		return c.bytes
	case arrayTime:
		return c.times
	}
	return c.anys
}

// arrayArgs returns one []any per column of cols holding the chunk's
// values in row order, with zero values replaced as GORM's create replaces
// them (see arrayInsert) and written back into the items.
func arrayArgs[T any](ctx context.Context, chunk []*T, cols []*schema.Field, now time.Time) ([]any, error) {
	columns := make([]*column, len(cols))
	for j, f := range cols {
		columns[j] = newColumn(f, len(chunk))
	}
	for _, it := range chunk {
		rv := reflect.ValueOf(it).Elem()
		for _, c := range columns {
			f := c.f
			if f.DefaultValueInterface != nil || f.AutoCreateTime > 0 || f.AutoUpdateTime > 0 {
				if _, zero := f.ValueOf(ctx, rv); zero {
					v := any(now)
					if f.DefaultValueInterface != nil {
						v = f.DefaultValueInterface
					}
					if err := f.Set(ctx, rv, v); err != nil {
						return nil, fmt.Errorf("%s: %w", f.DBName, err)
					}
				}
			}
			c.add(ctx, rv)
		}
	}
	args := make([]any, len(columns))
	for j, c := range columns {
		args[j] = c.arg()
	}
	return args, nil
}

// insertChunk runs the array INSERT query with args on pool for chunk.
// With returned columns it scans each returned row into the next item's
// fields, in order: the rows of INSERT … SELECT come back in the order
// the SELECT yields them, as GORM's multi-row INSERT … RETURNING relies on
// too. Fewer or more rows than items is an error.
func insertChunk[T any](ctx context.Context, pool gorm.ConnPool, query string, args []any, chunk []*T, returned []*schema.Field) error {
	if len(returned) == 0 {
		res, err := pool.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n != int64(len(chunk)) {
			return fmt.Errorf("array insert: %d rows inserted for %d items", n, len(chunk))
		}
		return nil
	}
	rows, err := pool.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	dest := make([]any, len(returned))
	i := 0
	for rows.Next() {
		if i == len(chunk) {
			return fmt.Errorf("array insert: more rows returned than %d items", len(chunk))
		}
		rv := reflect.ValueOf(chunk[i]).Elem()
		for k, f := range returned {
			dest[k] = f.ReflectValueOf(ctx, rv).Addr().Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(chunk) {
		return fmt.Errorf("array insert: %d rows returned for %d items", i, len(chunk))
	}
	return nil
}

// isArgConversion reports whether err is database/sql refusing a bound
// value before anything was sent ("sql: converting argument …").
func isArgConversion(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), "sql: converting argument") {
			return true
		}
	}
	return false
}
