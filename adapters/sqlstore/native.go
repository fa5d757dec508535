package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"unsafe"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm/schema"
)

// errNotNative reports that a connection is not one the backend's driver
// can run natively (Backend.Native returned nil).
var errNotNative = errors.New("sqlstore: connection has no native path")

// fieldSlot locates the field of T that a result column is scanned into.
// A field reached through struct values alone has an offset from the
// start of T (flat); one behind an embedded pointer is reached with GORM's
// reflection, which allocates the embedded struct.
type fieldSlot struct {
	field *schema.Field
	typ   reflect.Type // the field's type
	off   uintptr      // offset from the start of T, when flat
	flat  bool
}

// scanPlan is the per-type part of the native scan, built once by New:
// the slot of every column name of the model schema.
type scanPlan map[string]fieldSlot

// newScanPlan returns the slot of every column of s: the field GORM reads
// the column into (schema.Schema.FieldsByDBName, which picks the shortest
// path when fields of embedded structs share a column name).
func newScanPlan[T any](s *schema.Schema) scanPlan {
	root := reflect.TypeFor[T]()
	plan := make(scanPlan, len(s.FieldsByDBName))
	for col, f := range s.FieldsByDBName {
		slot := fieldSlot{field: f, typ: f.FieldType}
		slot.off, slot.flat = flatOffset(root, f.StructField.Index, f.FieldType)
		plan[col] = slot
	}
	return plan
}

// flatOffset returns the offset in t of the field at index path idx, and
// whether that path crosses no pointer and ends at a field of type want.
func flatOffset(t reflect.Type, idx []int, want reflect.Type) (uintptr, bool) {
	var off uintptr
	for i, n := range idx {
		if t.Kind() != reflect.Struct || n < 0 || n >= t.NumField() {
			return 0, false
		}
		sf := t.Field(n)
		off += sf.Offset
		t = sf.Type
		if i < len(idx)-1 && t.Kind() != reflect.Struct {
			return 0, false
		}
	}
	return off, len(idx) > 0 && t == want
}

// queryNative runs st on conn with the backend's driver natively
// (Backend.Native) and scans every row into a T: each column into the
// field the model schema names for it (through the scan plan New built),
// with the driver's own conversions, and columns that name no field (the
// claim statement's copies of the order columns) skipped. Rows are
// returned only when the whole result was read and the statement
// completed, as with query. It returns errNotNative, having sent nothing,
// when conn's driver connection is not one the backend runs natively.
// limit sizes the result slice. Errors are mapped by mapCtxError with ctx.
func (s *sqlDriver[T]) queryNative(ctx context.Context, conn *sql.Conn, st dialects.Statement, limit int) ([]T, error) {
	var out []T
	err := conn.Raw(func(dc any) error {
		nc := s.native(dc)
		if nc == nil {
			return errNotNative
		}
		rows, err := nc.Query(ctx, st.SQL, st.Args)
		if err != nil {
			return err
		}
		out, err = s.scanNative(ctx, rows, limit)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if errors.Is(err, errNotNative) {
		return nil, err
	}
	if err != nil {
		return nil, mapCtxError(ctx, err)
	}
	return out, nil
}

// scanNative scans every row of rows into a new T.
func (s *sqlDriver[T]) scanNative(ctx context.Context, rows NativeRows, limit int) ([]T, error) {
	cols := rows.Columns()
	slots := make([]fieldSlot, len(cols)) // the zero slot (no field): a column read and dropped
	for i, c := range cols {
		slots[i] = s.plan[c]
	}
	dest := make([]any, len(cols))
	out := make([]T, 0, max(limit, 0))
	var zero T
	for rows.Next() {
		out = append(out, zero)
		row := &out[len(out)-1]
		base := unsafe.Pointer(row)
		for i, sl := range slots {
			switch {
			case sl.field == nil:
				dest[i] = nil
			case rows.Null(i):
				// A NULL leaves the field's zero value, as GORM's
				// scanner does, also for a field that cannot hold one
				// (a plain string, number, bool or time); a field
				// behind an embedded pointer still gets its embedded
				// struct, as there.
				if !sl.flat {
					sl.field.ReflectValueOf(ctx, reflect.ValueOf(row).Elem())
				}
				dest[i] = nil
			case sl.flat:
				dest[i] = reflect.NewAt(sl.typ, unsafe.Add(base, sl.off)).Interface()
			default:
				dest[i] = sl.field.ReflectValueOf(ctx, reflect.ValueOf(row).Elem()).Addr().Interface()
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
	}
	return out, nil
}
