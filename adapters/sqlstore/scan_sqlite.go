package sqlstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm/schema"
)

// The SQLite row scanner.
//
// The SQLite driver returns every value as one of int64, float64, string,
// []byte, time.Time (a column declared DATE, TIME, DATETIME or TIMESTAMP
// whose text the driver decodes), bool (a column declared BOOLEAN) or nil,
// whatever the column's declared type: SQLite types values, not columns
// (SQLite manual, "Datatypes In SQLite"). GORM's ScanRows scans each value
// through database/sql into a fresh *FieldType and copies it into the
// field (gorm.io/gorm/schema Field.Set), one allocation per non-NULL value
// and a lookup of the statement's schema per call. sqliteScanner does the
// same conversions straight into the fields, with a plan built once per
// result shape:
//
//   - a field of a predeclared type (string, bool, the integer and float
//     types, []byte), time.Time, or a pointer to one of them: a conversion
//     of this file, the one database/sql applies to that value and field
//     type (see convertSQLite);
//   - a field whose type implements sql.Scanner (sql.NullString,
//     gorm.DeletedAt, uuid.UUID, ...), or a pointer to one: its Scan
//     method, on the field itself;
//   - NULL leaves the field at its zero value (nil for a pointer), as
//     ScanRows does, also in a field whose type cannot hold NULL;
//   - any other field (a named type such as type Status string, a field of
//     a struct embedded through a pointer, which GORM allocates on the
//     way): GORM's own per-field scan, Field.NewValuePool and Field.Set,
//     exactly as ScanRows runs it;
//   - a column that names no readable field is read and dropped.
//
// A model with a serializer field is scanned with ScanRows (newDriver
// leaves direct off), since its values pass through the serializer.

// sqliteTextTimes are the layouts in which a time stored as text is read
// into a time.Time field when the driver returned it as text (a column
// declared otherwise than DATE, TIME, DATETIME or TIMESTAMP, such as TEXT):
// the layout the store's DSNs write (SQLiteTimeLayout), RFC 3339 (the
// driver's default), and SQLite's own "YYYY-MM-DD HH:MM:SS[.SSS]" of
// CURRENT_TIMESTAMP and datetime(), which is UTC ("Date And Time
// Functions").
var sqliteTextTimes = []string{SQLiteTimeLayout, time.RFC3339Nano, "2006-01-02 15:04:05.999999999"}

// sqliteConv stores the non-NULL driver value src in the field dst
// (addressable, of the type the conversion was chosen for).
type sqliteConv func(dst reflect.Value, src any) error

// sqliteColumn is how one result column is scanned.
type sqliteColumn struct {
	field *schema.Field // nil: the column is read and dropped
	conv  sqliteConv    // nil with a field: GORM's per-field scan
	rank  bool          // the claim statement's rank column (dialects.RankColumn)
}

// sqlitePlan is the scan plan of one result shape: its column names and
// how each is scanned.
type sqlitePlan struct {
	cols []string
	scan []sqliteColumn
}

// sqlitePlans caches the plan of the last result shape a store scanned
// (every statement of a store returns the table's columns, the claim adds
// the rank column). It is shared by the copies of a driver (BindTx).
type sqlitePlans struct {
	last atomic.Pointer[sqlitePlan]
}

// plan returns the plan of the result columns cols for the model schema
// sch, from the cache when the last shape had the same columns.
func (c *sqlitePlans) plan(sch *schema.Schema, cols []string) *sqlitePlan {
	if p := c.last.Load(); p != nil && slices.Equal(p.cols, cols) {
		return p
	}
	p := &sqlitePlan{cols: slices.Clone(cols), scan: make([]sqliteColumn, len(cols))}
	for i, col := range cols {
		if col == dialects.RankColumn {
			p.scan[i].rank = true
			continue
		}
		f := sch.LookUpField(col)
		if f == nil || f.DBName == "" || !f.Readable {
			continue
		}
		p.scan[i] = sqliteColumn{field: f, conv: sqliteConvFor(f)}
	}
	c.last.Store(p)
	return p
}

