package dialects

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// update rewrites the golden files under testdata/ from the renderer's
// current output instead of comparing with them:
//
//	go test ./dialects -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenRequest is one representative request. Every statement kind
// renders every request, taking the fields it uses, so a refusal is
// recorded in the golden file as well as a rendering.
type goldenRequest struct {
	name  string
	table Table
	where dao.Criteria
	order []dao.Order
	set   dao.Set
	limit int
	id    any
	ids   []any
}

// goldenKinds are the statement kinds, one golden file per dialect each:
// testdata/<dialect>/<kind>.golden.
var goldenKinds = []struct {
	kind   string
	render func(Renderer, goldenRequest) (Statement, error)
}{
	{"select", func(r Renderer, q goldenRequest) (Statement, error) {
		return r.Select(q.table, dao.Query{Where: q.where, OrderBy: q.order, Limit: q.limit})
	}},
	{"count", func(r Renderer, q goldenRequest) (Statement, error) { return r.Count(q.table, q.where) }},
	{"locking-count", func(r Renderer, q goldenRequest) (Statement, error) { return r.LockingCount(q.table, q.where) }},
	{"update", func(r Renderer, q goldenRequest) (Statement, error) { return r.Update(q.table, q.where, q.set) }},
	{"guarded-update", func(r Renderer, q goldenRequest) (Statement, error) {
		return r.GuardedUpdate(q.table, q.id, q.where, q.set)
	}},
	{"delete", func(r Renderer, q goldenRequest) (Statement, error) { return r.Delete(q.table, q.where, q.limit) }},
	{"lock-candidates", func(r Renderer, q goldenRequest) (Statement, error) {
		return r.LockCandidates(q.table, dao.Query{Where: q.where, OrderBy: q.order, Limit: q.limit})
	}},
	{"update-by-ids", func(r Renderer, q goldenRequest) (Statement, error) { return r.UpdateByIDs(q.table, q.ids, q.set) }},
	{"update-keys", func(r Renderer, q goldenRequest) (Statement, error) {
		st, ok, err := r.UpdateKeys(q.table, q.where, q.set)
		if err == nil && !ok {
			// MySQL and MariaDB: the locking key read that replaces it.
			return r.LockKeys(q.table, q.where)
		}
		return st, err
	}},
	{"claim", func(r Renderer, q goldenRequest) (Statement, error) {
		return r.Claim(q.table, dao.ClaimRequest{Where: q.where, Set: q.set, OrderBy: q.order, Limit: q.limit})
	}},
}

// Fixtures of the golden requests.
var (
	gNow   = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	gLocal = time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("UTC-7", -7*3600))
	gJobs  = Table{Name: "jobs", PrimaryKey: "id", Nullable: map[string]bool{"locked_until": true}}
	gOdd   = Table{Name: "odd\"`]name", PrimaryKey: "k\"`]ey", Nullable: map[string]bool{"n\"`]ul": true}}

	gClaimSet = dao.Set{"status": "processing", "locked_by": "w1", "attempts": dao.Incr(1), "locked_until": gLocal}
	// gNowSet writes the database's clock in every form, as the portable
	// layer stamps autoUpdateTime columns.
	gNowSet = dao.Set{"status": "processing", "updated_at": driver.CurrentTime{Form: driver.TimeValue},
		"updated_s": driver.CurrentTime{Form: driver.UnixSeconds}, "updated_ms": driver.CurrentTime{Form: driver.UnixMillis},
		"updated_ns": driver.CurrentTime{Form: driver.UnixNanos}}
	gMixed = []dao.Order{dao.Desc("priority"), dao.Asc("locked_until")}
)

