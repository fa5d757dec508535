package difftest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// The value domains are small so that criteria match some rows and miss
// others, and every value is stored exactly on every backend.
var (
	ints    = []int64{-1, 0, 1, 2, 3}
	floats  = []float64{-1.5, 0, 0.5, 1, 2.25}
	strs    = []string{"", "a", "b", "ab", "ba", "c"}
	base    = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	hours   = []int{0, 1, 2, 3, 4}
	columns = []string{"id", "a", "b", "n", "f", "s", "t", "at", "bt", "ok"}
)

// kind groups the columns that compare with each other.
func kind(col string) string {
	switch col {
	case "id", "a", "b", "n", "f":
		return "num"
	case "s", "t":
		return "str"
	case "at", "bt":
		return "time"
	}
	return "bool"
}

func nullable(col string) bool { return col != "id" && col != "n" }

func pick[V any](r *rand.Rand, vs []V) V { return vs[r.IntN(len(vs))] }

func ptr[V any](v V) *V { return &v }

func at(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }

// value returns a random non-NULL value for col.
func value(r *rand.Rand, col string) any {
	switch col {
	case "id":
		return int64(r.IntN(16) + 1)
	case "a", "b", "n":
		return pick(r, ints)
	case "f":
		if r.IntN(4) == 0 {
			return pick(r, ints) // an integer bound to a float column
		}
		return pick(r, floats)
	case "s", "t":
		return pick(r, strs)
	case "at", "bt":
		return at(pick(r, hours))
	}
	return r.IntN(2) == 0
}

// Generate returns a random case of at most maxRows rows and 1..maxOps
// calls.
func Generate(r *rand.Rand, maxRows, maxOps int) Case {
	var c Case
	n := r.IntN(maxRows + 1)
	null := func() bool { return r.IntN(5) < 2 } // 40% NULL
	for i := 0; i < n; i++ {
		row := Row{ID: int64(i + 1), N: pick(r, ints)}
		if !null() {
			row.A = ptr(pick(r, ints))
		}
		if !null() {
			row.B = ptr(pick(r, ints))
		}
		if !null() {
			row.F = ptr(pick(r, floats))
		}
		if !null() {
			row.S = ptr(pick(r, strs))
		}
		if !null() {
			row.T = ptr(pick(r, strs))
		}
		if !null() {
			row.At = ptr(at(pick(r, hours)))
		}
		if !null() {
			row.Bt = ptr(at(pick(r, hours)))
		}
		if !null() {
			row.Ok = ptr(r.IntN(2) == 0)
		}
		c.Rows = append(c.Rows, row)
	}
	ops := r.IntN(maxOps) + 1
	for i := 0; i < ops; i++ {
		c.Ops = append(c.Ops, genOp(r, maxRows))
	}
	return c
}

func genOp(r *rand.Rand, maxRows int) Op {
	op := Op{Where: Criteria(r, 0)}
	switch x := r.IntN(20); {
	case x < 6:
		op.Kind = OpFind
		op.OrderBy = genOrder(r)
		if r.IntN(2) == 0 {
			op.Limit = r.IntN(maxRows) + 1
		}
	case x < 9:
		op.Kind = OpCount
	case x < 12:
		op.Kind = OpUpdate
		op.Set = genSet(r)
	case x < 14:
		op.Kind = OpDelete
		op.Limit = r.IntN(4) + 1
	default:
		op.Kind = OpClaim
		op.OrderBy = genOrder(r)
		op.Limit = r.IntN(5) + 1
		op.Set = genSet(r)
	}
	return op
}

func genOrder(r *rand.Rand) []dao.Order {
	var out []dao.Order
	for range r.IntN(4) {
		col := pick(r, columns)
		if r.IntN(2) == 0 {
			out = append(out, dao.Desc(col))
		} else {
			out = append(out, dao.Asc(col))
		}
	}
	return out
}

func genSet(r *rand.Rand) dao.Set {
	set := dao.Set{}
	for range r.IntN(3) + 1 {
		col := pick(r, columns[1:]) // never the primary key
		switch {
		case kind(col) == "num" && r.IntN(4) == 0:
			set[col] = dao.Incr(int64(r.IntN(5) - 2))
		case nullable(col) && r.IntN(3) == 0:
			set[col] = nil
		default:
			set[col] = value(r, col)
		}
	}
	return set
}

// maxDepth bounds the nesting of And and Or.
const maxDepth = 3

// Criteria returns a random criteria tree at nesting depth d: leaves of
// every operator (field-to-field comparisons among them), match-all
// leaves, and And and Or nodes of zero to three operands. An Or of zero
// operands, which every store must refuse, is rare.
func Criteria(r *rand.Rand, d int) dao.Criteria {
	if d >= maxDepth || r.IntN(100) < 45 {
		return leaf(r)
	}
	var n int
	switch x := r.IntN(100); {
	case x < 8:
		n = 0
	case x < 40:
		n = 1
	case x < 75:
		n = 2
	default:
		n = 3
	}
	kids := make([]dao.Criteria, n)
	for i := range kids {
		kids[i] = Criteria(r, d+1)
	}
	if r.IntN(2) == 0 || (n == 0 && r.IntN(10) != 0) {
		return dao.And(kids...)
	}
	return dao.Or(kids...)
}

var cmps = []func(string, any) dao.Criteria{dao.Eq, dao.Ne, dao.Lt, dao.Le, dao.Gt, dao.Ge}

var fieldCmps = []func(string, string) dao.Criteria{dao.EqField, dao.NeField, dao.LtField, dao.LeField, dao.GtField, dao.GeField}

func leaf(r *rand.Rand) dao.Criteria {
	col := pick(r, columns)
	switch x := r.IntN(100); {
	case x < 3:
		return dao.Criteria{}
	case x < 13:
		return dao.IsNull(col)
	case x < 21:
		return dao.NotNull(col)
	case x < 33:
		vs := make([]any, r.IntN(3)+1)
		for i := range vs {
			vs[i] = value(r, col)
		}
		return dao.In(col, vs...)
	case x < 50:
		var others []string
		for _, c := range columns {
			if kind(c) == kind(col) {
				others = append(others, c)
			}
		}
		return pick(r, fieldCmps)(col, pick(r, others))
	}
	return pick(r, cmps)(col, value(r, col))
}

// FormatRow renders a row for messages, NULL for nil columns.
func FormatRow(r Row) string {
	p := func(v any) string {
		switch x := v.(type) {
		case *int64:
			if x != nil {
				return fmt.Sprint(*x)
			}
		case *float64:
			if x != nil {
				return fmt.Sprint(*x)
			}
		case *string:
			if x != nil {
				return fmt.Sprintf("%q", *x)
			}
		case *time.Time:
			if x != nil {
				return fmt.Sprintf("base+%dh", int(x.Sub(base)/time.Hour))
			}
		case *bool:
			if x != nil {
				return fmt.Sprint(*x)
			}
		}
		return "NULL"
	}
	return fmt.Sprintf("{id:%d a:%s b:%s n:%d f:%s s:%s t:%s at:%s bt:%s ok:%s}",
		r.ID, p(r.A), p(r.B), r.N, p(r.F), p(r.S), p(r.T), p(r.At), p(r.Bt), p(r.Ok))
}
