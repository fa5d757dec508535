package driver

import (
	"context"
	sqldriver "database/sql/driver"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm/schema"
)

// Model is the parsed GORM schema of T. It validates field names and values
// against the schema, normalizes values to the plain types every driver
// binds (int64, uint64, float64, string, bool, time.Time, []byte), and reads
// and writes fields of a *T. Every adapter parses the same schema, so one
// model type works on every backend. A Model is safe for concurrent use.
type Model[T any] struct {
	schema  *schema.Schema
	columns []string
	byName  map[string]*schema.Field
	pk      *schema.Field
	// checks are the columns CheckRow checks (those of a kind the
	// package compares), with their kinds, in column order.
	checks []columnCheck
}

// columnCheck is one column [Model.CheckRow] checks.
type columnCheck struct {
	name string
	f    *schema.Field
	ki   kindInfo
	mode checkMode
}

// checkMode is how CheckRow reads a column: for a field of a plain Go
// kind (no driver.Valuer, not a pointer) straight from the struct,
// without making an interface value of it.
type checkMode uint8

const (
	checkValue  checkMode = iota // the field's value, converted as Normalize converts
	checkNone                    // a Go integer or bool of the column's kind: always storable
	checkString                  // a Go string of a text column: valid UTF-8, no NUL
)

