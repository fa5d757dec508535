package dialects

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
)

var jobs = Table{Name: "jobs", PrimaryKey: "id", Nullable: map[string]bool{"locked_until": true}}

var now = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// claimable is the eligibility of a typical claim: pending, or processing
// with an expired lock, and retries left.
var claimable = dao.And(
	dao.Or(
		dao.Eq("status", "pending"),
		dao.And(dao.Eq("status", "processing"), dao.Lt("locked_until", now)),
	),
	dao.LtField("retry_count", "max_retries"),
)

var claimSet = dao.Set{"status": "processing", "locked_by": "w1", "attempts": dao.Incr(1)}

func mustRenderer(t *testing.T, n Name) Renderer {
	t.Helper()
	r, err := NewRenderer(n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type golden struct {
	name string
	got  func(Renderer) (Statement, error)
	want map[Name]Statement
}

func check(t *testing.T, cases []golden) {
	t.Helper()
	for _, c := range cases {
		for _, n := range All() {
			want, ok := c.want[n]
			if !ok {
				continue
			}
			t.Run(c.name+"/"+string(n), func(t *testing.T) {
				got, err := c.got(mustRenderer(t, n))
				if err != nil {
					t.Fatal(err)
				}
				if got.SQL != want.SQL {
					t.Errorf("SQL\n got: %s\nwant: %s", got.SQL, want.SQL)
				}
				if !reflect.DeepEqual(got.Args, want.Args) {
					t.Errorf("args\n got: %#v\nwant: %#v", got.Args, want.Args)
				}
			})
		}
	}
}

func TestSelect(t *testing.T) {
	whereArgs := []any{"pending", "processing", now}
	withLimit := append(append([]any(nil), whereArgs...), int64(10))
	check(t, []golden{
		{
			name: "criteria-order-limit",
			got: func(r Renderer) (Statement, error) {
				return r.Select(jobs, dao.Query{Where: claimable, OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("locked_until")}, Limit: 10})
			},
			want: map[Name]Statement{
				Postgres: {`SELECT * FROM "jobs" WHERE ("status" = $1 OR ("status" = $2 AND "locked_until" < $3)) AND "retry_count" < "max_retries" ORDER BY "priority" DESC, "locked_until", "id" LIMIT $4`, withLimit},
				MySQL:    {"SELECT * FROM `jobs` WHERE (`status` = ? OR (`status` = ? AND `locked_until` < ?)) AND `retry_count` < `max_retries` ORDER BY `priority` DESC, `locked_until` IS NULL, `locked_until`, `id` LIMIT ?", withLimit},
				MariaDB:  {"SELECT * FROM `jobs` WHERE (`status` = ? OR (`status` = ? AND `locked_until` < ?)) AND `retry_count` < `max_retries` ORDER BY `priority` DESC, `locked_until` IS NULL, `locked_until`, `id` LIMIT ?", withLimit},
				SQLite:   {`SELECT * FROM "jobs" WHERE ("status" = ? OR ("status" = ? AND "locked_until" < ?)) AND "retry_count" < "max_retries" ORDER BY "priority" DESC, "locked_until" NULLS LAST, "id" LIMIT ?`, withLimit},
				SQLServer: {"SELECT TOP (@p1) * FROM [jobs] WHERE ([status] = @p2 OR ([status] = @p3 AND [locked_until] < @p4)) AND [retry_count] < [max_retries] ORDER BY [priority] DESC, CASE WHEN [locked_until] IS NULL THEN 1 ELSE 0 END, [locked_until], [id]",
					append([]any{int64(10)}, whereArgs...)},
			},
		},
		{
			name: "all-rows-no-limit",
			got:  func(r Renderer) (Statement, error) { return r.Select(jobs, dao.Query{}) },
			want: map[Name]Statement{
				Postgres:  {`SELECT * FROM "jobs" ORDER BY "id"`, nil},
				MySQL:     {"SELECT * FROM `jobs` ORDER BY `id`", nil},
				SQLite:    {`SELECT * FROM "jobs" ORDER BY "id"`, nil},
				SQLServer: {"SELECT * FROM [jobs] ORDER BY [id]", nil},
			},
		},
		{
			name: "operators",
			got: func(r Renderer) (Statement, error) {
				return r.Select(jobs, dao.Query{Where: dao.And(
					dao.Ne("a", int64(1)), dao.Le("b", int64(2)), dao.Gt("c", int64(3)), dao.Ge("d", int64(4)),
					dao.In("e", "x", "y"), dao.IsNull("f"), dao.NotNull("g"), dao.EqField("h", "i"),
				), OrderBy: []dao.Order{dao.Desc("locked_until"), dao.Desc("id")}})
			},
			want: map[Name]Statement{
				Postgres:  {`SELECT * FROM "jobs" WHERE "a" <> $1 AND "b" <= $2 AND "c" > $3 AND "d" >= $4 AND "e" IN ($5, $6) AND "f" IS NULL AND "g" IS NOT NULL AND "h" = "i" ORDER BY "locked_until" DESC, "id" DESC`, []any{int64(1), int64(2), int64(3), int64(4), "x", "y"}},
				MariaDB:   {"SELECT * FROM `jobs` WHERE `a` <> ? AND `b` <= ? AND `c` > ? AND `d` >= ? AND `e` IN (?, ?) AND `f` IS NULL AND `g` IS NOT NULL AND `h` = `i` ORDER BY `locked_until` IS NULL DESC, `locked_until` DESC, `id` DESC", []any{int64(1), int64(2), int64(3), int64(4), "x", "y"}},
				SQLite:    {`SELECT * FROM "jobs" WHERE "a" <> ? AND "b" <= ? AND "c" > ? AND "d" >= ? AND "e" IN (?, ?) AND "f" IS NULL AND "g" IS NOT NULL AND "h" = "i" ORDER BY "locked_until" DESC NULLS FIRST, "id" DESC`, []any{int64(1), int64(2), int64(3), int64(4), "x", "y"}},
				SQLServer: {"SELECT * FROM [jobs] WHERE [a] <> @p1 AND [b] <= @p2 AND [c] > @p3 AND [d] >= @p4 AND [e] IN (@p5, @p6) AND [f] IS NULL AND [g] IS NOT NULL AND [h] = [i] ORDER BY CASE WHEN [locked_until] IS NULL THEN 1 ELSE 0 END DESC, [locked_until] DESC, [id] DESC", []any{int64(1), int64(2), int64(3), int64(4), "x", "y"}},
			},
		},
	})
}

func TestCountUpdate(t *testing.T) {
	check(t, []golden{
		{
			name: "count",
			got:  func(r Renderer) (Statement, error) { return r.Count(jobs, dao.Eq("status", "pending")) },
			want: map[Name]Statement{
				Postgres:  {`SELECT COUNT(*) FROM "jobs" WHERE "status" = $1`, []any{"pending"}},
				MySQL:     {"SELECT COUNT(*) FROM `jobs` WHERE `status` = ?", []any{"pending"}},
				SQLite:    {`SELECT COUNT(*) FROM "jobs" WHERE "status" = ?`, []any{"pending"}},
				SQLServer: {"SELECT COUNT(*) FROM [jobs] WHERE [status] = @p1", []any{"pending"}},
			},
		},
		{
			name: "update",
			got: func(r Renderer) (Statement, error) {
				return r.Update(jobs, dao.Eq("status", "failed"), dao.Set{"status": "pending", "retry_count": dao.Incr(1), "locked_by": nil})
			},
			want: map[Name]Statement{
				Postgres:  {`UPDATE "jobs" SET "locked_by" = $1, "retry_count" = "retry_count" + $2, "status" = $3 WHERE "status" = $4`, []any{nil, int64(1), "pending", "failed"}},
				MySQL:     {"UPDATE `jobs` SET `locked_by` = ?, `retry_count` = `retry_count` + ?, `status` = ? WHERE `status` = ?", []any{nil, int64(1), "pending", "failed"}},
				SQLite:    {`UPDATE "jobs" SET "locked_by" = ?, "retry_count" = "retry_count" + ?, "status" = ? WHERE "status" = ?`, []any{nil, int64(1), "pending", "failed"}},
				SQLServer: {"UPDATE [jobs] SET [locked_by] = @p1, [retry_count] = [retry_count] + @p2, [status] = @p3 WHERE [status] = @p4", []any{nil, int64(1), "pending", "failed"}},
			},
		},
		{
			name: "guarded-update",
			got:  func(r Renderer) (Statement, error) { return r.GuardedUpdate(jobs, int64(7), claimable, claimSet) },
			want: map[Name]Statement{
				Postgres:  {`UPDATE "jobs" SET "attempts" = "attempts" + $1, "locked_by" = $2, "status" = $3 WHERE "id" = $4 AND (("status" = $5 OR ("status" = $6 AND "locked_until" < $7)) AND "retry_count" < "max_retries")`, []any{int64(1), "w1", "processing", int64(7), "pending", "processing", now}},
				MySQL:     {"UPDATE `jobs` SET `attempts` = `attempts` + ?, `locked_by` = ?, `status` = ? WHERE `id` = ? AND ((`status` = ? OR (`status` = ? AND `locked_until` < ?)) AND `retry_count` < `max_retries`)", []any{int64(1), "w1", "processing", int64(7), "pending", "processing", now}},
				SQLite:    {`UPDATE "jobs" SET "attempts" = "attempts" + ?, "locked_by" = ?, "status" = ? WHERE "id" = ? AND (("status" = ? OR ("status" = ? AND "locked_until" < ?)) AND "retry_count" < "max_retries")`, []any{int64(1), "w1", "processing", int64(7), "pending", "processing", now}},
				SQLServer: {"UPDATE [jobs] SET [attempts] = [attempts] + @p1, [locked_by] = @p2, [status] = @p3 WHERE [id] = @p4 AND (([status] = @p5 OR ([status] = @p6 AND [locked_until] < @p7)) AND [retry_count] < [max_retries])", []any{int64(1), "w1", "processing", int64(7), "pending", "processing", now}},
			},
		},
		{
			name: "guarded-update-match-all",
			got: func(r Renderer) (Statement, error) {
				return r.GuardedUpdate(jobs, "k", dao.Criteria{}, dao.Set{"status": "x"})
			},
			want: map[Name]Statement{
				Postgres: {`UPDATE "jobs" SET "status" = $1 WHERE "id" = $2`, []any{"x", "k"}},
			},
		},
	})
}

func TestLockingCount(t *testing.T) {
	check(t, []golden{{
		name: "locking-count",
		got:  func(r Renderer) (Statement, error) { return r.LockingCount(jobs, dao.Eq("status", "x")) },
		want: map[Name]Statement{
			Postgres:  {`SELECT COUNT(*) FROM (SELECT 1 FROM "jobs" WHERE "status" = $1 FOR UPDATE) AS locked`, []any{"x"}},
			MySQL:     {"SELECT COUNT(*) FROM `jobs` WHERE `status` = ? FOR UPDATE", []any{"x"}},
			MariaDB:   {"SELECT COUNT(*) FROM `jobs` WHERE `status` = ? FOR UPDATE", []any{"x"}},
			SQLite:    {`SELECT COUNT(*) FROM "jobs" WHERE "status" = ?`, []any{"x"}},
			SQLServer: {"SELECT COUNT(*) FROM [jobs] WITH (UPDLOCK, HOLDLOCK) WHERE [status] = @p1", []any{"x"}},
		},
	}})
}

// SQLite compares times as text, so every bound time is in UTC there; the
// other dialects bind times as given.
func TestSQLiteBindsTimesInUTC(t *testing.T) {
	zone := time.FixedZone("UTC-7", -7*3600)
	local := time.Date(2025, 1, 2, 3, 4, 5, 6, zone)
	for _, n := range All() {
		st, err := mustRenderer(t, n).Update(jobs, dao.Lt("locked_until", local), dao.Set{"locked_until": local})
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range st.Args {
			got := a.(time.Time)
			if !got.Equal(local) {
				t.Fatalf("%s: arg %d = %v, not the same instant as %v", n, i, got, local)
			}
			if wantUTC := n == SQLite; (got.Location() == time.UTC) != wantUTC {
				t.Errorf("%s: arg %d bound in %v", n, i, got.Location())
			}
		}
	}
}

func TestDelete(t *testing.T) {
	check(t, []golden{{
		name: "bounded",
		got:  func(r Renderer) (Statement, error) { return r.Delete(jobs, dao.Eq("status", "published"), 500) },
		want: map[Name]Statement{
			Postgres:  {`DELETE FROM "jobs" WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "status" = $1 ORDER BY "id" LIMIT $2)`, []any{"published", int64(500)}},
			MySQL:     {"DELETE FROM `jobs` WHERE `status` = ? ORDER BY `id` LIMIT ?", []any{"published", int64(500)}},
			MariaDB:   {"DELETE FROM `jobs` WHERE `status` = ? ORDER BY `id` LIMIT ?", []any{"published", int64(500)}},
			SQLite:    {`DELETE FROM "jobs" WHERE "id" IN (SELECT "id" FROM "jobs" WHERE "status" = ? ORDER BY "id" LIMIT ?)`, []any{"published", int64(500)}},
			SQLServer: {"WITH delete_batch AS (SELECT TOP (@p1) * FROM [jobs] WHERE [status] = @p2 ORDER BY [id]) DELETE FROM delete_batch", []any{int64(500), "published"}},
		},
	}})
}

func TestClaimPostgres(t *testing.T) {
	check(t, []golden{
		{
			name: "fast-path",
			got: func(r Renderer) (Statement, error) {
				return r.Claim(jobs, dao.ClaimRequest{Where: claimable, Set: claimSet, Limit: 5, OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("created_at")}})
			},
			want: map[Name]Statement{
				Postgres: {`WITH claim_ids AS MATERIALIZED (SELECT "id", "priority" AS claimstore_order_1, "created_at" AS claimstore_order_2 FROM "jobs" WHERE ("status" = $1 OR ("status" = $2 AND "locked_until" < $3)) AND "retry_count" < "max_retries" ORDER BY "priority" DESC, "created_at", "id" LIMIT $4 FOR UPDATE SKIP LOCKED), ` +
					`claimed AS (UPDATE "jobs" AS t SET "attempts" = t."attempts" + $5, "locked_by" = $6, "status" = $7 FROM claim_ids WHERE t."id" = claim_ids."id" RETURNING t.*, claim_ids.claimstore_order_1, claim_ids.claimstore_order_2) ` +
					`SELECT * FROM claimed ORDER BY claimed.claimstore_order_1 DESC, claimed.claimstore_order_2, claimed."id"`,
					[]any{"pending", "processing", now, int64(5), int64(1), "w1", "processing"}},
			},
		},
		{
			name: "pk-order-only",
			got: func(r Renderer) (Statement, error) {
				return r.Claim(Table{Name: "public.jobs", PrimaryKey: "id"}, dao.ClaimRequest{Set: dao.Set{"status": "x"}, Limit: 1, OrderBy: []dao.Order{dao.Desc("id")}})
			},
			want: map[Name]Statement{
				Postgres: {`WITH claim_ids AS MATERIALIZED (SELECT "id" FROM "public"."jobs" ORDER BY "id" DESC LIMIT $1 FOR UPDATE SKIP LOCKED), ` +
					`claimed AS (UPDATE "public"."jobs" AS t SET "status" = $2 FROM claim_ids WHERE t."id" = claim_ids."id" RETURNING t.*) ` +
					`SELECT * FROM claimed ORDER BY claimed."id" DESC`,
					[]any{int64(1), "x"}},
			},
		},
	})
}

