package conformance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// collationStatuses are the status values of the collation checks: strings
// that differ only in letter case, in accents, in trailing spaces, or in
// more, written with ASCII letters, spaces and the accented letters of
// unaccent, so that the folding of [foldFor] models every declared
// collation exactly.
var collationStatuses = []string{
	"abc", "ABC", "Abc", "ábc", "ÁBC", "abc ", "ABC  ", "ab", "ab c", " abc",
	"abd", "ABD", "abé", "b", "B ", "ea", "éa", "Ea", "ÉA ", "a",
}

var unaccent = strings.NewReplacer("á", "a", "Á", "A", "é", "e", "É", "E")

// foldFor returns the function that maps a string to the key it compares
// by under c: without accents when accent-insensitive, in upper case when
// case-insensitive, without trailing spaces when PAD SPACE. Keys compare
// as Go strings (code-point order) unless c is linguistic.
func foldFor(c dao.Collation) func(string) string {
	return func(s string) string {
		if c.AccentInsensitive {
			s = unaccent.Replace(s)
		}
		if c.CaseInsensitive {
			s = strings.ToUpper(s)
		}
		if c.PadSpace {
			s = strings.TrimRight(s, " ")
		}
		return s
	}
}

// collationStore seeds a store with one row per collation status; the
// payload of row i is the status of row i+1, for the field comparisons.
func collationStore(t *testing.T, h Harness) (dao.Store[Job], []Job, dao.Collation) {
	s := h.NewStore(t)
	coll := s.Capabilities().Collation
	n := len(collationStatuses)
	rows := seed(t, s, n, func(i int, j *Job) {
		j.Status = collationStatuses[i]
		j.Payload = collationStatuses[(i+1)%n]
	})
	return s, rows, coll
}

// testCollationCriteria checks that criteria on strings that differ in
// case, accents and trailing spaces select, in Find, Count, Update and
// Claim, exactly the rows the store's declared Collation selects: a
// binary store must compare bytes, an insensitive one must match
// insensitively. The ordering comparisons (Lt, Le, Gt, Ge) are checked
// unless the collation is linguistic, whose order follows language rules
// the suite does not model; it logs that.
func testCollationCriteria(t *testing.T, h Harness) {
	ctx := context.Background()
	s, rows, coll := collationStore(t, h)
	fold := foldFor(coll)
	t.Logf("collation %v", coll)
	type ccase struct {
		c       dao.Criteria
		pred    func(j *Job) bool
		ordered bool // depends on the order, not only on equality
	}
	eq := func(v string) func(j *Job) bool { return func(j *Job) bool { return fold(j.Status) == fold(v) } }
	cmpTo := func(v string, ok func(int) bool) func(j *Job) bool {
		return func(j *Job) bool { return ok(strings.Compare(fold(j.Status), fold(v))) }
	}
	var cases []ccase
	for _, v := range []string{"abc", "ABC  ", "ébc", "Ábc", "b", "ea "} {
		cases = append(cases,
			ccase{dao.Eq("status", v), eq(v), false},
			ccase{dao.Ne("status", v), func(j *Job) bool { return !eq(v)(j) }, false},
		)
	}
	cases = append(cases,
		ccase{dao.In("status", "ÁBC", "B", "zz"), func(j *Job) bool { return eq("ÁBC")(j) || eq("B")(j) }, false},
		ccase{dao.EqField("status", "payload"), func(j *Job) bool { return fold(j.Status) == fold(j.Payload) }, false},
		ccase{dao.NeField("status", "payload"), func(j *Job) bool { return fold(j.Status) != fold(j.Payload) }, false},
		ccase{dao.Lt("status", "abc"), cmpTo("abc", func(c int) bool { return c < 0 }), true},
		ccase{dao.Le("status", "ABC "), cmpTo("ABC ", func(c int) bool { return c <= 0 }), true},
		ccase{dao.Gt("status", "abd"), cmpTo("abd", func(c int) bool { return c > 0 }), true},
		ccase{dao.Ge("status", "Ea"), cmpTo("Ea", func(c int) bool { return c >= 0 }), true},
		ccase{dao.Lt("status", "B"), cmpTo("B", func(c int) bool { return c < 0 }), true},
		ccase{dao.LtField("status", "payload"), func(j *Job) bool { return fold(j.Status) < fold(j.Payload) }, true},
	)
	var skipped []string
	for i, c := range cases {
		if c.ordered && coll.Linguistic {
			skipped = append(skipped, c.c.String())
			continue
		}
		want := filterIDs(rows, c.pred)
		got, err := s.Find(ctx, dao.Query{Where: c.c})
		if err != nil {
			t.Errorf("Find(%v): %v", c.c, err)
			continue
		}
		if g := sortedIDs(got); !slices.Equal(g, want) {
			t.Errorf("collation %v: Find(%v) = %s, want %s", coll, c.c, statusesOf(rows, g), statusesOf(rows, want))
		}
		if n, err := s.Count(ctx, c.c); err != nil || n != int64(len(want)) {
			t.Errorf("collation %v: Count(%v) = %d, %v; want %d", coll, c.c, n, err, len(want))
		}
		mark := fmt.Sprintf("update-%d", i)
		if n, err := s.Update(ctx, c.c, dao.Set{"locked_by": mark}); err != nil || n != int64(len(want)) {
			t.Errorf("collation %v: Update(%v) = %d, %v; want %d", coll, c.c, n, err, len(want))
		}
		mark = fmt.Sprintf("claim-%d", i)
		claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: c.c, Set: dao.Set{"locked_by": mark}, Limit: 1000})
		if err != nil {
			t.Errorf("Claim(%v): %v", c.c, err)
			continue
		}
		if g := sortedIDs(claimed); !slices.Equal(g, want) {
			t.Errorf("collation %v: Claim(%v) = %s, want %s", coll, c.c, statusesOf(rows, g), statusesOf(rows, want))
		}
	}
	if len(skipped) > 0 {
		t.Logf("collation %v is linguistic: the order-dependent cases were not checked: %s", coll, strings.Join(skipped, "; "))
	}
}

