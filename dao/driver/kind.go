package driver

import (
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
	"gorm.io/gorm/schema"
)

// Kind is the comparison class of a column, from the Go type of its field
// (what the type stores, through pointers, sql.Null* and driver.Valuer);
// an explicit `type:` tag only refines it. Criteria, ordering and
// Increment work on every kind but KindOther.
type Kind int

// The column kinds.
const (
	// KindOther columns are read and written, never compared: JSON
	// columns, serializer fields, exact decimals, custom GORM data types,
	// and fields whose Go type and `type:` tag disagree. [Model.Normalize]
	// names the reason.
	KindOther Kind = iota
	KindInt
	KindUint
	KindFloat
	KindString
	KindBool
	KindTime
	KindBytes
	// KindUUID is a column of the database's UUID type (tag `type:uuid`
	// on a string or UUID field): its plain form is the canonical text,
	// lowercase with hyphens, and it compares only with UUID columns.
	KindUUID
)

var kindNames = [...]string{"other", "int", "uint", "float", "string", "bool", "time", "bytes", "uuid"}

// String returns the kind's name, for messages.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// kindInfo is the classification of one field.
type kindInfo struct {
	kind Kind
	// why says why a KindOther column cannot be compared.
	why string
	// scan: the field's Go type (under pointers) is a struct or array
	// with a sql.Scanner, such as uuid.UUID or sql.NullString; values are
	// normalized by scanning them into a fresh one and reading its Value,
	// so that a value the type refuses is refused before anything is
	// sent, and a value is compared in the form the type stores.
	scan reflect.Type
}

// kindCache holds the kindInfo of every classified field, by
// *schema.Field. Schemas are cached per type and naming strategy
// (see NewModel), so it stays small.
var kindCache sync.Map

// KindOf returns the kind of column f, from f's Go type refined by its
// `type:` tag (see [Kind] and docs/models.md for the table).
func KindOf(f *schema.Field) Kind { return kindOf(f).kind }

// KindOf returns the kind of column f of the model; see the package
// function [KindOf].
func (m *Model[T]) KindOf(f *schema.Field) Kind { return kindOf(f).kind }

func kindOf(f *schema.Field) kindInfo {
	if v, ok := kindCache.Load(f); ok {
		return v.(kindInfo)
	}
	ki := classify(f)
	kindCache.Store(f, ki)
	return ki
}

// decimalWhy is why exact decimal columns are not compared.
const decimalWhy = "is an exact decimal (numeric/decimal), which no comparison treats the same way on every backend: " +
	"MySQL and SQLite compare it with a bound value as a double, Elasticsearch has no exact decimal type and the " +
	"memory store would compare its text; compare a scaled integer column instead"

var (
	scannerType = reflect.TypeOf((*sql.Scanner)(nil)).Elem()
	valuerType  = reflect.TypeOf((*sqldriver.Valuer)(nil)).Elem()
)

// tagTypes maps the first word of a `type:` tag, lower-cased and without
// its size, to the refinement it makes.
var tagTypes = map[string]string{
	"varchar": "text", "char": "text", "character": "text", "text": "text", "nvarchar": "text", "nchar": "text",
	"tinytext": "text", "mediumtext": "text", "longtext": "text", "string": "text",
	"smallint": "int", "int": "int", "integer": "int", "bigint": "int", "tinyint": "int", "mediumint": "int",
	"int2": "int", "int4": "int", "int8": "int", "serial": "int", "bigserial": "int", "smallserial": "int",
	"uuid": "uuid", "uniqueidentifier": "uuid",
	"numeric": "decimal", "decimal": "decimal", "money": "decimal", "number": "decimal",
	"json": "json", "jsonb": "json",
}

// tagType returns the refinement of f's `type:` tag, or "" for none.
func tagType(f *schema.Field) string {
	tag := strings.ToLower(strings.TrimSpace(f.TagSettings["TYPE"]))
	if i := strings.IndexAny(tag, "( "); i >= 0 {
		tag = tag[:i]
	}
	return tagTypes[tag]
}

