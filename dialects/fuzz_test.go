package dialects_test

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// fuzzRow is the model of the fuzz table: two nullable integers, two
// nullable strings and the key.
type fuzzRow struct {
	ID int64 `gorm:"primaryKey"`
	A  *int64
	B  *int64
	S  *string
	T  *string
}

var (
	fuzzCols = []string{"id", "a", "b", "s", "t"}
	fuzzNums = []int64{-1, 0, 1, 2}
	fuzzStrs = []string{"", "a", "b", "ab"}
	fuzzCmps = []func(string, any) dao.Criteria{dao.Eq, dao.Ne, dao.Lt, dao.Le, dao.Gt, dao.Ge}
	fuzzRefs = []func(string, string) dao.Criteria{dao.EqField, dao.NeField, dao.LtField, dao.LeField, dao.GtField, dao.GeField}
)

// fuzzRows is the fixed table: every combination of NULL and two values
// in each column.
func fuzzRows() []fuzzRow {
	nums := []*int64{nil, ptr(int64(0)), ptr(int64(1))}
	strs := []*string{nil, ptr(""), ptr("a")}
	strs2 := []*string{nil, ptr("a"), ptr("b")}
	var out []fuzzRow
	for _, a := range nums {
		for _, b := range nums {
			for _, s := range strs {
				for _, t := range strs2 {
					out = append(out, fuzzRow{ID: int64(len(out) + 1), A: a, B: b, S: s, T: t})
				}
			}
		}
	}
	return out
}

func ptr[V any](v V) *V { return &v }

// criteriaDecoder reads a criteria tree from fuzz input. Each node starts
// with a byte whose value modulo 16 selects it: 0-5 a comparison with a
// value (field byte, value byte), 6 In (count, field, values), 7 IsNull
// and 8 NotNull (field), 9 a field-to-field comparison (operator, field,
// other field), 10-11 And and 12-13 Or (operand count modulo 4, then the
// operands), 14 match-all, 15 an Or around the next node. Input that ends
// early yields match-all leaves.
type criteriaDecoder struct{ data []byte }