// DirectField reports whether f is reached from its model's struct
// through struct fields alone, no pointer to an embedded struct, so that
// GORM's ReflectValueOf reads it without changing the row: to reach a
// field of a nil embedded pointer struct it allocates that struct.
func DirectField(f *schema.Field) bool {
	t := f.Schema.ModelType
	idx := f.StructField.Index
	for i, n := range idx {
		for t.Kind() == reflect.Pointer {
			if i > 0 {
				return false
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || n < 0 || n >= t.NumField() {
			return false
		}
		t = t.Field(n).Type
	}
	return true
}

// checkModeOf returns the check mode of field f of kind ki.
func checkModeOf(f *schema.Field, ki kindInfo) checkMode {
	t := f.FieldType
	if t.Implements(valuerType) || reflect.PointerTo(t).Implements(valuerType) || !DirectField(f) {
		return checkValue
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if ki.kind == KindInt {
			return checkNone
		}
	case reflect.Bool:
		if ki.kind == KindBool {
			return checkNone
		}
	case reflect.String:
		if ki.kind == KindString {
			return checkString
		}
	}
	return checkValue
}

// schemaCaches holds one GORM schema cache per naming strategy: GORM's
// cache is keyed by the model type alone, so one cache shared by two
// strategies would give the second the first one's table and column
// names.
var schemaCaches sync.Map // schema.Namer → *sync.Map

// schemaCache returns the schema cache of namer, or a fresh one when
// namer cannot be a map key (a naming strategy holding a func, a map or
// a slice): such a model is parsed again by every NewModel.
func schemaCache(namer schema.Namer) *sync.Map {
	if !reflect.ValueOf(namer).Comparable() {
		return &sync.Map{}
	}
	c, _ := schemaCaches.LoadOrStore(namer, &sync.Map{})
	return c.(*sync.Map)
}

// NewModel parses T (a struct type, usually with gorm tags) with namer, or
// GORM's default naming strategy when namer is nil, as GORM does: table
// names from TableName() or the namer (TablePrefix, SingularTable,
// NameReplacer), column names from column: tags or the namer, embedded
// structs with their embeddedPrefix. Models of one type parsed with
// different namers have each their own names. It returns an error
// wrapping [ErrInvalidArgument] when T is not a struct GORM can parse or
// has not exactly one primary-key column.
func NewModel[T any](namer schema.Namer) (*Model[T], error) {
	if namer == nil {
		namer = schema.NamingStrategy{}
	}
	var zero T
	s, err := schema.Parse(&zero, schemaCache(namer), namer)
	if err != nil {
		return nil, fmt.Errorf("%w: parse model %T: %w", ErrInvalidArgument, zero, err)
	}
	if len(s.PrimaryFields) != 1 {
		return nil, fmt.Errorf("%w: model %T must have exactly one primary key column, has %d", ErrInvalidArgument, zero, len(s.PrimaryFields))
	}
	m := &Model[T]{schema: s, byName: map[string]*schema.Field{}, pk: s.PrimaryFields[0]}
	for _, f := range s.Fields {
		if f.DBName == "" {
			continue
		}
		m.byName[f.DBName] = f
		m.columns = append(m.columns, f.DBName)
		if ki := kindOf(f); ki.kind != KindOther {
			m.checks = append(m.checks, columnCheck{f.DBName, f, ki, checkModeOf(f, ki)})
		}
	}
	return m, nil
}

// Schema returns the parsed GORM schema.
func (m *Model[T]) Schema() *schema.Schema { return m.schema }

// Table returns the table name the schema gives T.
func (m *Model[T]) Table() string { return m.schema.Table }

// PrimaryKey returns the primary-key column name.
func (m *Model[T]) PrimaryKey() string { return m.pk.DBName }

// Columns returns every column name in declaration order. The slice must not
// be modified.
func (m *Model[T]) Columns() []string { return m.columns }

// Field returns the schema field of column name, or an error wrapping
// [ErrInvalidArgument] when the model has no such column.
func (m *Model[T]) Field(name string) (*schema.Field, error) {
	f, ok := m.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown field %q for %s", ErrInvalidArgument, name, m.schema.Name)
	}
	return f, nil
}

var timeType = reflect.TypeOf(time.Time{})

// plain reduces v to one of the plain driver types, following pointers and
// driver.Valuer. It returns nil for a nil pointer or a NULL Valuer.
func plain(v any) (any, error) {
	for i := 0; i < 8; i++ {
		switch x := v.(type) {
		case nil:
			return nil, nil
		case int64, uint64, float64, string, bool, []byte:
			return x, nil
		case time.Time:
			return x, nil
		case Increment:
			return nil, fmt.Errorf("Increment is only valid as a Set value")
		case sqldriver.Valuer:
			rv := reflect.ValueOf(x)
			if rv.Kind() == reflect.Pointer && rv.IsNil() {
				return nil, nil
			}
			dv, err := x.Value()
			if err != nil {
				return nil, err
			}
			v = dv
			continue
		}
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Pointer:
			if rv.IsNil() {
				return nil, nil
			}
			v = rv.Elem().Interface()
			continue
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return rv.Int(), nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			return rv.Uint(), nil
		case reflect.Float32, reflect.Float64:
			return rv.Float(), nil
		case reflect.String:
			return rv.String(), nil
		case reflect.Bool:
			return rv.Bool(), nil
		case reflect.Slice:
			if rv.Type().Elem().Kind() == reflect.Uint8 {
				return rv.Bytes(), nil
			}
		case reflect.Struct:
			if rv.Type().ConvertibleTo(timeType) {
				return rv.Convert(timeType).Interface(), nil
			}
		}
		return nil, fmt.Errorf("unsupported value type %T", v)
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// coerce converts the plain value p to the plain type of a column of Kind k.
func coerce(k Kind, p any) (any, bool) {
	switch k {
	case KindInt:
		switch x := p.(type) {
		case int64:
			return x, true
		case uint64:
			if x <= math.MaxInt64 {
				return int64(x), true
			}
		}
	case KindUint:
		switch x := p.(type) {
		case int64:
			if x >= 0 {
				return uint64(x), true
			}
		case uint64:
			return x, true
		}
	case KindFloat:
		if f, ok := toFloat(p); ok {
			return f, true
		}
	case KindString, KindUUID:
		if s, ok := p.(string); ok {
			return s, true
		}
	case KindBool:
		if b, ok := p.(bool); ok {
			return b, true
		}
	case KindTime:
		if t, ok := p.(time.Time); ok {
			return t, true
		}
	case KindBytes:
		if b, ok := p.([]byte); ok {
			return b, true
		}
	}
	return nil, false
}

// Normalize checks v, a value for column f, and returns it in plain form
// (int64, uint64, float64, string, bool, time.Time or []byte), following
// pointers and driver.Valuer. A nil v (or a nil pointer, a NULL Valuer) is
// an error unless allowNil, and then returns nil. A value that does not fit
// the column, or that [Model.CheckRow] would refuse, is an error wrapping
// [ErrInvalidArgument].
func (m *Model[T]) Normalize(f *schema.Field, v any, allowNil bool) (any, error) {
	ki := kindOf(f)
	k := ki.kind
	if k == KindOther {
		return nil, fmt.Errorf("%w: field %q of type %s cannot be compared or set to a plain value: it %s", ErrInvalidArgument, f.DBName, f.FieldType, ki.why)
	}
	p, err := plain(v)
	if err != nil {
		return nil, fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, f.DBName, err)
	}
	if p == nil {
		if allowNil {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: field %q: nil value (use IsNull or NotNull)", ErrInvalidArgument, f.DBName)
	}
	c, ok := coerce(k, p)
	if !ok {
		return nil, fmt.Errorf("%w: field %q of type %s: value of type %T does not fit", ErrInvalidArgument, f.DBName, f.FieldType, v)
	}
	if c, err = canonical(ki, c); err != nil {
		return nil, fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, f.DBName, err)
	}
	if err := storable(f, c); err != nil {
		return nil, fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, f.DBName, err)
	}
	return c, nil
}