// sqliteConvFor returns the conversion for field f, or nil when f is
// scanned with GORM's per-field scan: a field of a struct embedded through
// a pointer (left to GORM's setters, which allocate that struct), or of a
// type this file has no conversion for.
func sqliteConvFor(f *schema.Field) sqliteConv {
	if slices.ContainsFunc(f.StructField.Index, func(i int) bool { return i < 0 }) {
		return nil
	}
	t := f.FieldType
	if t.Kind() == reflect.Pointer {
		inner := sqliteConvOf(t.Elem())
		if inner == nil {
			return nil
		}
		elem := t.Elem()
		return func(dst reflect.Value, src any) error {
			v := reflect.New(elem)
			if err := inner(v.Elem(), src); err != nil {
				return err
			}
			dst.Set(v)
			return nil
		}
	}
	return sqliteConvOf(t)
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	bytesType   = reflect.TypeFor[[]byte]()
	scannerType = reflect.TypeFor[sql.Scanner]()
)

// sqliteConvOf returns the conversion into a non-pointer field of type t,
// or nil when there is none.
func sqliteConvOf(t reflect.Type) sqliteConv {
	if reflect.PointerTo(t).Implements(scannerType) {
		return convScanner
	}
	switch {
	case t == timeType:
		return convTime
	case t == bytesType:
		return convBytes
	case t.PkgPath() != "" || t.Name() == "":
		// A named type declared in a package, or an unnamed composite
		// type other than []byte.
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return convString
	case reflect.Bool:
		return convBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return convInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return convUint
	case reflect.Float32, reflect.Float64:
		return convFloat
	}
	return nil
}

// convScanner scans src with the field's own Scan method.
func convScanner(dst reflect.Value, src any) error {
	return dst.Addr().Interface().(sql.Scanner).Scan(src)
}

// convString stores src in a string field: text as it is, a time in RFC
// 3339 with nanoseconds, a number or bool in its shortest decimal form, as
// database/sql does.
func convString(dst reflect.Value, src any) error {
	switch v := src.(type) {
	case string:
		dst.SetString(v)
	case []byte:
		dst.SetString(string(v))
	case time.Time:
		dst.SetString(v.Format(time.RFC3339Nano))
	default:
		s, ok := numberText(src)
		if !ok {
			return convErr(src, dst)
		}
		dst.SetString(s)
	}
	return nil
}

// convBytes stores a copy of src in a []byte field, as database/sql does.
func convBytes(dst reflect.Value, src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = slices.Clone(v)
	case time.Time:
		b = v.AppendFormat(nil, time.RFC3339Nano)
	default:
		s, ok := numberText(src)
		if !ok {
			return convErr(src, dst)
		}
		b = []byte(s)
	}
	dst.SetBytes(b)
	return nil
}

// convBool stores src in a bool field with database/sql's rule
// (driver.Bool): a bool, the integers 1 and 0, or text strconv.ParseBool
// accepts.
func convBool(dst reflect.Value, src any) error {
	v, err := sqldriver.Bool.ConvertValue(src)
	if err != nil {
		return fmt.Errorf("sqlite scan: column into %s: %w", dst.Type(), err)
	}
	dst.SetBool(v.(bool))
	return nil
}

// convInt stores src in a signed integer field: an int64 that fits, or
// the decimal text of src, as database/sql parses it (strconv.ParseInt).
func convInt(dst reflect.Value, src any) error {
	if v, ok := src.(int64); ok {
		if dst.OverflowInt(v) {
			return fmt.Errorf("sqlite scan: %d out of range of %s", v, dst.Type())
		}
		dst.SetInt(v)
		return nil
	}
	s, ok := numberText(src)
	if !ok {
		return convErr(src, dst)
	}
	v, err := strconv.ParseInt(s, 10, dst.Type().Bits())
	if err != nil {
		return fmt.Errorf("sqlite scan: column into %s: %w", dst.Type(), err)
	}
	dst.SetInt(v)
	return nil
}

// convUint stores src in an unsigned integer field: a non-negative int64
// that fits, or the decimal text of src (strconv.ParseUint).
func convUint(dst reflect.Value, src any) error {
	if v, ok := src.(int64); ok {
		if v < 0 || dst.OverflowUint(uint64(v)) {
			return fmt.Errorf("sqlite scan: %d out of range of %s", v, dst.Type())
		}
		dst.SetUint(uint64(v))
		return nil
	}
	s, ok := numberText(src)
	if !ok {
		return convErr(src, dst)
	}
	v, err := strconv.ParseUint(s, 10, dst.Type().Bits())
	if err != nil {
		return fmt.Errorf("sqlite scan: column into %s: %w", dst.Type(), err)
	}
	dst.SetUint(v)
	return nil
}