// classify computes the kindInfo of f.
func classify(f *schema.Field) kindInfo {
	if f.Serializer != nil {
		return kindInfo{why: "is written through a GORM serializer"}
	}
	tag := tagType(f)
	switch tag {
	case "json":
		return kindInfo{why: "is a JSON column"}
	case "decimal":
		return kindInfo{why: decimalWhy}
	}
	base := f.IndirectFieldType
	ki := kindInfo{kind: goKind(f.GORMDataType)}
	if base.Kind() == reflect.Struct || base.Kind() == reflect.Array {
		if reflect.PointerTo(base).Implements(scannerType) && base != timeType {
			ki.scan = base
		}
		if ki.kind == KindString && decimalValuer(base) {
			return kindInfo{why: decimalWhy}
		}
	}
	if ki.kind == KindOther {
		ki.why = fmt.Sprintf("has the GORM data type %q, which claimstore does not compare", f.GORMDataType)
		return ki
	}
	switch tag {
	case "text":
		if ki.kind != KindString {
			return kindInfo{why: fmt.Sprintf("holds a %s in a text column (tag type:%s), which sorts and compares as text in SQL", ki.kind, f.TagSettings["TYPE"])}
		}
	case "int":
		if ki.kind != KindInt && ki.kind != KindUint && ki.kind != KindBool {
			return kindInfo{why: fmt.Sprintf("holds a %s in an integer column (tag type:%s)", ki.kind, f.TagSettings["TYPE"])}
		}
	case "uuid":
		if ki.kind != KindString {
			return kindInfo{why: fmt.Sprintf("holds a %s in a UUID column (tag type:%s)", ki.kind, f.TagSettings["TYPE"])}
		}
		ki.kind = KindUUID
	}
	return ki
}

// goKind maps the data type GORM derives from a field's Go type (before
// any `type:` tag) to a kind.
func goKind(dt schema.DataType) Kind {
	switch dt {
	case schema.Int:
		return KindInt
	case schema.Uint:
		return KindUint
	case schema.Float:
		return KindFloat
	case schema.String:
		return KindString
	case schema.Bool:
		return KindBool
	case schema.Time:
		return KindTime
	case schema.Bytes:
		return KindBytes
	}
	return KindOther
}

// decimalValuer reports whether the struct or array type t is a Valuer
// whose zero value stores a number as text, as decimal types do
// (shopspring/decimal's Decimal stores "0").
func decimalValuer(t reflect.Type) bool {
	if !t.Implements(valuerType) {
		return false
	}
	v, err := reflect.Zero(t).Interface().(sqldriver.Valuer).Value()
	s, ok := v.(string)
	if err != nil || !ok {
		return false
	}
	_, perr := strconv.ParseFloat(s, 64)
	return perr == nil
}

// canonical returns p, a plain value for a column described by ki, in
// the form the column stores: through the field's own scanner type (so
// that "0190F3C4-…" becomes the uuid.UUID's lowercase text, and a string
// uuid.UUID cannot parse is refused), and for a UUID column as its
// canonical text.
func canonical(ki kindInfo, p any) (any, error) {
	if ki.scan != nil {
		x := reflect.New(ki.scan)
		if err := x.Interface().(sql.Scanner).Scan(p); err != nil {
			return nil, fmt.Errorf("value %v is not a valid %s: %w", p, ki.scan, err)
		}
		v, err := plain(x.Elem().Interface())
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, fmt.Errorf("value %v is NULL as a %s", p, ki.scan)
		}
		p = v
	}
	if ki.kind == KindUUID {
		s, ok := p.(string)
		if !ok {
			return nil, fmt.Errorf("value of type %T for a UUID column", p)
		}
		u, err := uuid.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("value %q is not a UUID: %w", s, err)
		}
		p = u.String()
	}
	return p, nil
}
