package dialects

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// skeletonsOf returns every defined skeleton of d by statement kind.
func skeletonsOf(t *testing.T, d *dialect) map[string]skeleton {
	t.Helper()
	s := d.stmts
	all := map[string]skeleton{
		"selectAll": s.selectAll, "selectLimit": s.selectLimit, "count": s.count, "lockingCount": s.lockingCount,
		"update": s.update, "guardedUpdate": s.guardedUpdate, "guardedUpdatePK": s.guardedUpdatePK, "updateByIDs": s.updateByIDs, "deleteLimit": s.deleteLimit,
		"updateKeys": s.updateKeys, "lockKeys": s.lockKeys,
		"lockCandidates": s.lockCandidates, "claim": s.claim,
	}
	if n := reflect.TypeOf(s).NumField(); n != len(all) {
		t.Fatalf("statements has %d fields, the test knows %d", n, len(all))
	}
	for k, sk := range all {
		if !sk.defined() {
			delete(all, k)
		}
	}
	return all
}

// Every known dialect has data, and every dialect defines the statements
// the portable path needs; the fast-path statements are optional.
func TestDialectTable(t *testing.T) {
	if len(dialectTable) != len(All()) {
		t.Fatalf("dialect table has %d entries, All has %d", len(dialectTable), len(All()))
	}
	required := []string{"selectAll", "selectLimit", "count", "lockingCount", "update", "guardedUpdate", "updateByIDs", "deleteLimit"}
	for _, n := range All() {
		d := lookup(n)
		if d == nil {
			t.Errorf("%s: no dialect data", n)
			continue
		}
		if d.quoteOpen == "" || d.quoteClose == "" || d.param == "" || d.maxParams <= 0 || d.nullsAsc == "" || d.nullsDesc == "" {
			t.Errorf("%s: incomplete dialect data %+v", n, *d)
		}
		got := skeletonsOf(t, d)
		for _, k := range required {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: no %s statement", n, k)
			}
		}
	}
	if lookup("oracle") != nil {
		t.Error("lookup of an unknown dialect returned data")
	}
}

var cteName = regexp.MustCompile(`(?:WITH|,) (\w+) AS (?:MATERIALIZED )?\(`)

// Every common table expression a skeleton names is a reserved table
// name, so a table of that name is refused before it is shadowed.
func TestCTENamesReserved(t *testing.T) {
	seen := 0
	for _, d := range dialectTable {
		for kind, s := range skeletonsOf(t, d) {
			for _, m := range cteName.FindAllStringSubmatch(s.src, -1) {
				seen++
				if !ReservedTableName(m[1]) {
					t.Errorf("%s %s: common table expression %q is not reserved", d.name, kind, m[1])
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no common table expression found; the pattern is out of date")
	}
}

// Malformed skeletons are refused when the table is built.
func TestMustParseRefuses(t *testing.T) {
	for _, src := range []string{"SELECT {table", "SELECT {nope}", "SELECT * FROM {table}{where:x}{bogus:y}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("mustParse(%q) did not panic", src)
				}
			}()
			mustParse(src)
		}()
	}
	s := mustParse("A {table} B {set:t}")
	if len(s.segs) != 4 || s.segs[0].text != "A " || s.segs[1].hole == nil || s.segs[3].arg != "t" {
		t.Errorf("mustParse split %+v", s.segs)
	}
}

// The zero Renderer renders no statement.
func TestZeroRenderer(t *testing.T) {
	var r Renderer
	if _, err := r.Count(jobs, claimable); err == nil {
		t.Error("zero Renderer rendered a count")
	}
	if _, err := r.Claim(jobs, dao.ClaimRequest{Set: claimSet, Limit: 1}); err == nil {
		t.Error("zero Renderer rendered a claim")
	}
	if r.Dialect() != "" || r.Quote("a") != `"a"` || r.Placeholder(2) != "?" {
		t.Errorf("zero Renderer: dialect %q quote %s placeholder %s", r.Dialect(), r.Quote("a"), r.Placeholder(2))
	}
}
