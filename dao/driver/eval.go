package driver

import (
	"bytes"
	"strings"
	"time"
)

// Match reports whether row satisfies c (checked by [Model.CheckCriteria])
// under SQL semantics: a comparison involving NULL is not satisfied, so a
// NULL column matches neither Eq nor Ne. Strings compare byte-wise, which
// equals a binary collation; a database with a case-insensitive collation
// (MySQL's default) may match more. It is the in-memory evaluator of the
// reference store.
func (m *Model[T]) Match(row *T, c Criteria) bool {
	switch c.op {
	case OpAll:
		return true
	case OpAnd:
		for _, ch := range c.children {
			if !m.Match(row, ch) {
				return false
			}
		}
		return true
	case OpOr:
		for _, ch := range c.children {
			if m.Match(row, ch) {
				return true
			}
		}
		return false
	}
	v, _ := m.Value(row, c.field)
	switch c.op {
	case OpIsNull:
		return v == nil
	case OpNotNull:
		return v != nil
	case OpIn:
		for _, x := range c.values {
			if r, ok := compareValues(v, x); ok && r == 0 {
				return true
			}
		}
		return false
	}
	other := c.value
	if c.ref != "" {
		other, _ = m.Value(row, c.ref)
	}
	r, ok := compareValues(v, other)
	if !ok {
		return false
	}
	switch c.op {
	case OpEq:
		return r == 0
	case OpNe:
		return r != 0
	case OpLt:
		return r < 0
	case OpLe:
		return r <= 0
	case OpGt:
		return r > 0
	case OpGe:
		return r >= 0
	}
	return false
}

// Less reports whether row a sorts before row b under order (checked by
// [Model.CheckOrder]). NULL sorts after every value in ascending order and
// first in descending order, as in PostgreSQL.
func (m *Model[T]) Less(a, b *T, order []Order) bool {
	for _, o := range order {
		va, _ := m.Value(a, o.Field)
		vb, _ := m.Value(b, o.Field)
		var r int
		switch {
		case va == nil && vb == nil:
			r = 0
		case va == nil:
			r = 1
		case vb == nil:
			r = -1
		default:
			r, _ = compareValues(va, vb)
		}
		if o.Desc {
			r = -r
		}
		if r != 0 {
			return r < 0
		}
	}
	return false
}

// compareValues compares two plain values; ok is false when either is NULL
// or they are of incomparable types.
func compareValues(a, b any) (int, bool) {
	if a == nil || b == nil {
		return 0, false
	}
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			ia, aInt := a.(int64)
			ib, bInt := b.(int64)
			if aInt && bInt {
				return cmp3(ia < ib, ia > ib), true
			}
			return cmp3(fa < fb, fa > fb), true
		}
		return 0, false
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmp3(!x && y, x && !y), true
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y), true
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y), true
		}
	}
	return 0, false
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
