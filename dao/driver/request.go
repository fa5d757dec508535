package driver

import "fmt"

// Op is the operator of a [Criteria] node.
type Op int

// The operators a [Criteria] node can hold.
const (
	// OpAll matches every row; it is the zero value of Criteria.
	OpAll Op = iota
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpIn
	OpIsNull
	OpNotNull
	OpAnd
	OpOr
)

var opNames = [...]string{"all", "=", "<>", "<", "<=", ">", ">=", "in", "is null", "is not null", "and", "or"}

// String returns the operator in SQL-like notation, for messages.
func (o Op) String() string {
	if o < 0 || int(o) >= len(opNames) {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

// Criteria is an immutable expression tree that selects rows; users build
// it with package dao's builders (dao.Eq, dao.And, …) and know it as
// dao.Criteria. A driver receives it checked against the model by the
// portable layer: field names are columns of the model, values are in the
// plain form [Model.Normalize] returns (int64, uint64, float64, string,
// bool, time.Time, []byte), In lists are not empty, Or has operands. A
// driver renders or evaluates it and never validates it again.
type Criteria struct {
	op       Op
	field    string
	value    any
	values   []any
	ref      string
	children []Criteria
}

// Compare returns the node "field op v" for one of the comparison
// operators OpEq … OpGe.
func Compare(op Op, field string, v any) Criteria { return Criteria{op: op, field: field, value: v} }

// CompareFields returns the node "field op other" comparing two columns.
func CompareFields(op Op, field, other string) Criteria {
	return Criteria{op: op, field: field, ref: other}
}

// InList returns the node "field IN (vs…)"; vs is not copied.
func InList(field string, vs []any) Criteria { return Criteria{op: OpIn, field: field, values: vs} }

// Null returns the node "field IS NULL" (op OpIsNull) or "field IS NOT
// NULL" (op OpNotNull).
func Null(op Op, field string) Criteria { return Criteria{op: op, field: field} }

// Logic returns the And or Or node over children, which it does not copy.
func Logic(op Op, children []Criteria) Criteria { return Criteria{op: op, children: children} }

// Op returns the node's operator.
func (c Criteria) Op() Op { return c.op }

// Field returns the column the node compares; empty for And, Or and All.
func (c Criteria) Field() string { return c.field }

// Value returns the bound value of a comparison with a value.
func (c Criteria) Value() any { return c.value }

// Values returns the list of an In node. The slice must not be modified.
func (c Criteria) Values() []any { return c.values }

// RefField returns the other column of a field-to-field comparison, or ""
// when the node compares with a value.
func (c Criteria) RefField() string { return c.ref }

// Children returns the operands of an And or Or node. The slice must not be
// modified.
func (c Criteria) Children() []Criteria { return c.children }

// IsAll reports whether c matches every row (the zero Criteria, or an And
// with no operands).
func (c Criteria) IsAll() bool {
	return c.op == OpAll || (c.op == OpAnd && len(c.children) == 0)
}

// String renders c for messages and logs; it is not SQL.
func (c Criteria) String() string {
	switch c.op {
	case OpAll:
		return "true"
	case OpAnd, OpOr:
		s := "("
		for i, ch := range c.children {
			if i > 0 {
				s += " " + c.op.String() + " "
			}
			s += ch.String()
		}
		return s + ")"
	case OpIsNull, OpNotNull:
		return c.field + " " + c.op.String()
	case OpIn:
		return fmt.Sprintf("%s in %v", c.field, c.values)
	}
	if c.ref != "" {
		return c.field + " " + c.op.String() + " " + c.ref
	}
	return fmt.Sprintf("%s %s %v", c.field, c.op, c.value)
}

// Order is one ordering term: a column and a direction (dao.Order, built by
// dao.Asc and dao.Desc).
type Order struct {
	Field string
	Desc  bool
}

// Set maps column names to the values a write applies (dao.Set). A nil
// value sets the column to NULL; an [Increment] value adds to the current
// value of a numeric column. A driver receives it checked: columns exist
// and are not the primary key, a value is nil (nullable columns only), a
// plain value, an Increment (numeric columns), or, for a column the
// package cannot compare (JSON, custom types), a value of the field's own
// Go type.
type Set map[string]any

// Increment is a [Set] value that adds N to a numeric column's current
// value (column = column + N), in the same write as the rest of the Set
// (dao.Increment, built by dao.Incr).
type Increment struct{ N int64 }

// Query is a read (dao.Query): criteria, an order, a limit (0 means none).
// A driver receives it checked: the order ends with the primary key, so it
// is total, and the limit is not negative.
type Query struct {
	Where   Criteria
	OrderBy []Order
	Limit   int
}

// ClaimRequest is one find-and-claim (dao.ClaimRequest, where its fields
// are documented). A driver receives it checked: Limit > 0, Set not empty
// and not writing the primary key, OrderBy ending with the primary key.
type ClaimRequest struct {
	Where   Criteria
	Set     Set
	Limit   int
	OrderBy []Order
}