// testCollationOrder checks that ordering by a string column follows the
// declared Collation: ascending and descending by the folded key, strings
// equal under the collation by primary key; in Find and in Claim. A
// linguistic collation's order is not checked (logged).
func testCollationOrder(t *testing.T, h Harness) {
	ctx := context.Background()
	s, rows, coll := collationStore(t, h)
	if coll.Linguistic {
		t.Logf("collation %v is linguistic: the order of strings that differ in case, accents or spaces is not checked", coll)
		return
	}
	fold := foldFor(coll)
	for _, desc := range []bool{false, true} {
		want := slices.Clone(rows)
		sortJobs(want, func(a, b *Job) int {
			if desc {
				return cmp.Compare(fold(b.Status), fold(a.Status))
			}
			return cmp.Compare(fold(a.Status), fold(b.Status))
		})
		o := dao.Asc("status")
		if desc {
			o = dao.Desc("status")
		}
		got, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{o}})
		if err != nil {
			t.Fatalf("Find(order %v): %v", o, err)
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Errorf("collation %v: Find(order by %v) = %s, want %s", coll, o, statusesOf(rows, ids(got)), statusesOf(rows, ids(want)))
		}
		if desc {
			continue
		}
		claimed, err := s.Claim(ctx, dao.ClaimRequest{Set: dao.Set{"locked_by": "order"}, OrderBy: []dao.Order{o}, Limit: 5})
		if err != nil {
			t.Fatalf("Claim(order %v): %v", o, err)
		}
		if w := ids(want)[:5]; !slices.Equal(ids(claimed), w) {
			t.Errorf("collation %v: Claim(order by %v, limit 5) = %s, want %s", coll, o, statusesOf(rows, ids(claimed)), statusesOf(rows, w))
		}
	}
}

// statusesOf renders the rows with the given ids as id:"status" pairs.
func statusesOf(rows []Job, want []int64) string {
	var b strings.Builder
	b.WriteString("[")
	for i, id := range want {
		if i > 0 {
			b.WriteString(" ")
		}
		for _, r := range rows {
			if r.ID == id {
				fmt.Fprintf(&b, "%d:%q", id, r.Status)
			}
		}
	}
	b.WriteString("]")
	return b.String()
}
