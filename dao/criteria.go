package dao

import "github.com/claimstore/claimstore/dao/driver"

// Op is the operator of a [Criteria] node.
type Op = driver.Op

// The operators a [Criteria] node can hold.
const (
	OpAll     = driver.OpAll // matches every row; the zero Criteria
	OpEq      = driver.OpEq
	OpNe      = driver.OpNe
	OpLt      = driver.OpLt
	OpLe      = driver.OpLe
	OpGt      = driver.OpGt
	OpGe      = driver.OpGe
	OpIn      = driver.OpIn
	OpIsNull  = driver.OpIsNull
	OpNotNull = driver.OpNotNull
	OpAnd     = driver.OpAnd
	OpOr      = driver.OpOr
)

// Criteria is an immutable expression tree that selects rows. Build it with
// [Eq], [Ne], [Lt], [Le], [Gt], [Ge], [In], [IsNull], [NotNull], the
// field-to-field comparisons ([EqField], [LtField], …), [And] and [Or]; its
// accessors (Op, Field, Value, …) are documented on the type in package
// driver, which adapters read.
//
// The zero Criteria matches every row. Field names are column names of the
// model's GORM schema; a store checks them, with the values, before any
// backend sees them.
type Criteria = driver.Criteria

func cmp(op Op, field string, v any) Criteria { return driver.Compare(op, field, v) }

func cmpField(op Op, field, other string) Criteria { return driver.CompareFields(op, field, other) }

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
	return driver.InList(field, append([]any(nil), vs...))
}

// IsNull matches rows whose field is NULL.
func IsNull(field string) Criteria { return driver.Null(OpIsNull, field) }

// NotNull matches rows whose field is not NULL.
func NotNull(field string) Criteria { return driver.Null(OpNotNull, field) }

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
	return driver.Logic(op, kept)
}

// Order is one ordering term: a column and a direction.
type Order = driver.Order

// Asc orders by field, smallest first.
func Asc(field string) Order { return Order{Field: field} }

// Desc orders by field, largest first.
func Desc(field string) Order { return Order{Field: field, Desc: true} }

// Set maps column names to the values a write applies. A nil value sets the
// column to NULL (the column must be nullable); an [Increment] value adds to
// the current value of a numeric column.
type Set = driver.Set

// Increment is a [Set] value that adds N to a numeric column's current value
// (column = column + N), in the same guarded write as the rest of the Set.
type Increment = driver.Increment

// Incr returns an [Increment] by n, for use as a [Set] value.
func Incr(n int64) Increment { return Increment{N: n} }

// Query selects rows for [Store.Find]: rows matching Where, ordered by
// OrderBy (then by primary key), at most Limit of them when Limit > 0
// (negative is invalid).
type Query = driver.Query

// ClaimRequest describes one atomic find-and-claim ([Store.Claim]):
//
//   - Where selects eligible rows. It is re-asserted in every guarded
//     update, so a row that stopped matching between the read and the
//     write is not claimed.
//   - Set holds the claim fields written to every claimed row, for example
//     status, locked_by and locked_until. It must not be empty and must not
//     write the primary key.
//   - Limit is the largest number of rows to claim. Limit <= 0 claims
//     nothing and returns (nil, nil) without touching the backend.
//   - OrderBy picks which eligible rows are claimed first and is the order
//     of the returned slice. The primary key is appended as the final tie
//     breaker, so the order is total.
type ClaimRequest = driver.ClaimRequest