// The one-statement claims of SQLite (UPDATE ... WHERE pk IN (the ranked
// ids of a materialized CTE) RETURNING *, rank) and SQL Server (an UPDATE through a TOP (n)
// common table expression read WITH (ROWLOCK, READPAST, UPDLOCK), OUTPUT
// INSERTED.*), with their arguments in text order.
func TestClaimSQLiteAndSQLServer(t *testing.T) {
	check(t, []golden{
		{
			name: "fast-path",
			got: func(r Renderer) (Statement, error) {
				return r.Claim(jobs, dao.ClaimRequest{Where: claimable, Set: claimSet, Limit: 5, OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("locked_until")}})
			},
			want: map[Name]Statement{
				SQLite: {`WITH claim_ids AS MATERIALIZED (SELECT "id", row_number() OVER (ORDER BY "priority" DESC, "locked_until" NULLS LAST, "id") AS claimstore_rank ` +
					`FROM (SELECT * FROM "jobs" WHERE ("status" = ? OR ("status" = ? AND "locked_until" < ?)) AND "retry_count" < "max_retries" ORDER BY "priority" DESC, "locked_until" NULLS LAST, "id" LIMIT CAST(? AS INTEGER))) ` +
					`UPDATE "jobs" SET "attempts" = "attempts" + ?, "locked_by" = ?, "status" = ? WHERE "id" IN (SELECT "id" FROM claim_ids) ` +
					`RETURNING *, (SELECT claimstore_rank FROM claim_ids WHERE claim_ids."id" = "jobs"."id") AS claimstore_rank`,
					[]any{"pending", "processing", now, int64(5), int64(1), "w1", "processing"}},
				SQLServer: {"WITH claimed AS (SELECT TOP (@p1) * FROM [jobs] WITH (ROWLOCK, READPAST, UPDLOCK) WHERE ([status] = @p2 OR ([status] = @p3 AND [locked_until] < @p4)) AND [retry_count] < [max_retries] " +
					"ORDER BY [priority] DESC, CASE WHEN [locked_until] IS NULL THEN 1 ELSE 0 END, [locked_until], [id]) UPDATE claimed SET [attempts] = [attempts] + @p5, [locked_by] = @p6, [status] = @p7 OUTPUT INSERTED.*",
					[]any{int64(5), "pending", "processing", now, int64(1), "w1", "processing"}},
			},
		},
		{
			name: "match-all",
			got: func(r Renderer) (Statement, error) {
				return r.Claim(jobs, dao.ClaimRequest{Set: dao.Set{"status": "x"}, Limit: 1})
			},
			want: map[Name]Statement{
				SQLite: {`WITH claim_ids AS MATERIALIZED (SELECT "id", row_number() OVER (ORDER BY "id") AS claimstore_rank FROM (SELECT * FROM "jobs" ORDER BY "id" LIMIT CAST(? AS INTEGER))) ` +
					`UPDATE "jobs" SET "status" = ? WHERE "id" IN (SELECT "id" FROM claim_ids) RETURNING *, (SELECT claimstore_rank FROM claim_ids WHERE claim_ids."id" = "jobs"."id") AS claimstore_rank`,
					[]any{int64(1), "x"}},
				SQLServer: {"WITH claimed AS (SELECT TOP (@p1) * FROM [jobs] WITH (ROWLOCK, READPAST, UPDLOCK) ORDER BY [id]) UPDATE claimed SET [status] = @p2 OUTPUT INSERTED.*", []any{int64(1), "x"}},
			},
		},
	})
}

