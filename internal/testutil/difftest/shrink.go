package difftest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// Shrinking bounds: at most this many reruns, and this much time.
const (
	shrinkRuns = 400
	shrinkTime = 30 * time.Second
)

// shrink makes the failing case c smaller while it still fails: it drops
// the calls after the failing one, then greedily tries dropping calls and
// rows, simplifying criteria trees (an operand instead of its And or Or,
// an operand dropped, match-all instead of a subtree), orderings, limits
// and sets, and setting row values to NULL, keeping each change after
// which some call still differs from the oracle. It returns the smallest
// failing case, its failure and the number of reruns.
func shrink(ctx context.Context, tg Target, c Case, f *Failure) (Case, *Failure, int) {
	runs := 0
	deadline := time.Now().Add(shrinkTime)
	fails := func(cand Case) *Failure {
		if runs >= shrinkRuns || time.Now().After(deadline) {
			return nil
		}
		runs++
		got, err := runCase(ctx, tg, cand, nil)
		if err != nil {
			return nil
		}
		return got
	}
	if f.Step >= 0 && f.Step+1 < len(c.Ops) {
		c.Ops = slices.Clone(c.Ops[:f.Step+1])
	}
	for progress := true; progress; {
		progress = false
		try := func(cand Case) bool {
			if g := fails(cand); g != nil {
				c, f, progress = cand, g, true
				if g.Step >= 0 && g.Step+1 < len(c.Ops) {
					c.Ops = c.Ops[:g.Step+1]
				}
				return true
			}
			return false
		}
		for i := 0; i < len(c.Ops); i++ {
			cand := c
			cand.Ops = slices.Delete(slices.Clone(c.Ops), i, i+1)
			if try(cand) {
				i--
			}
		}
		for i := 0; i < len(c.Rows); i++ {
			cand := c
			cand.Rows = slices.Delete(slices.Clone(c.Rows), i, i+1)
			if try(cand) {
				i--
			}
		}
		for i := range c.Ops {
			for _, op := range simplerOps(c.Ops[i]) {
				cand := c
				cand.Ops = slices.Clone(c.Ops)
				cand.Ops[i] = op
				if try(cand) {
					break
				}
			}
		}
		for i := range c.Rows {
			for _, row := range simplerRows(c.Rows[i]) {
				cand := c
				cand.Rows = slices.Clone(c.Rows)
				cand.Rows[i] = row
				try(cand)
			}
		}
	}
	return c, f, runs
}

// simplerOps returns variants of op that are one step simpler.
func simplerOps(op Op) []Op {
	var out []Op
	if op.Kind != OpCount && op.Kind != OpFind {
		// A read with the same criteria, when the criteria alone differ.
		out = append(out, Op{Kind: OpCount, Where: op.Where}, Op{Kind: OpFind, Where: op.Where})
	}
	for _, w := range simplerCriteria(op.Where) {
		o := op
		o.Where = w
		out = append(out, o)
	}
	if len(op.OrderBy) > 0 {
		o := op
		o.OrderBy = nil
		out = append(out, o)
	}
	if op.Kind == OpFind && op.Limit > 0 {
		o := op
		o.Limit = 0
		out = append(out, o)
	}
	if len(op.Set) > 1 {
		for _, col := range driver.SetColumns(op.Set) {
			o := op
			o.Set = dao.Set{col: op.Set[col]}
			out = append(out, o)
		}
	}
	return out
}

// simplerCriteria returns trees one step simpler than c: match-all, each
// operand of an And or Or in its place, the node with one operand
// dropped, and the node with one operand simplified.
func simplerCriteria(c dao.Criteria) []dao.Criteria {
	if c.Op() == dao.OpAll {
		return nil
	}
	out := []dao.Criteria{{}}
	kids := c.Children()
	if c.Op() == dao.OpIn && len(c.Values()) > 1 {
		for _, v := range c.Values() {
			out = append(out, dao.In(c.Field(), v))
		}
	}
	if c.Op() != dao.OpAnd && c.Op() != dao.OpOr {
		return out
	}
	out = append(out, kids...)
	rebuild := func(ks []dao.Criteria) dao.Criteria {
		if c.Op() == dao.OpAnd {
			return dao.And(ks...)
		}
		return dao.Or(ks...)
	}
	for i := range kids {
		if len(kids) > 1 {
			out = append(out, rebuild(slices.Delete(slices.Clone(kids), i, i+1)))
		}
		for _, k := range simplerCriteria(kids[i]) {
			ks := slices.Clone(kids)
			ks[i] = k
			out = append(out, rebuild(ks))
		}
	}
	return out
}

