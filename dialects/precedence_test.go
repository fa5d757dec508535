package dialects

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// dialectText turns statement text written for SQLite ("x" identifiers, ?
// placeholders) into the text of dialect n, so one expectation serves
// every dialect. Only texts without string literals are translated.
func dialectText(n Name, sqlite string) string {
	var b strings.Builder
	param, open := 0, true
	for _, ch := range sqlite {
		switch {
		case ch == '"' && (n == MySQL || n == MariaDB):
			b.WriteByte('`')
		case ch == '"' && n == SQLServer:
			if open {
				b.WriteByte('[')
			} else {
				b.WriteByte(']')
			}
			open = !open
		case ch == '?' && Family(n) == Postgres:
			param++
			b.WriteString("$" + strconv.Itoa(param))
		case ch == '?' && n == SQLServer:
			param++
			b.WriteString("@p" + strconv.Itoa(param))
		default:
			b.WriteRune(ch)
		}
	}
	return b.String()
}

var (
	sX, sY, sZ = dao.Eq("s", "x"), dao.Eq("s", "y"), dao.Eq("s", "z")
	a1, b2     = dao.Eq("a", int64(1)), dao.Eq("b", int64(2))
)

// precedenceCases are criteria with compound operands, single-operand
// wrappers among them, and the WHERE text each must render to.
var precedenceCases = []struct {
	name  string
	where dao.Criteria
	want  string // SQLite text after WHERE
	args  []any
}{
	{"and-of-or-of-or", dao.And(a1, dao.Or(dao.Or(sX, sY))), `"a" = ? AND ("s" = ? OR "s" = ?)`, []any{int64(1), "x", "y"}},
	{"and-of-triple-wrapped-or", dao.And(a1, dao.Or(dao.Or(dao.Or(sX, sY)))), `"a" = ? AND ("s" = ? OR "s" = ?)`, []any{int64(1), "x", "y"}},
	{"or-first", dao.And(dao.Or(dao.Or(sX, sY)), a1), `("s" = ? OR "s" = ?) AND "a" = ?`, []any{"x", "y", int64(1)}},
	{"two-wrapped-ors", dao.And(dao.Or(dao.Or(sX, sY)), dao.Or(dao.Or(a1, b2))), `("s" = ? OR "s" = ?) AND ("a" = ? OR "b" = ?)`, []any{"x", "y", int64(1), int64(2)}},
	{"or-of-wrapped-and", dao.Or(dao.Or(dao.And(a1, b2)), sZ), `("a" = ? AND "b" = ?) OR "s" = ?`, []any{int64(1), int64(2), "z"}},
	{"wrapped-or-with-one-leaf", dao.And(a1, dao.Or(dao.Or(sX), sY)), `"a" = ? AND ("s" = ? OR "s" = ?)`, []any{int64(1), "x", "y"}},
	{"single-operand-or", dao.Or(sX), `"s" = ?`, []any{"x"}},
	{"wrapped-single-leaf", dao.And(a1, dao.Or(dao.Or(sX))), `"a" = ? AND "s" = ?`, []any{int64(1), "x"}},
	{"or-of-and-of-or", dao.Or(sZ, dao.And(a1, dao.Or(dao.Or(sX, sY)))), `"s" = ? OR ("a" = ? AND ("s" = ? OR "s" = ?))`, []any{"z", int64(1), "x", "y"}},
	{"and-of-and", dao.And(a1, dao.And(b2, dao.Or(sX, sY))), `"a" = ? AND ("b" = ? AND ("s" = ? OR "s" = ?))`, []any{int64(1), int64(2), "x", "y"}},
}

// Every compound operand is parenthesized, also one wrapped in
// single-operand And or Or nodes, so the rendered WHERE means what the
// tree means.
func TestCriteriaPrecedence(t *testing.T) {
	for _, c := range precedenceCases {
		for _, n := range All() {
			t.Run(c.name+"/"+string(n), func(t *testing.T) {
				st, err := mustRenderer(t, n).Count(jobs, c.where)
				if err != nil {
					t.Fatal(err)
				}
				want := dialectText(n, `SELECT COUNT(*) FROM "jobs" WHERE `+c.want)
				if st.SQL != want {
					t.Errorf("criteria %v\n got: %s\nwant: %s", c.where, st.SQL, want)
				}
				if !reflect.DeepEqual(st.Args, c.args) {
					t.Errorf("args %#v, want %#v", st.Args, c.args)
				}
			})
		}
	}
}

