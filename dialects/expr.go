package dialects

import (
	"fmt"
	"strings"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// The expression writer: criteria, ORDER BY terms and SET lists, the same
// code for every dialect, which differs only in the data it reads
// (quoting, placeholders, NULL ordering).

var cmpOps = map[dao.Op]string{
	dao.OpEq: "=", dao.OpNe: "<>", dao.OpLt: "<", dao.OpLe: "<=", dao.OpGt: ">", dao.OpGe: ">=",
}

// where writes " WHERE <c>" unless c matches every row.
func (b *builder) where(c dao.Criteria) error {
	if c.IsAll() {
		return nil
	}
	b.w(" WHERE ")
	return b.cond(c)
}

// andWhere writes " AND <c>" unless c matches every row, c being one
// operand of that AND (parenthesized when compound).
func (b *builder) andWhere(c dao.Criteria) error {
	if c.IsAll() {
		return nil
	}
	b.w(" AND ")
	return b.operand(c)
}

// unwrap returns c without its single-operand And and Or wrappers: an And
// or Or of one operand means that operand.
func unwrap(c dao.Criteria) dao.Criteria {
	for (c.Op() == dao.OpAnd || c.Op() == dao.OpOr) && len(c.Children()) == 1 {
		c = c.Children()[0]
	}
	return c
}

// compound reports whether c, unwrapped, renders as more than one term
// joined by AND or OR.
func compound(c dao.Criteria) bool {
	c = unwrap(c)
	return (c.Op() == dao.OpAnd || c.Op() == dao.OpOr) && len(c.Children()) > 1
}

// operand writes c as an operand of AND or OR: parenthesized when
// compound, so the text never relies on AND binding tighter than OR.
func (b *builder) operand(c dao.Criteria) error {
	if !compound(c) {
		return b.cond(c)
	}
	b.w("(")
	if err := b.cond(c); err != nil {
		return err
	}
	b.w(")")
	return nil
}

// cond writes c. Single-operand And and Or nodes are written as their
// operand, and every operand that is itself an And or an Or of several
// operands is parenthesized, whatever the operators. Callers that join c
// to other terms parenthesize it the same way ({andWhere}).
func (b *builder) cond(c dao.Criteria) error {
	c = unwrap(c)
	switch op := c.Op(); op {
	case dao.OpAll:
		b.w("1 = 1")
		return nil
	case dao.OpAnd, dao.OpOr:
		return b.junction(op, c.Children())
	case dao.OpIsNull:
		b.col(c.Field())
		b.w(" IS NULL")
		return nil
	case dao.OpNotNull:
		b.col(c.Field())
		b.w(" IS NOT NULL")
		return nil
	case dao.OpIn:
		if len(c.Values()) == 0 {
			return fmt.Errorf("dialects: %w: In(%q) with no values", dao.ErrInvalidArgument, c.Field())
		}
		b.col(c.Field())
		b.w(" IN (")
		b.params(c.Values())
		b.w(")")
		return nil
	}
	return b.compare(c)
}

// junction writes the operands kids of an And or Or node. An And of none
// matches every row; an Or of none is refused.
func (b *builder) junction(op dao.Op, kids []dao.Criteria) error {
	if len(kids) == 0 {
		if op == dao.OpOr {
			return fmt.Errorf("dialects: %w: Or with no operands", dao.ErrInvalidArgument)
		}
		b.w("1 = 1")
		return nil
	}
	sep := " AND "
	if op == dao.OpOr {
		sep = " OR "
	}
	for i, k := range kids {
		if i > 0 {
			b.w(sep)
		}
		if err := b.operand(k); err != nil {
			return err
		}
	}
	return nil
}

// now writes the dialect's expression of the database's current time in
// form now.Form, for column col, or returns an error wrapping
// dao.ErrInvalidArgument on a dialect without one.
func (b *builder) now(now driver.CurrentTime, col string) error {
	expr, ok := b.d.now[now.Form]
	if !ok {
		return fmt.Errorf("dialects: %w: %s writes no database time (%v) for %q", dao.ErrInvalidArgument, b.d.name, now.Form, col)
	}
	b.w(expr)
	return nil
}

// compare writes a comparison with a bound value, with the database's
// clock (a driver.CurrentTime value) or with another column.
func (b *builder) compare(c dao.Criteria) error {
	sym, ok := cmpOps[c.Op()]
	if !ok {
		return fmt.Errorf("dialects: %w: unknown operator %v", dao.ErrInvalidArgument, c.Op())
	}
	b.col(c.Field())
	b.w(" ", sym, " ")
	if ref := c.RefField(); ref != "" {
		b.col(ref)
		return nil
	}
	if c.Value() == nil {
		return fmt.Errorf("dialects: %w: %s %v %v with a nil value", dao.ErrInvalidArgument, c.Field(), c.Op(), c.Value())
	}
	if now, ok := c.Value().(driver.CurrentTime); ok {
		return b.now(now, c.Field())
	}
	b.param(c.Value())
	return nil
}

// withPK returns order with the primary key pk appended unless present.
func withPK(order []dao.Order, pk string) []dao.Order {
	for _, o := range order {
		if o.Field == pk {
			return order
		}
	}
	return append(append(make([]dao.Order, 0, len(order)+1), order...), dao.Order{Field: pk})
}

// orderTerm writes one ORDER BY term for expression expr (already quoted)
// of column col: bare when the column is not nullable, which keeps an
// index on it usable, and otherwise the dialect's term that places NULLs
// as PostgreSQL does by default.
func (b *builder) orderTerm(expr, col string, desc bool) {
	if !b.t.Nullable[col] {
		b.w(expr)
		if desc {
			b.w(" DESC")
		}
		return
	}
	term := b.d.nullsAsc
	if desc {
		term = b.d.nullsDesc
	}
	b.w(strings.ReplaceAll(term, "{expr}", expr))
}

// orderTerms writes the ORDER BY terms of the request's order.
func (b *builder) orderTerms() {
	for i, o := range b.req.order {
		if i > 0 {
			b.w(", ")
		}
		b.orderTerm(b.d.quote(o.Field), o.Field, o.Desc)
	}
}

// set writes the SET list of set in sorted column order, so the text is
// deterministic. An Increment renders col = col + ?; qual, when not empty,
// qualifies the column it reads. A driver.CurrentTime renders the
// dialect's current-time expression (an error wrapping
// dao.ErrInvalidArgument on a dialect without one). An empty set, or one writing the primary
// key, is an error wrapping dao.ErrInvalidArgument.
func (b *builder) set(set dao.Set, qual string) error {
	if len(set) == 0 {
		return fmt.Errorf("dialects: %w: empty Set", dao.ErrInvalidArgument)
	}
	for i, name := range driver.SetColumns(set) {
		if name == b.t.PrimaryKey {
			return fmt.Errorf("dialects: %w: Set may not write the primary key %q", dao.ErrInvalidArgument, name)
		}
		if i > 0 {
			b.w(", ")
		}
		b.col(name)
		b.w(" = ")
		if inc, ok := set[name].(dao.Increment); ok {
			if qual != "" {
				b.w(qual, ".")
			}
			b.col(name)
			b.w(" + ")
			b.param(inc.N)
			continue
		}
		if now, ok := set[name].(driver.CurrentTime); ok {
			if err := b.now(now, name); err != nil {
				return err
			}
			continue
		}
		b.param(set[name])
	}
	return nil
}