func (d *criteriaDecoder) next() int {
	if len(d.data) == 0 {
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return int(b)
}

func (d *criteriaDecoder) value(col string) any {
	i := d.next()
	if col == "s" || col == "t" {
		return fuzzStrs[i%len(fuzzStrs)]
	}
	return fuzzNums[i%len(fuzzNums)]
}

func (d *criteriaDecoder) node(depth int) dao.Criteria {
	if len(d.data) == 0 {
		return dao.Criteria{}
	}
	sel := d.next() % 16
	if depth >= 6 && sel >= 10 {
		sel = 7
	}
	col := func() string { return fuzzCols[d.next()%len(fuzzCols)] }
	switch {
	case sel <= 5:
		c := col()
		return fuzzCmps[sel](c, d.value(c))
	case sel == 6:
		n := d.next()%3 + 1
		c := col()
		vs := make([]any, n)
		for i := range vs {
			vs[i] = d.value(c)
		}
		return dao.In(c, vs...)
	case sel == 7:
		return dao.IsNull(col())
	case sel == 8:
		return dao.NotNull(col())
	case sel == 9:
		op := fuzzRefs[d.next()%len(fuzzRefs)]
		c, o := col(), col()
		if (c == "s" || c == "t") != (o == "s" || o == "t") {
			o = c
		}
		return op(c, o)
	case sel <= 13:
		kids := make([]dao.Criteria, d.next()%4)
		for i := range kids {
			kids[i] = d.node(depth + 1)
		}
		if sel <= 11 {
			return dao.And(kids...)
		}
		return dao.Or(kids...)
	case sel == 14:
		return dao.Criteria{}
	}
	return dao.Or(d.node(depth + 1))
}

var (
	placeholder = regexp.MustCompile(`\$\d+|@p\d+|\?`)
	quoted      = regexp.MustCompile("`[^`]*`|\\[[^\\]]*\\]|\"[^\"]*\"")
)

// normalize maps a statement of any dialect to one spelling: identifiers
// in double quotes, placeholders as ?.
func normalize(sqlText string) string {
	s := placeholder.ReplaceAllString(sqlText, "?")
	return quoted.ReplaceAllStringFunc(s, func(q string) string { return `"` + q[1:len(q)-1] + `"` })
}

func balanced(s string) bool {
	depth := 0
	for _, ch := range s {
		switch ch {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// FuzzCriteria decodes a criteria tree from the input and renders it for
// every dialect. Each rendering must have balanced parentheses, one bound
// value per placeholder and the same text as the others up to quoting and
// placeholder spelling; the SQLite rendering, run over a fixed table of
// NULL-heavy rows, must select exactly the rows dao's Go evaluator
// (Model.Match) selects. The seed corpus runs with every go test; to fuzz:
//
//	go test -run '^$' -fuzz '^FuzzCriteria$' -fuzztime 2m ./dialects/
func FuzzCriteria(f *testing.F) {
	for _, seed := range [][]byte{
		// And(Eq("a", 1), Or(Or(Eq("s", ""), Eq("s", "a"))))
		{10, 2, 0, 1, 2, 15, 12, 2, 0, 3, 0, 0, 3, 1},
		// Or(Or(Eq("s", "a"), Eq("s", "b")))
		{15, 12, 2, 0, 3, 1, 0, 3, 2},
		// Or(And(IsNull("a"), NotNull("b")), Or(Or(Or(Gt("a", 0), LtField("s", "t")))))
		{12, 2, 10, 2, 7, 1, 8, 2, 15, 15, 12, 2, 4, 1, 1, 9, 2, 3, 4},
		// And(Ne("b", 1), Or(), IsNull("a")): an Or of no operands is refused
		{10, 3, 1, 2, 2, 12, 0, 7, 1},
		// And(): match-all
		{10, 0},
		// And(In("s", "", "a"), Or(Or(Le("a", 0), Ne("t", "")), Or(GeField("b", "id"))))
		{10, 2, 6, 1, 3, 0, 1, 13, 2, 12, 2, 3, 1, 1, 1, 4, 0, 15, 9, 5, 2, 0},
	} {
		f.Add(seed)
	}
	store, err := memstore.New[fuzzRow]()
	if err != nil {
		f.Fatal(err)
	}
	model := store.Model()
	rows := fuzzRows()
	db := openFuzzTable(f, rows)
	table := dialects.Table{Name: "fuzz_rows", PrimaryKey: "id", Nullable: map[string]bool{"a": true, "b": true, "s": true, "t": true}}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := (&criteriaDecoder{data: data}).node(0)
		checked, err := store.CheckCriteria(c)
		if err != nil {
			return // refused before any rendering, as every store does
		}
		var texts []string
		var sqliteStmt dialects.Statement
		for _, n := range dialects.All() {
			r, err := dialects.NewRenderer(n)
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.Select(table, dao.Query{Where: checked})
			if err != nil {
				t.Fatalf("%s: %v for %v", n, err, c)
			}
			if !balanced(st.SQL) {
				t.Fatalf("%s: unbalanced parentheses: %s", n, st.SQL)
			}
			if got := len(placeholder.FindAllString(st.SQL, -1)); got != len(st.Args) {
				t.Fatalf("%s: %d placeholders, %d values: %s", n, got, len(st.Args), st.SQL)
			}
			texts = append(texts, normalize(st.SQL))
			if n == dialects.SQLite {
				sqliteStmt = st
			}
		}
		for i, s := range texts[1:] {
			if s != texts[0] {
				t.Fatalf("%s renders\n%s\n%s renders\n%s", dialects.All()[i+1], s, dialects.All()[0], texts[0])
			}
		}
		var want []int64
		for i := range rows {
			if model.Match(&rows[i], checked) {
				want = append(want, rows[i].ID)
			}
		}
		got := selectIDs(t, db, sqliteStmt)
		if !slices.Equal(got, want) {
			t.Fatalf("criteria %v\nSQLite: %s %v\nselects %v\nGo evaluation selects %v", c, sqliteStmt.SQL, sqliteStmt.Args, got, want)
		}
	})
}

// openFuzzTable creates table fuzz_rows with rows in a fresh SQLite
// database.
func openFuzzTable(tb testing.TB, rows []fuzzRow) *sql.DB {
	tb.Helper()
	gdb := testdb.SQLite(tb)
	db, err := gdb.DB()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE fuzz_rows (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, s TEXT, t TEXT)`); err != nil {
		tb.Fatal(err)
	}
	var vals []string
	var args []any
	for _, r := range rows {
		vals = append(vals, "(?, ?, ?, ?, ?)")
		args = append(args, r.ID, r.A, r.B, r.S, r.T)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO fuzz_rows VALUES "+strings.Join(vals, ", "), args...); err != nil {
		tb.Fatal(err)
	}
	return db
}

func selectIDs(t *testing.T, db *sql.DB, st dialects.Statement) []int64 {
	t.Helper()
	res, err := db.QueryContext(context.Background(), st.SQL, st.Args...)
	if err != nil {
		t.Fatalf("%s: %v", st.SQL, err)
	}
	defer res.Close()
	var ids []int64
	for res.Next() {
		var r fuzzRow
		if err := res.Scan(&r.ID, &r.A, &r.B, &r.S, &r.T); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