// simplerRows returns r with one non-NULL nullable column set to NULL, for
// each such column.
func simplerRows(r Row) []Row {
	var out []Row
	add := func(set func(*Row) bool) {
		c := r
		if set(&c) {
			out = append(out, c)
		}
	}
	add(func(c *Row) bool { ok := c.A != nil; c.A = nil; return ok })
	add(func(c *Row) bool { ok := c.B != nil; c.B = nil; return ok })
	add(func(c *Row) bool { ok := c.F != nil; c.F = nil; return ok })
	add(func(c *Row) bool { ok := c.S != nil; c.S = nil; return ok })
	add(func(c *Row) bool { ok := c.T != nil; c.T = nil; return ok })
	add(func(c *Row) bool { ok := c.At != nil; c.At = nil; return ok })
	add(func(c *Row) bool { ok := c.Bt != nil; c.Bt = nil; return ok })
	add(func(c *Row) bool { ok := c.Ok != nil; c.Ok = nil; return ok })
	return out
}

// Format renders c as Go code that rebuilds it, with what explain says
// about each call.
func Format(c Case, explain func(Op) string) string {
	var b strings.Builder
	b.WriteString("rows:\n")
	if len(c.Rows) == 0 {
		b.WriteString("\t(none)\n")
	}
	for _, r := range c.Rows {
		fmt.Fprintf(&b, "\t%s\n", FormatRow(r))
	}
	b.WriteString("calls:\n")
	for i, op := range c.Ops {
		fmt.Fprintf(&b, "\t%d: %s\n", i, FormatOp(op))
		if explain != nil {
			if e := explain(op); e != "" {
				fmt.Fprintf(&b, "\t   runs %s\n", e)
			}
		}
	}
	return b.String()
}

// FormatOp renders op as the Go call that makes it.
func FormatOp(op Op) string {
	w := GoCriteria(op.Where)
	switch op.Kind {
	case OpFind:
		return fmt.Sprintf("Find(ctx, dao.Query{Where: %s, OrderBy: %s, Limit: %d})", w, goOrder(op.OrderBy), op.Limit)
	case OpCount:
		return fmt.Sprintf("Count(ctx, %s)", w)
	case OpUpdate:
		return fmt.Sprintf("Update(ctx, %s, %s)", w, goSet(op.Set))
	case OpDelete:
		return fmt.Sprintf("Delete(ctx, %s, %d)", w, op.Limit)
	}
	return fmt.Sprintf("Claim(ctx, dao.ClaimRequest{Where: %s, Set: %s, Limit: %d, OrderBy: %s})", w, goSet(op.Set), op.Limit, goOrder(op.OrderBy))
}

func goValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("%q", x)
	case int64:
		return fmt.Sprintf("int64(%d)", x)
	case float64:
		return fmt.Sprintf("%g", x)
	case time.Time:
		return fmt.Sprintf("base.Add(%d * time.Hour)", int(x.Sub(base)/time.Hour))
	case dao.Increment:
		return fmt.Sprintf("dao.Incr(%d)", x.N)
	}
	return fmt.Sprint(v)
}

var opFuncs = map[dao.Op]string{dao.OpEq: "Eq", dao.OpNe: "Ne", dao.OpLt: "Lt", dao.OpLe: "Le", dao.OpGt: "Gt", dao.OpGe: "Ge"}

// GoCriteria renders c as the dao calls that build it.
func GoCriteria(c dao.Criteria) string {
	switch c.Op() {
	case dao.OpAll:
		return "dao.Criteria{}"
	case dao.OpAnd, dao.OpOr:
		parts := make([]string, len(c.Children()))
		for i, k := range c.Children() {
			parts[i] = GoCriteria(k)
		}
		name := "And"
		if c.Op() == dao.OpOr {
			name = "Or"
		}
		return "dao." + name + "(" + strings.Join(parts, ", ") + ")"
	case dao.OpIsNull:
		return fmt.Sprintf("dao.IsNull(%q)", c.Field())
	case dao.OpNotNull:
		return fmt.Sprintf("dao.NotNull(%q)", c.Field())
	case dao.OpIn:
		parts := []string{fmt.Sprintf("%q", c.Field())}
		for _, v := range c.Values() {
			parts = append(parts, goValue(v))
		}
		return "dao.In(" + strings.Join(parts, ", ") + ")"
	}
	if ref := c.RefField(); ref != "" {
		return fmt.Sprintf("dao.%sField(%q, %q)", opFuncs[c.Op()], c.Field(), ref)
	}
	return fmt.Sprintf("dao.%s(%q, %s)", opFuncs[c.Op()], c.Field(), goValue(c.Value()))
}

func goOrder(order []dao.Order) string {
	parts := make([]string, len(order))
	for i, o := range order {
		if o.Desc {
			parts[i] = fmt.Sprintf("dao.Desc(%q)", o.Field)
		} else {
			parts[i] = fmt.Sprintf("dao.Asc(%q)", o.Field)
		}
	}
	return "[]dao.Order{" + strings.Join(parts, ", ") + "}"
}

func goSet(set dao.Set) string {
	parts := make([]string, 0, len(set))
	for _, col := range driver.SetColumns(set) {
		parts = append(parts, fmt.Sprintf("%q: %s", col, goValue(set[col])))
	}
	return "dao.Set{" + strings.Join(parts, ", ") + "}"
}
