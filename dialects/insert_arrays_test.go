package dialects

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
)

// insertArraysCases are the representative array inserts: the outbox's
// columns with a RETURNING key, a schema-qualified table, quoted type and
// identifier names, no RETURNING, and the refusals.
var insertArraysCases = []struct {
	name      string
	table     Table
	cols      []ArrayColumn
	returning []string
}{
	{"returning-key", Table{Name: "outbox_messages", PrimaryKey: "id"}, []ArrayColumn{
		{"message_id", "character varying"}, {"payload", "bytea"}, {"priority", "bigint"},
		{"created_at", "timestamp with time zone"}, {"amount", "numeric(12,2)"},
	}, []string{"id"}},
	{"qualified-table-no-returning", Table{Name: "app.jobs", PrimaryKey: "id"}, []ArrayColumn{{"id", "bigint"}, {"kind", "text"}}, nil},
	{"odd-identifiers", Table{Name: "odd\"`]name", PrimaryKey: "k\"`]ey"}, []ArrayColumn{{"n\"`]ul", `public."Mood"`}, {"plain", `"a""b"`}}, []string{"k\"`]ey", "plain"}},
	{"refused/array-type", Table{Name: "jobs"}, []ArrayColumn{{"tags", "text[]"}}, nil},
	{"refused/injection", Table{Name: "jobs"}, []ArrayColumn{{"a", "int[]); DROP TABLE jobs; --"}}, nil},
	{"refused/semicolon", Table{Name: "jobs"}, []ArrayColumn{{"a", "int; DROP TABLE jobs"}}, nil},
	{"refused/open-quote", Table{Name: "jobs"}, []ArrayColumn{{"a", `"x`}}, nil},
	{"refused/no-columns", Table{Name: "jobs"}, nil, nil},
	{"refused/empty-type", Table{Name: "jobs"}, []ArrayColumn{{"a", " "}}, nil},
}

// TestGoldenInsertArrays compares the array inserts of every dialect with
// testdata/<dialect>/insert-arrays.golden (rewritten with -update): the
// statement on PostgreSQL, "not rendered" elsewhere, and the refusals.
func TestGoldenInsertArrays(t *testing.T) {
	for _, n := range All() {
		t.Run(string(n), func(t *testing.T) {
			r := mustRenderer(t, n)
			var b strings.Builder
			for _, c := range insertArraysCases {
				fmt.Fprintf(&b, "-- %s\n", c.name)
				st, ok, err := r.InsertArrays(c.table, c.cols, c.returning)
				switch {
				case err != nil:
					if !errors.Is(err, dao.ErrInvalidArgument) {
						t.Errorf("%s: error %v does not wrap dao.ErrInvalidArgument", c.name, err)
					}
					fmt.Fprintf(&b, "-- error: %v\n\n", err)
				case !ok:
					b.WriteString("-- not rendered\n\n")
				default:
					if strings.HasPrefix(c.name, "refused/") {
						t.Errorf("%s: rendered %q", c.name, st.SQL)
					}
					fmt.Fprintf(&b, "%s\n\n", st.SQL)
				}
			}
			checkGolden(t, filepath.Join("testdata", string(n), "insert-arrays.golden"), b.String())
		})
	}
}

// updateArraysCases are the representative array updates: the jobs
// completer's failure outcome (matched by key and lease owner, a common
// lease reset, a criteria), a schema-qualified table without common
// values or criteria, and the refusals.
var updateArraysCases = []struct {
	name   string
	table  Table
	cols   []ArrayColumn
	match  int
	common dao.Set
	where  dao.Criteria
}{
	{"outcomes", Table{Name: "claimstore_jobs", PrimaryKey: "id"}, []ArrayColumn{
		{"id", "bigint"}, {"lease_owner", "character varying"},
		{"errors", "text"}, {"scheduled_at", "timestamp with time zone"}, {"state", "character varying"},
	}, 2, dao.Set{"lease_owner": "", "attempt": 3}, dao.Eq("state", "available")},
	{"qualified-table", Table{Name: "app.jobs", PrimaryKey: "id"}, []ArrayColumn{{"id", "bigint"}, {"n", "integer"}}, 1, nil, dao.Criteria{}},
	{"refused/no-written-column", Table{Name: "jobs", PrimaryKey: "id"}, []ArrayColumn{{"id", "bigint"}}, 1, nil, dao.Criteria{}},
	{"refused/writes-the-key", Table{Name: "jobs", PrimaryKey: "id"}, []ArrayColumn{{"lease", "text"}, {"id", "bigint"}}, 1, nil, dao.Criteria{}},
	{"refused/injection", Table{Name: "jobs", PrimaryKey: "id"}, []ArrayColumn{{"id", "bigint"}, {"a", "int[]); DROP TABLE jobs; --"}}, 1, nil, dao.Criteria{}},
	{"refused/common-writes-the-key", Table{Name: "jobs", PrimaryKey: "id"}, []ArrayColumn{{"id", "bigint"}, {"a", "int"}}, 1, dao.Set{"id": 1}, dao.Criteria{}},
}

// TestGoldenUpdateArrays compares the array updates of every dialect with
// testdata/<dialect>/update-arrays.golden (rewritten with -update): the
// statement and its bound values on PostgreSQL, "not rendered"
// elsewhere, and the refusals.
func TestGoldenUpdateArrays(t *testing.T) {
	for _, n := range All() {
		t.Run(string(n), func(t *testing.T) {
			r := mustRenderer(t, n)
			var b strings.Builder
			for _, c := range updateArraysCases {
				fmt.Fprintf(&b, "-- %s\n", c.name)
				arrays := make([]any, len(c.cols))
				for i := range arrays {
					arrays[i] = fmt.Sprintf("<array %d>", i+1)
				}
				st, ok, err := r.UpdateArrays(c.table, c.cols, c.match, arrays, c.common, c.where)
				switch {
				case err != nil:
					if !errors.Is(err, dao.ErrInvalidArgument) {
						t.Errorf("%s: error %v does not wrap dao.ErrInvalidArgument", c.name, err)
					}
					fmt.Fprintf(&b, "-- error: %v\n\n", err)
				case !ok:
					b.WriteString("-- not rendered\n\n")
				default:
					if strings.HasPrefix(c.name, "refused/") {
						t.Errorf("%s: rendered %q", c.name, st.SQL)
					}
					fmt.Fprintf(&b, "%s\n-- args: %v\n\n", st.SQL, st.Args)
				}
			}
			checkGolden(t, filepath.Join("testdata", string(n), "update-arrays.golden"), b.String())
		})
	}
}