func TestMySQLFastPathStatements(t *testing.T) {
	check(t, []golden{
		{
			name: "lock-candidates",
			got: func(r Renderer) (Statement, error) {
				return r.LockCandidates(jobs, dao.Query{Where: dao.Eq("status", "pending"), OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("locked_until")}, Limit: 5})
			},
			want: map[Name]Statement{
				MySQL:   {"SELECT * FROM `jobs` WHERE `status` = ? ORDER BY `priority` DESC, `locked_until` IS NULL, `locked_until`, `id` LIMIT ? FOR UPDATE SKIP LOCKED", []any{"pending", int64(5)}},
				MariaDB: {"SELECT * FROM `jobs` WHERE `status` = ? ORDER BY `priority` DESC, `locked_until` IS NULL, `locked_until`, `id` LIMIT ? FOR UPDATE SKIP LOCKED", []any{"pending", int64(5)}},
			},
		},
		{
			name: "update-by-ids",
			got: func(r Renderer) (Statement, error) {
				return r.UpdateByIDs(jobs, []any{int64(3), int64(1)}, claimSet)
			},
			want: map[Name]Statement{
				MySQL:   {"UPDATE `jobs` SET `attempts` = `attempts` + ?, `locked_by` = ?, `status` = ? WHERE `id` IN (?, ?)", []any{int64(1), "w1", "processing", int64(3), int64(1)}},
				MariaDB: {"UPDATE `jobs` SET `attempts` = `attempts` + ?, `locked_by` = ?, `status` = ? WHERE `id` IN (?, ?)", []any{int64(1), "w1", "processing", int64(3), int64(1)}},
			},
		},
	})
	for _, n := range []Name{Postgres, SQLite, SQLServer} {
		if _, err := mustRenderer(t, n).LockCandidates(jobs, dao.Query{Limit: 1}); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: LockCandidates error = %v", n, err)
		}
	}
	if _, err := mustRenderer(t, MySQL).LockCandidates(jobs, dao.Query{}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("LockCandidates without a limit: %v", err)
	}
	if _, err := mustRenderer(t, MySQL).UpdateByIDs(jobs, nil, claimSet); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("UpdateByIDs without ids: %v", err)
	}
}