// The portable time range: every backend stores the instants from
// minTime to maxTime (UTC) and reads them back unchanged. MySQL and MariaDB
// DATETIME are the narrowest: they end at 9999-12-31 23:59:59.999999, and
// a fraction is rounded (MySQL) or truncated (MariaDB) to the column's
// precision, so the range ends at a whole second. Before year 1 the text
// SQLite compares and the JSON Elasticsearch indexes no longer sort or
// parse.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// storable reports why the plain value c (of column f) cannot be stored
// and compared the same way on every backend, or nil when it can:
//
//   - a string must be valid UTF-8 (PostgreSQL refuses invalid bytes with
//     SQLSTATE 22021, MySQL with error 1366, SQLite stores them and
//     Elasticsearch replaces them) and hold no NUL byte (PostgreSQL text
//     cannot hold one, SQLSTATE 22021);
//   - a float must be finite: PostgreSQL stores NaN and ±Infinity, MySQL
//     refuses them, SQLite stores NaN as NULL and JSON has no form for
//     them; a float for a float32 field must fit in a float32;
//   - an integer must fit in the field's Go type and in a signed 64-bit
//     integer (PostgreSQL, SQLite and Elasticsearch have no unsigned
//     64-bit column);
//   - a time's instant must lie between 0001-01-01 00:00:00 UTC and
//     9999-12-31 23:59:59 UTC inclusive, whatever its zone.
func storable(f *schema.Field, c any) error {
	t := f.FieldType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := c.(type) {
	case string:
		if !utf8.ValidString(x) {
			return fmt.Errorf("string %q is not valid UTF-8", x)
		}
		if strings.IndexByte(x, 0) >= 0 {
			return fmt.Errorf("string %q holds a NUL byte", x)
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("float %v is not finite", x)
		}
		if t.Kind() == reflect.Float32 && reflect.Zero(t).OverflowFloat(x) {
			return fmt.Errorf("float %v does not fit in %s", x, t)
		}
	case int64:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if reflect.Zero(t).OverflowInt(x) {
				return fmt.Errorf("integer %d does not fit in %s", x, t)
			}
		}
	case uint64:
		if x > math.MaxInt64 {
			return fmt.Errorf("integer %d does not fit in a signed 64-bit integer", x)
		}
		switch t.Kind() {
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if reflect.Zero(t).OverflowUint(x) {
				return fmt.Errorf("integer %d does not fit in %s", x, t)
			}
		}
	case time.Time:
		if x.Before(minTime) || x.After(maxTime) {
			return fmt.Errorf("time %v is outside the range every backend stores, %s to %s",
				x, minTime.Format(time.DateTime), maxTime.Format(time.DateTime)+" UTC")
		}
	}
	return nil
}

// Nullable reports whether column f can hold NULL: its Go type is a pointer
// or a struct with a Valid bool field (sql.NullString and friends).
func Nullable(f *schema.Field) bool {
	t := f.FieldType
	if t.Kind() == reflect.Pointer {
		return true
	}
	if t.Kind() == reflect.Struct {
		if v, ok := t.FieldByName("Valid"); ok && v.Type.Kind() == reflect.Bool {
			return true
		}
	}
	return false
}

// CheckRow checks the values of row's fields as [Model.Normalize] checks
// values, before anything is sent: a string that is not valid UTF-8 or
// holds a NUL byte, a float that is NaN or infinite, an unsigned integer
// above the largest int64, a time outside 0001-01-01 00:00:00 UTC to
// 9999-12-31 23:59:59 UTC. Every adapter's Create calls it, so that every
// backend refuses the same rows. Fields of a type the package cannot
// compare (JSON, custom types) are not checked. A nil row or a bad value
// is an error wrapping [ErrInvalidArgument].
func (m *Model[T]) CheckRow(row *T) error {
	if row == nil {
		return fmt.Errorf("%w: nil item", ErrInvalidArgument)
	}
	rv := reflect.ValueOf(row).Elem()
	for _, c := range m.checks {
		f, ki, name := c.f, c.ki, c.name
		switch c.mode {
		case checkNone:
			continue
		case checkString:
			if err := storable(f, f.ReflectValueOf(context.Background(), rv).String()); err != nil {
				return fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, name, err)
			}
			continue
		}
		v, _ := f.ValueOf(context.Background(), rv)
		// A time.Time needs none of plain's and coerce's conversions,
		// which return it unchanged.
		switch x := v.(type) {
		case time.Time:
			if ki.kind == KindTime {
				if err := storable(f, x); err != nil {
					return fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, name, err)
				}
				continue
			}
		}
		p, err := plain(v)
		if err != nil || p == nil {
			continue
		}
		c, ok := coerce(ki.kind, p)
		if !ok {
			continue
		}
		if ki.kind == KindUUID {
			if _, err := canonical(ki, c); err != nil {
				return fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, name, err)
			}
		}
		if err := storable(f, c); err != nil {
			return fmt.Errorf("%w: field %q: %w", ErrInvalidArgument, name, err)
		}
	}
	return nil
}

