package dao

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

// Criteria is an immutable expression tree that selects rows. Build it with
// [Eq], [Ne], [Lt], [Le], [Gt], [Ge], [In], [IsNull], [NotNull], the
// field-to-field comparisons ([EqField], [LtField], …), [And] and [Or].
//
// The zero Criteria matches every row. Field names are column names of the
// model's GORM schema; they are checked, with the values, by
// [Model.CheckCriteria] before any backend sees them.
type Criteria struct {
	op       Op
	field    string
	value    any
	values   []any
	ref      string // other field, for field-to-field comparisons
	children []Criteria
}

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

func cmp(op Op, field string, v any) Criteria { return Criteria{op: op, field: field, value: v} }

func cmpField(op Op, field, other string) Criteria { return Criteria{op: op, field: field, ref: other} }

// Eq matches rows whose field equals v. A nil v is invalid: use [IsNull].
func Eq(field string, v any) Criteria { return cmp(OpEq, field, v) }

// Ne matches rows whose field is not NULL and differs from v (SQL three-valued
// logic: a NULL field matches neither Eq nor Ne).
func Ne(field string, v any) Criteria { return cmp(OpNe, field, v) }

// Lt matches rows whose field is less than v.
func Lt(field string, v any) Criteria { return cmp(OpLt, field, v) }

// Le matches rows whose field is less than or equal to v.
func Le(field string, v any) Criteria { return cmp(OpLe, field, v) }

// Gt matches rows whose field is greater than v.
func Gt(field string, v any) Criteria { return cmp(OpGt, field, v) }

// Ge matches rows whose field is greater than or equal to v.
func Ge(field string, v any) Criteria { return cmp(OpGe, field, v) }

// In matches rows whose field equals one of vs. An empty list is invalid
// ([ErrInvalidArgument]) rather than silently matching nothing.
func In(field string, vs ...any) Criteria {
	return Criteria{op: OpIn, field: field, values: append([]any(nil), vs...)}
}

// IsNull matches rows whose field is NULL.
func IsNull(field string) Criteria { return Criteria{op: OpIsNull, field: field} }

// NotNull matches rows whose field is not NULL.
func NotNull(field string) Criteria { return Criteria{op: OpNotNull, field: field} }

// EqField matches rows where field equals other (both columns, not NULL).
func EqField(field, other string) Criteria { return cmpField(OpEq, field, other) }

// NeField matches rows where field differs from other (both not NULL).
func NeField(field, other string) Criteria { return cmpField(OpNe, field, other) }

// LtField matches rows where field is less than other, e.g.
// LtField("retry_count", "max_retries").
func LtField(field, other string) Criteria { return cmpField(OpLt, field, other) }

// LeField matches rows where field is less than or equal to other.
func LeField(field, other string) Criteria { return cmpField(OpLe, field, other) }

// GtField matches rows where field is greater than other.
func GtField(field, other string) Criteria { return cmpField(OpGt, field, other) }

// GeField matches rows where field is greater than or equal to other.
func GeField(field, other string) Criteria { return cmpField(OpGe, field, other) }

// And matches rows that match every operand. And() with no operands matches
// every row; zero-value operands (match-all) are dropped.
func And(cs ...Criteria) Criteria { return combine(OpAnd, cs) }

// Or matches rows that match at least one operand. Or() with no operands is
// invalid ([ErrInvalidArgument]); an operand that matches every row makes
// the whole Or match every row.
func Or(cs ...Criteria) Criteria { return combine(OpOr, cs) }

func combine(op Op, cs []Criteria) Criteria {
	kept := make([]Criteria, 0, len(cs))
	for _, c := range cs {
		if c.IsAll() {
			if op == OpOr {
				return Criteria{}
			}
			continue
		}
		kept = append(kept, c)
	}
	if op == OpAnd {
		switch len(kept) {
		case 0:
			return Criteria{}
		case 1:
			return kept[0]
		}
	}
	return Criteria{op: op, children: kept}
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

// Order is one ordering term: a column and a direction.
type Order struct {
	Field string
	Desc  bool
}

// Asc orders by field, smallest first.
func Asc(field string) Order { return Order{Field: field} }

// Desc orders by field, largest first.
func Desc(field string) Order { return Order{Field: field, Desc: true} }

// Set maps column names to the values a write applies. A nil value sets the
// column to NULL (the column must be nullable); an [Increment] value adds to
// the current value of a numeric column.
type Set map[string]any

// Increment is a [Set] value that adds N to a numeric column's current value
// (column = column + N), in the same guarded write as the rest of the Set.
type Increment struct{ N int64 }

// Incr returns an [Increment] by n, for use as a [Set] value.
func Incr(n int64) Increment { return Increment{N: n} }

// Query selects rows for [Store.Find].
type Query struct {
	Where   Criteria
	OrderBy []Order
	// Limit caps the number of rows returned; 0 means no cap. Negative is
	// invalid.
	Limit int
}

// ClaimRequest describes one atomic find-and-claim.
type ClaimRequest struct {
	// Where selects eligible rows. It is re-asserted in every guarded
	// update, so a row that stopped matching between the read and the write
	// is not claimed.
	Where Criteria
	// Set holds the claim fields written to every claimed row, for example
	// status, locked_by and locked_until. It must not be empty and must not
	// write the primary key.
	Set Set
	// Limit is the largest number of rows to claim. Limit <= 0 claims
	// nothing and returns (nil, nil) without touching the backend.
	Limit int
	// OrderBy picks which eligible rows are claimed first and is the order
	// of the returned slice. The primary key is appended as the final tie
	// breaker, so the order is total.
	OrderBy []Order
}