// Wherever the criteria are joined to something else (the primary key of
// the guarded update), they are parenthesized as a whole when compound.
func TestGuardedUpdateParenthesizesCriteria(t *testing.T) {
	set := dao.Set{"status": "claimed"}
	cases := []struct {
		name  string
		where dao.Criteria
		want  string
		args  []any
	}{
		{"or", dao.Or(sX, sY), `"id" = ? AND ("s" = ? OR "s" = ?)`, []any{"x", "y"}},
		{"wrapped-or", dao.Or(dao.Or(sX, sY)), `"id" = ? AND ("s" = ? OR "s" = ?)`, []any{"x", "y"}},
		{"or-of-and", dao.Or(dao.And(a1, sX), sY), `"id" = ? AND (("a" = ? AND "s" = ?) OR "s" = ?)`, []any{int64(1), "x", "y"}},
		{"and", dao.And(a1, dao.Or(dao.Or(sX, sY))), `"id" = ? AND ("a" = ? AND ("s" = ? OR "s" = ?))`, []any{int64(1), "x", "y"}},
		{"leaf", sX, `"id" = ? AND "s" = ?`, []any{"x"}},
		{"wrapped-leaf", dao.Or(dao.Or(sX)), `"id" = ? AND "s" = ?`, []any{"x"}},
	}
	for _, c := range cases {
		for _, n := range All() {
			t.Run(c.name+"/"+string(n), func(t *testing.T) {
				st, err := mustRenderer(t, n).GuardedUpdate(jobs, int64(7), c.where, set)
				if err != nil {
					t.Fatal(err)
				}
				want := dialectText(n, `UPDATE "jobs" SET "status" = ? WHERE `+c.want)
				if st.SQL != want {
					t.Errorf("criteria %v\n got: %s\nwant: %s", c.where, st.SQL, want)
				}
				args := append([]any{"claimed", int64(7)}, c.args...)
				if !reflect.DeepEqual(st.Args, args) {
					t.Errorf("args %#v, want %#v", st.Args, args)
				}
			})
		}
	}
}

var numbered = regexp.MustCompile(`\$\d+|@p\d+`)

// The other statements that embed criteria (claim, locking read, locking
// count, bounded delete, select) keep a wrapped Or together.
func TestEmbeddedCriteriaPrecedence(t *testing.T) {
	where := dao.And(a1, dao.Or(dao.Or(sX, sY)))
	const frag = `"a" = ? AND ("s" = ? OR "s" = ?)`
	set := dao.Set{"status": "claimed"}
	type render func(Renderer) (Statement, error)
	stmts := map[string]render{
		"select":        func(r Renderer) (Statement, error) { return r.Select(jobs, dao.Query{Where: where}) },
		"update":        func(r Renderer) (Statement, error) { return r.Update(jobs, where, set) },
		"locking-count": func(r Renderer) (Statement, error) { return r.LockingCount(jobs, where) },
		"delete":        func(r Renderer) (Statement, error) { return r.Delete(jobs, where, 5) },
		"claim": func(r Renderer) (Statement, error) {
			return r.Claim(jobs, dao.ClaimRequest{Where: where, Set: set, Limit: 5})
		},
		"lock-candidates": func(r Renderer) (Statement, error) {
			return r.LockCandidates(jobs, dao.Query{Where: where, Limit: 5})
		},
	}
	for name, f := range stmts {
		for _, n := range All() {
			st, err := f(mustRenderer(t, n))
			if err != nil {
				continue // the statement does not exist on this dialect
			}
			// Placeholder numbers depend on what precedes the criteria.
			got, want := numbered.ReplaceAllString(st.SQL, "?"), numbered.ReplaceAllString(dialectText(n, frag), "?")
			if !strings.Contains(got, " WHERE "+want) {
				t.Errorf("%s/%s: %s\ndoes not contain WHERE %s", name, n, st.SQL, want)
			}
		}
	}
}
