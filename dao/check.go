package dao

import (
	"fmt"
	"reflect"

	"github.com/claimstore/claimstore/dao/driver"
)

// checker validates requests against the model of T once, in the portable
// layer, and returns them in the form drivers receive: values normalized,
// the order made total. Every error wraps [ErrInvalidArgument].
type checker[T any] struct{ m *driver.Model[T] }

func numeric(k driver.Kind) bool {
	return k == driver.KindInt || k == driver.KindUint || k == driver.KindFloat
}

// comparableKinds reports whether columns of kinds a and b can be compared
// with each other.
func comparableKinds(a, b driver.Kind) bool { return a == b || (numeric(a) && numeric(b)) }

// criteria checks c and returns an equal tree whose values are in plain
// form, ready to bind.
func (k checker[T]) criteria(c Criteria) (Criteria, error) {
	switch c.Op() {
	case OpAll:
		return c, nil
	case OpAnd, OpOr:
		if c.Op() == OpOr && len(c.Children()) == 0 {
			return c, fmt.Errorf("%w: Or with no operands", ErrInvalidArgument)
		}
		kids := make([]Criteria, len(c.Children()))
		for i, ch := range c.Children() {
			n, err := k.criteria(ch)
			if err != nil {
				return c, err
			}
			kids[i] = n
		}
		return driver.Logic(c.Op(), kids), nil
	}
	f, err := k.m.Field(c.Field())
	if err != nil {
		return c, err
	}
	switch c.Op() {
	case OpIsNull, OpNotNull:
		return c, nil
	case OpIn:
		if len(c.Values()) == 0 {
			return c, fmt.Errorf("%w: In(%q) with no values", ErrInvalidArgument, c.Field())
		}
		vs := make([]any, len(c.Values()))
		for i, v := range c.Values() {
			if vs[i], err = k.m.Normalize(f, v, false); err != nil {
				return c, err
			}
		}
		return driver.InList(c.Field(), vs), nil
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		if c.RefField() != "" {
			g, err := k.m.Field(c.RefField())
			if err != nil {
				return c, err
			}
			if fk, gk := driver.KindOf(f), driver.KindOf(g); fk == driver.KindOther || !comparableKinds(fk, gk) {
				return c, fmt.Errorf("%w: fields %q and %q cannot be compared", ErrInvalidArgument, c.Field(), c.RefField())
			}
			return c, nil
		}
		v, err := k.m.Normalize(f, c.Value(), false)
		if err != nil {
			return c, err
		}
		return driver.Compare(c.Op(), c.Field(), v), nil
	}
	return c, fmt.Errorf("%w: unknown operator %v", ErrInvalidArgument, c.Op())
}

// order checks the ordering terms and returns them with the primary key
// appended as the final tie breaker (unless already present).
func (k checker[T]) order(order []Order) ([]Order, error) {
	out := make([]Order, 0, len(order)+1)
	pk := k.m.PrimaryKey()
	hasPK := false
	for _, o := range order {
		f, err := k.m.Field(o.Field)
		if err != nil {
			return nil, err
		}
		if driver.KindOf(f) == driver.KindOther {
			return nil, fmt.Errorf("%w: field %q of type %s cannot be ordered by: it is not comparable", ErrInvalidArgument, o.Field, f.FieldType)
		}
		hasPK = hasPK || o.Field == pk
		out = append(out, o)
	}
	if !hasPK {
		out = append(out, Order{Field: pk})
	}
	return out, nil
}

// set checks set (non-empty, known columns, not the primary key, fitting
// values, nil only for nullable columns, Increment only on numeric
// columns) and returns a copy with plain values. A column of a type the
// package cannot compare (JSON, a custom type) takes a value of the
// field's own Go type, passed through unchanged, or for a serializer
// field in its serialized form (see driver.Model.Serialize).
func (k checker[T]) set(set Set) (Set, error) {
	if len(set) == 0 {
		return nil, fmt.Errorf("%w: empty Set", ErrInvalidArgument)
	}
	out := make(Set, len(set))
	for name, v := range set {
		f, err := k.m.Field(name)
		if err != nil {
			return nil, err
		}
		if name == k.m.PrimaryKey() {
			return nil, fmt.Errorf("%w: Set may not write the primary key %q", ErrInvalidArgument, name)
		}
		kind := driver.KindOf(f)
		if inc, ok := v.(Increment); ok {
			if !numeric(kind) {
				return nil, fmt.Errorf("%w: Increment on non-numeric field %q", ErrInvalidArgument, name)
			}
			out[name] = inc
			continue
		}
		if kind == driver.KindOther {
			if v == nil || reflect.TypeOf(v) != f.FieldType {
				return nil, fmt.Errorf("%w: field %q takes a value of type %s, got %T", ErrInvalidArgument, name, f.FieldType, v)
			}
			if out[name], err = k.m.Serialize(f, v); err != nil {
				return nil, err
			}
			continue
		}
		p, err := k.m.Normalize(f, v, true)
		if err != nil {
			return nil, err
		}
		if p == nil && !driver.Nullable(f) {
			return nil, fmt.Errorf("%w: field %q is not nullable", ErrInvalidArgument, name)
		}
		out[name] = p
	}
	return out, nil
}

// claim checks a claim request: criteria, set and order as above, the
// primary key appended to the order.
func (k checker[T]) claim(req ClaimRequest) (ClaimRequest, error) {
	var err error
	out := ClaimRequest{Limit: req.Limit}
	if out.Where, err = k.criteria(req.Where); err != nil {
		return req, err
	}
	if out.Set, err = k.set(req.Set); err != nil {
		return req, err
	}
	if out.OrderBy, err = k.order(req.OrderBy); err != nil {
		return req, err
	}
	return out, nil
}

// query checks a query and appends the primary key to its order.
func (k checker[T]) query(q Query) (Query, error) {
	if q.Limit < 0 {
		return q, fmt.Errorf("%w: negative limit %d", ErrInvalidArgument, q.Limit)
	}
	var err error
	out := Query{Limit: q.Limit}
	if out.Where, err = k.criteria(q.Where); err != nil {
		return q, err
	}
	if out.OrderBy, err = k.order(q.OrderBy); err != nil {
		return q, err
	}
	return out, nil
}

// id checks a primary-key value and returns it in plain form.
func (k checker[T]) id(id any) (any, error) {
	f, err := k.m.Field(k.m.PrimaryKey())
	if err != nil {
		return nil, err
	}
	return k.m.Normalize(f, id, false)
}