// goldenRequests covers the criteria shapes (match-all, leaf, every
// operator, nested And/Or with single-operand wrappers, field-to-field),
// nullable and plain order columns in both directions, Set values (plain,
// NULL, Increment), limits, a schema-qualified table, identifiers holding
// every dialect's closing quote, times in a non-UTC zone, and the requests
// the statements refuse.
func goldenRequests() []goldenRequest {
	eligible := dao.And(
		dao.Or(dao.Eq("status", "pending"), dao.And(dao.Eq("status", "processing"), dao.Lt("locked_until", gNow))),
		dao.LtField("retry_count", "max_retries"),
	)
	operators := dao.And(
		dao.Ne("a", int64(1)), dao.Le("b", 2.5), dao.Gt("c", int64(3)), dao.Ge("d", int64(4)),
		dao.In("e", "x", "y"), dao.IsNull("f"), dao.NotNull("g"), dao.EqField("h", "i"),
		dao.NeField("h", "j"), dao.GeField("k", "l"), dao.LeField("k", "m"), dao.GtField("k", "n"),
	)
	wrapped := dao.Or(dao.Or(dao.And(dao.Eq("a", int64(1)), dao.Or(dao.Or(dao.Eq("s", "x"), dao.Eq("s", "y"))))), dao.Eq("s", "z"))
	odd := dao.And(dao.Eq("n\"`]ul", true), dao.Or(dao.IsNull("k\"`]ey"), dao.EqField("k\"`]ey", "n\"`]ul")))
	oddSet := dao.Set{"n\"`]ul": dao.Incr(2), "plain": "v"}
	null := dao.Set{"locked_by": nil}
	return []goldenRequest{
		{"all-rows", gJobs, dao.Criteria{}, nil, null, 0, "k", []any{"k"}},
		{"leaf", gJobs, dao.Eq("status", "pending"), gMixed, gClaimSet, 10, int64(7), []any{int64(3), int64(1)}},
		{"eligible", gJobs, eligible, gMixed, gClaimSet, 5, int64(7), []any{int64(7)}},
		{"eligible-no-limit", gJobs, eligible, nil, gClaimSet, 0, int64(7), []any{int64(7)}},
		{"operators", gJobs, operators, []dao.Order{dao.Desc("locked_until"), dao.Desc("id")}, null, 1, "k", []any{"a", "b", "c"}},
		{"wrapped", gJobs, wrapped, []dao.Order{dao.Desc("id")}, gClaimSet, 2, int64(1), []any{int64(1)}},
		{"single-operand-or", gJobs, dao.Or(dao.Or(dao.Eq("s", "x"))), []dao.Order{dao.Asc("id"), dao.Asc("b")}, null, 3, int64(2), []any{int64(2)}},
		{"local-time", gJobs, dao.Lt("locked_until", gLocal), []dao.Order{dao.Asc("locked_until")}, gClaimSet, 4, gLocal, []any{gLocal, gNow}},
		{"qualified-table", Table{Name: "app.jobs", PrimaryKey: "id"}, eligible, gMixed, gClaimSet, 6, int64(9), []any{int64(9)}},
		{"primary-index", Table{Name: "jobs", PrimaryKey: "id", PrimaryIndex: true}, eligible, gMixed, gClaimSet, 6, int64(9), []any{int64(9)}},
		{"live-rows-current-time", gJobs, dao.And(dao.IsNull("deleted_at"), dao.Eq("status", "pending")), gMixed, gNowSet, 5, int64(7), []any{int64(7)}},
		{"odd-identifiers", gOdd, odd, []dao.Order{dao.Desc("n\"`]ul"), dao.Asc("plain")}, oddSet, 3, "k", []any{"a", "b"}},
		{"refused/negative-limit", gJobs, eligible, nil, gClaimSet, -1, int64(1), []any{int64(1)}},
		{"refused/empty-set", gJobs, eligible, nil, dao.Set{}, 1, int64(1), []any{int64(1)}},
		{"refused/set-writes-pk", gJobs, eligible, nil, dao.Set{"id": int64(1), "a": int64(2)}, 1, int64(1), []any{int64(1)}},
		{"refused/no-key-values", gJobs, eligible, nil, gClaimSet, 1, nil, nil},
		{"refused/no-primary-key", Table{Name: "jobs"}, eligible, nil, gClaimSet, 1, int64(1), []any{int64(1)}},
		{"refused/no-table-name", Table{PrimaryKey: "id"}, eligible, nil, gClaimSet, 1, int64(1), []any{int64(1)}},
		{"refused/empty-or", gJobs, dao.And(dao.Eq("a", int64(1)), dao.Or()), nil, gClaimSet, 1, int64(1), []any{int64(1)}},
		{"refused/empty-in", gJobs, dao.In("a"), nil, gClaimSet, 1, int64(1), []any{int64(1)}},
		{"refused/nil-value", gJobs, dao.Eq("a", nil), nil, gClaimSet, 1, int64(1), []any{int64(1)}},
	}
}

// goldenText renders every case of a kind for one dialect: per case a
// "-- name" line, then the SQL and a "-- args:" line, or an "-- error:"
// line.
func goldenText(r Renderer, render func(Renderer, goldenRequest) (Statement, error)) string {
	var b strings.Builder
	for _, q := range goldenRequests() {
		fmt.Fprintf(&b, "-- %s\n", q.name)
		st, err := render(r, q)
		if err != nil {
			fmt.Fprintf(&b, "-- error: %v\n\n", err)
			continue
		}
		fmt.Fprintf(&b, "%s\n-- args: %s\n\n", st.SQL, formatArgs(st.Args))
	}
	return b.String()
}

// formatArgs spells bound values with their Go types, times with their
// zone, so a change of type or zone shows in the golden file.
func formatArgs(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			parts[i] = "nil"
		case string:
			parts[i] = fmt.Sprintf("%q", v)
		case time.Time:
			parts[i] = "time(" + v.Format(time.RFC3339Nano) + " " + v.Location().String() + ")"
		case []*string:
			elems := make([]any, len(v))
			for j, p := range v {
				if p != nil {
					elems[j] = *p
				}
			}
			parts[i] = "[]*string" + formatArgs(elems)
		default:
			parts[i] = fmt.Sprintf("%T(%v)", v, v)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TestGolden compares every statement kind on every dialect with its
// golden file, byte for byte. With -update it writes the files instead.
func TestGolden(t *testing.T) {
	for _, k := range goldenKinds {
		for _, n := range All() {
			path := filepath.Join("testdata", string(n), k.kind+".golden")
			t.Run(string(n)+"/"+k.kind, func(t *testing.T) {
				got := goldenText(mustRenderer(t, n), k.render)
				checkGolden(t, path, got)
			})
		}
	}
}

// firstDiff shows the first line where want and got differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d\nwant: %s\n got: %s", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// checkGolden compares got with the golden file at path, or with -update
// writes it there (creating its directory).
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./dialects -run TestGolden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendered text:\n%s", path, firstDiff(string(want), got))
	}
}