// convFloat stores src in a float field: a float64 into a float64 as it
// is, otherwise the decimal text of src parsed at the field's precision
// (strconv.ParseFloat), as database/sql does.
func convFloat(dst reflect.Value, src any) error {
	if v, ok := src.(float64); ok && dst.Kind() == reflect.Float64 {
		dst.SetFloat(v)
		return nil
	}
	s, ok := numberText(src)
	if !ok {
		return convErr(src, dst)
	}
	v, err := strconv.ParseFloat(s, dst.Type().Bits())
	if err != nil {
		return fmt.Errorf("sqlite scan: column into %s: %w", dst.Type(), err)
	}
	dst.SetFloat(v)
	return nil
}

// convTime stores src in a time.Time field: a time as the driver decoded
// it, or text in one of sqliteTextTimes.
func convTime(dst reflect.Value, src any) error {
	var text string
	switch v := src.(type) {
	case time.Time:
		dst.Set(reflect.ValueOf(v))
		return nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return convErr(src, dst)
	}
	for _, layout := range sqliteTextTimes {
		if t, err := time.Parse(layout, text); err == nil {
			dst.Set(reflect.ValueOf(t))
			return nil
		}
	}
	return fmt.Errorf("sqlite scan: text %q is not a time in any of the layouts %q", text, sqliteTextTimes)
}

// numberText returns the text database/sql parses a number from: text as
// it is, and an integer, float or bool in its shortest decimal form.
func numberText(src any) (string, bool) {
	switch v := src.(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// convErr is the error for a value of a type no conversion takes.
func convErr(src any, dst reflect.Value) error {
	return fmt.Errorf("sqlite scan: unsupported conversion of %T into %s", src, dst.Type())
}

// sqliteCell is the scan destination (sql.Scanner) of one column of the
// current row: database/sql hands it the driver's value as it is.
type sqliteCell struct {
	dst  reflect.Value
	conv sqliteConv
}

// Scan implements sql.Scanner: NULL leaves the field at its zero value.
func (c *sqliteCell) Scan(src any) error {
	if src == nil {
		return nil
	}
	return c.conv(c.dst, src)
}

// rankCell is the scan destination of the rank column.
type rankCell struct{ v int64 }

// Scan implements sql.Scanner for the rank, an integer the statement
// computes (row_number()).
func (c *rankCell) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("sqlite scan: rank column %s is %T, want an integer", dialects.RankColumn, src)
	}
	c.v = v
	return nil
}

// scanSQLite scans every row of rows into a T with the plan of its
// columns (see the comment at the top of this file), and returns the rows
// with the value of their rank column (nil when the result has none).
// capacity is the expected number of rows (0 when unknown).
func (s *sqlDriver[T]) scanSQLite(ctx context.Context, rows *sql.Rows, capacity int) ([]T, []int64, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	p := s.plans.plan(s.model.Schema(), cols)
	out := make([]T, 0, capacity)
	var ranks []int64
	dest := make([]any, len(cols))
	cells := make([]sqliteCell, len(cols))
	var held []any // GORM's per-field values, by column
	var rank rankCell
	var discard any
	for i, c := range p.scan {
		switch {
		case c.rank:
			dest[i] = &rank
			ranks = make([]int64, 0, capacity)
		case c.field == nil:
			dest[i] = &discard
		case c.conv != nil:
			cells[i].conv = c.conv
			dest[i] = &cells[i]
		default:
			if held == nil {
				held = make([]any, len(cols))
			}
		}
	}
	var zero T
	for rows.Next() {
		out = append(out, zero)
		rv := reflect.ValueOf(&out[len(out)-1]).Elem()
		for i, c := range p.scan {
			switch {
			case c.field == nil:
			case c.conv != nil:
				cells[i].dst = c.field.ReflectValueOf(ctx, rv)
			default:
				held[i] = c.field.NewValuePool.Get()
				dest[i] = held[i]
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		if held != nil {
			var errs []error
			for i, c := range p.scan {
				if c.field != nil && c.conv == nil {
					errs = append(errs, c.field.Set(ctx, rv, held[i]))
					c.field.NewValuePool.Put(held[i])
				}
			}
			if err := errors.Join(errs...); err != nil {
				return nil, nil, err
			}
		}
		if ranks != nil {
			ranks = append(ranks, rank.v)
		}
	}
	if len(out) == 0 {
		// As ScanRows leaves an empty result: nil.
		return nil, nil, nil
	}
	return out, ranks, nil
}
