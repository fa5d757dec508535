package dialects

import (
	"fmt"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// skeleton is the shape of one statement: SQL text with holes, written
// {name} or {name:arg}, that the renderer fills from the table and the
// request, left to right, so bind parameters are numbered in text order.
// The holes:
//
//	{table}          the quoted table name
//	{pk}             the quoted primary-key column
//	{where}          " WHERE <criteria>", or nothing when they match every row
//	{andWhere}       " AND <criteria>" as one operand, or nothing likewise
//	{order}          the ORDER BY terms, primary key appended as tie breaker
//	{limit}          the limit, bound
//	{set}, {set:q}   the SET list; q qualifies the column an Increment reads
//	{id}, {ids}      the primary-key value, or the list of them, bound
//	{orderAliases}   ", <col> AS <alias>" per non-key order column
//	{orderCopies:q}  ", q.<alias>" per non-key order column
//	{orderByCopies:q} the ORDER BY terms over q's copies of the order columns
//	{arg:i}          the i-th value of a statement's own operands, bound
//	{ident:i}        the i-th identifier of them, quoted
//	{literal:i}      the i-th checked literal of them, quoted as a string
//	{type}           the checked column type of them
//
// Identifiers and values never become skeleton text: holes write quoted
// identifiers from the schema and placeholders for values.
type skeleton struct {
	src  string
	segs []segment
}

// segment is literal text or, when hole is set, a hole with its argument.
type segment struct {
	text string
	hole holeFunc
	arg  string
}

// holeFunc fills one hole of a skeleton.
type holeFunc func(b *builder, arg string) error

// holes maps each hole name to what fills it.
var holes = map[string]holeFunc{
	"table":         func(b *builder, _ string) error { b.table(); return nil },
	"pk":            func(b *builder, _ string) error { b.col(b.t.PrimaryKey); return nil },
	"where":         func(b *builder, _ string) error { return b.where(b.req.where) },
	"andWhere":      func(b *builder, _ string) error { return b.andWhere(b.req.where) },
	"order":         func(b *builder, _ string) error { b.orderTerms(); return nil },
	"limit":         func(b *builder, _ string) error { b.param(int64(b.req.limit)); return nil },
	"set":           func(b *builder, q string) error { return b.set(b.req.set, q) },
	"id":            func(b *builder, _ string) error { b.param(b.req.id); return nil },
	"ids":           func(b *builder, _ string) error { b.params(b.req.ids); return nil },
	"orderAliases":  func(b *builder, _ string) error { b.orderAliases(); return nil },
	"orderCopies":   func(b *builder, q string) error { b.orderCopies(q); return nil },
	"orderByCopies": func(b *builder, q string) error { b.orderByCopies(q); return nil },
	"arg":           func(b *builder, i string) error { return b.own(i, 'a') },
	"ident":         func(b *builder, i string) error { return b.own(i, 'i') },
	"literal":       func(b *builder, i string) error { return b.own(i, 'l') },
	"type":          func(b *builder, _ string) error { return b.columnType() },
}

// mustParse splits src into segments. A malformed skeleton or an unknown
// hole is a defect of the dialect table and panics when the package is
// initialized (the tests load it).
func mustParse(src string) skeleton {
	s := skeleton{src: src}
	rest := src
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			s.segs = append(s.segs, segment{text: rest})
			break
		}
		if open > 0 {
			s.segs = append(s.segs, segment{text: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			panic(fmt.Sprintf("dialects: unclosed hole in skeleton %q", src))
		}
		name, arg, _ := strings.Cut(rest[open+1:open+end], ":")
		h, ok := holes[name]
		if !ok {
			panic(fmt.Sprintf("dialects: unknown hole %q in skeleton %q", name, src))
		}
		s.segs = append(s.segs, segment{hole: h, arg: arg})
		rest = rest[open+end+1:]
	}
	return s
}

// defined reports whether the dialect has the statement.
func (s skeleton) defined() bool { return len(s.segs) > 0 }

// request holds the operands the holes draw on; each statement sets the
// ones its skeletons use.
type request struct {
	where dao.Criteria
	order []dao.Order // with the primary key appended
	set   dao.Set
	limit int
	id    any
	ids   []any
	// A statement's own operands, by position: bound values, identifiers
	// and checked literals (see lock.go).
	args     []any
	idents   []string
	literals []string
	colType  string
}

// builder accumulates statement text and bound arguments.
type builder struct {
	d    *dialect
	t    Table
	req  request
	sb   strings.Builder
	args []any
}

// builder returns a builder for table t, or an error wrapping
// dao.ErrInvalidArgument when t lacks a name or a primary key or r is
// the zero Renderer.
func (r Renderer) builder(t Table) (*builder, error) {
	if r.d == nil {
		return nil, fmt.Errorf("dialects: %w: zero Renderer (use NewRenderer)", dao.ErrInvalidArgument)
	}
	if t.Name == "" || t.PrimaryKey == "" {
		return nil, fmt.Errorf("dialects: %w: table needs a name and a primary key", dao.ErrInvalidArgument)
	}
	return &builder{d: r.d, t: t}, nil
}

// render fills skeleton s from req and returns the statement, or the
// first error a hole reports.
func (b *builder) render(s skeleton, req request) (Statement, error) {
	if !s.defined() {
		return Statement{}, fmt.Errorf("dialects: %w: statement not available on %s", dao.ErrInvalidArgument, b.d.name)
	}
	req.order = withPK(req.order, b.t.PrimaryKey)
	b.req = req
	for _, seg := range s.segs {
		if seg.hole == nil {
			b.sb.WriteString(seg.text)
			continue
		}
		if err := seg.hole(b, seg.arg); err != nil {
			return Statement{}, err
		}
	}
	return b.stmt()
}

// stmt returns the statement, or an error wrapping dao.ErrInvalidArgument
// when it binds more values than the dialect accepts.
func (b *builder) stmt() (Statement, error) {
	if max := b.d.maxParams; len(b.args) > max {
		return Statement{}, fmt.Errorf("dialects: %w: statement binds %d values, more than the %d %s accepts", dao.ErrInvalidArgument, len(b.args), max, b.d.name)
	}
	return Statement{SQL: b.sb.String(), Args: b.args}, nil
}

func (b *builder) w(s ...string) {
	for _, x := range s {
		b.sb.WriteString(x)
	}
}

func (b *builder) col(name string) { b.sb.WriteString(b.d.quote(name)) }

func (b *builder) table() { b.sb.WriteString(b.d.quoteTable(b.t.Name)) }