// SetColumns returns the column names of set in sorted order, so that
// rendered statements are deterministic.
func SetColumns(set Set) []string {
	cols := make([]string, 0, len(set))
	for c := range set {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	return cols
}

// ID returns the primary-key value of row in plain form.
func (m *Model[T]) ID(row *T) any {
	v, _ := m.Value(row, m.pk.DBName)
	return v
}

// Value returns the value of column name in row, in plain form (nil for
// NULL); a serializer field's value is its serialized form, and values of
// other columns the package cannot compare are returned as they are. The
// boolean is false when the model has no such column.
func (m *Model[T]) Value(row *T, name string) (any, bool) {
	f, ok := m.byName[name]
	if !ok {
		return nil, false
	}
	v, _ := f.ValueOf(context.Background(), reflect.ValueOf(row).Elem())
	ki := kindOf(f)
	if ki.kind == KindOther {
		if f.Serializer != nil {
			// GORM's serializer wrapper: its Value is the serialized form.
			if p, err := plain(v); err == nil {
				return p, true
			}
		}
		return v, true
	}
	p, err := plain(v)
	if err != nil {
		return v, true
	}
	if p != nil {
		if c, ok := coerce(ki.kind, p); ok {
			if ki.kind == KindUUID {
				if u, err := canonical(ki, c); err == nil {
					c = u
				}
			}
			return c, true
		}
	}
	return p, true
}

// Serialize returns v, a value of the Go type of field f, in the form a
// Set carries it to a driver: for a field with a GORM serializer
// (serializer:json) its serialized form, as GORM writes it (the JSON
// text); for other fields v unchanged. A value the serializer refuses is
// an error wrapping [ErrInvalidArgument].
func (m *Model[T]) Serialize(f *schema.Field, v any) (any, error) {
	if f.Serializer == nil {
		return v, nil
	}
	var zero T
	out, err := f.Serializer.Value(context.Background(), f, reflect.ValueOf(&zero).Elem(), v)
	if err != nil {
		return nil, fmt.Errorf("%w: field %q: serialize: %w", ErrInvalidArgument, f.DBName, err)
	}
	return out, nil
}

// Apply writes set (checked) into row, as the database
// applies it: plain values are assigned, Increment adds to the current
// value, a serializer field's serialized form is read back through its
// serializer. It is how the portable default returns a row in its post-claim
// state without reading it again.
func (m *Model[T]) Apply(row *T, set Set) error {
	rv := reflect.ValueOf(row).Elem()
	ctx := context.Background()
	for name, v := range set {
		f, err := m.Field(name)
		if err != nil {
			return err
		}
		if inc, ok := v.(Increment); ok {
			cur, _ := m.Value(row, name)
			switch x := cur.(type) {
			case int64:
				v = x + inc.N
			case uint64:
				v = uint64(int64(x) + inc.N)
			case float64:
				v = x + float64(inc.N)
			case nil:
				continue // NULL + n is NULL in SQL
			}
		}
		if f.Serializer != nil {
			if err := f.Serializer.Scan(ctx, f, rv, v); err != nil {
				return fmt.Errorf("claimstore: deserialize field %q: %w", name, err)
			}
			continue
		}
		if f.FieldType.Kind() == reflect.Pointer {
			// GORM's setters write a value through a non-nil pointer; start
			// from nil so that a new one is allocated and a copy of row that
			// shares the old pointer is left unchanged.
			f.ReflectValueOf(ctx, rv).Set(reflect.Zero(f.FieldType))
		}
		if err := f.Set(ctx, rv, v); err != nil {
			return fmt.Errorf("claimstore: set field %q: %w", name, err)
		}
	}
	return nil
}

// UniqueKeys returns the column sets the schema declares unique: each
// unique index (tag uniqueIndex, or index with class UNIQUE) and each column
// tagged unique. The primary key is not included. Backends that enforce
// constraints themselves (memory, Elasticsearch) use it to report
// [ErrDuplicate].
func (m *Model[T]) UniqueKeys() [][]string {
	var keys [][]string
	for _, idx := range m.schema.ParseIndexes() {
		if idx.Class != "UNIQUE" {
			continue
		}
		cols := make([]string, 0, len(idx.Fields))
		for _, f := range idx.Fields {
			cols = append(cols, f.DBName)
		}
		keys = append(keys, cols)
	}
	for _, f := range m.schema.Fields {
		if f.Unique && f != m.pk {
			keys = append(keys, []string{f.DBName})
		}
	}
	return keys
}