func TestClaimWithoutFastPath(t *testing.T) {
	for _, n := range []Name{MySQL, MariaDB} {
		_, err := mustRenderer(t, n).Claim(jobs, dao.ClaimRequest{Set: claimSet, Limit: 1})
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: Claim error = %v, want ErrInvalidArgument", n, err)
		}
	}
}

// SQL Server has no FOR UPDATE, no RETURNING and no LIMIT; nothing the
// renderer produces for it may contain them.
func TestSQLServerHasNoForeignSyntax(t *testing.T) {
	r := mustRenderer(t, SQLServer)
	var out []Statement
	add := func(s Statement, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	add(r.Select(jobs, dao.Query{Where: claimable, Limit: 3}))
	add(r.Count(jobs, claimable))
	add(r.Update(jobs, claimable, claimSet))
	add(r.GuardedUpdate(jobs, int64(1), claimable, claimSet))
	add(r.Delete(jobs, claimable, 3))
	add(r.Claim(jobs, dao.ClaimRequest{Where: claimable, Set: claimSet, Limit: 3}))
	for _, s := range out {
		for _, bad := range []string{"FOR UPDATE", "RETURNING", "LIMIT", "?", "$", "`", `"`} {
			if strings.Contains(s.SQL, bad) {
				t.Errorf("%q contains %q", s.SQL, bad)
			}
		}
		if !strings.Contains(s.SQL, "@p1") {
			t.Errorf("%q has no @p1 parameter", s.SQL)
		}
	}
}

func TestQuoting(t *testing.T) {
	cases := map[Name]string{Postgres: `"a""b"`, SQLite: `"a""b"`, MySQL: "`a\"b`", SQLServer: `[a"b]`}
	for n, want := range cases {
		if got := mustRenderer(t, n).Quote(`a"b`); got != want {
			t.Errorf("%s: Quote = %s, want %s", n, got, want)
		}
	}
	if got := mustRenderer(t, MySQL).Quote("a`b"); got != "`a``b`" {
		t.Errorf("MySQL Quote = %s", got)
	}
	if got := mustRenderer(t, SQLServer).Quote("a]b"); got != "[a]]b]" {
		t.Errorf("SQL Server Quote = %s", got)
	}
	if got := mustRenderer(t, Postgres).QuoteTable("s.t"); got != `"s"."t"` {
		t.Errorf("QuoteTable = %s", got)
	}
}

func TestInvalidInput(t *testing.T) {
	r := mustRenderer(t, Postgres)
	errs := []error{}
	_, err := r.Select(jobs, dao.Query{Limit: -1})
	errs = append(errs, err)
	_, err = r.Select(jobs, dao.Query{Where: dao.In("a")})
	errs = append(errs, err)
	_, err = r.Select(jobs, dao.Query{Where: dao.Or()})
	errs = append(errs, err)
	_, err = r.Select(jobs, dao.Query{Where: dao.Eq("a", nil)})
	errs = append(errs, err)
	_, err = r.Update(jobs, dao.Criteria{}, nil)
	errs = append(errs, err)
	_, err = r.Update(jobs, dao.Criteria{}, dao.Set{"id": int64(1)})
	errs = append(errs, err)
	_, err = r.Delete(jobs, dao.Criteria{}, 0)
	errs = append(errs, err)
	_, err = r.Claim(jobs, dao.ClaimRequest{Set: claimSet})
	errs = append(errs, err)
	_, err = r.GuardedUpdate(jobs, nil, dao.Criteria{}, claimSet)
	errs = append(errs, err)
	_, err = r.Count(Table{Name: "x"}, dao.Criteria{})
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("case %d: error = %v, want ErrInvalidArgument", i, err)
		}
	}
	if _, err := NewRenderer("oracle"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewRenderer(oracle) = %v", err)
	}
}

// A statement binding more values than the dialect accepts is refused
// before it reaches a driver.
func TestTooManyParams(t *testing.T) {
	for _, n := range All() {
		r := mustRenderer(t, n)
		vals := make([]any, r.MaxParams())
		for i := range vals {
			vals[i] = int64(i)
		}
		if _, err := r.Count(jobs, dao.In("id", vals...)); err != nil {
			t.Errorf("%s: %d values refused: %v", n, len(vals), err)
		}
		if _, err := r.Count(jobs, dao.In("id", append(vals, int64(-1))...)); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: %d values: %v, want ErrInvalidArgument", n, len(vals)+1, err)
		}
	}
}

func TestFastPathAllowList(t *testing.T) {
	if got := DefaultFastPath(); !reflect.DeepEqual(got, []Name{Postgres, SQLite}) {
		t.Fatalf("DefaultFastPath = %v", got)
	}
	for _, n := range []Name{Postgres, SQLite} {
		if !FastPathAllowed(n, DefaultFastPath()) {
			t.Errorf("%s not allowed by default", n)
		}
	}
	for _, n := range []Name{MySQL, MariaDB, SQLServer} {
		if FastPathAllowed(n, DefaultFastPath()) {
			t.Errorf("%s allowed by default", n)
		}
	}
	if !FastPathAllowed(MariaDB, append(DefaultFastPath(), MariaDB)) {
		t.Error("MariaDB not allowed when opted in")
	}
	for _, n := range []Name{SQLServer} {
		if !HasFastPath(n) || !FastPathAllowed(n, append(DefaultFastPath(), n)) {
			t.Errorf("%s not allowed when opted in", n)
		}
	}
	if FastPathAllowed("oracle", []Name{"oracle"}) {
		t.Error("an unknown dialect allowed although it has no fast path")
	}
	if FastPathAllowed(Postgres, nil) {
		t.Error("Postgres allowed by an empty list")
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Name{"postgres": Postgres, "PostgreSQL": Postgres, "mysql": MySQL, "mariadb": MariaDB, "sqlite": SQLite, "sqlserver": SQLServer, "mssql": SQLServer} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Parse("oracle"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("Parse(oracle) = %v", err)
	}
}
