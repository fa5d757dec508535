package sqlstore_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	mssql "github.com/microsoft/go-mssqldb"
	"gorm.io/driver/sqlserver"
	"gorm.io/gorm"
)

// No SQL Server runs where these tests run, so the statement tests put
// go-sqlmock under GORM's SQL Server dialector: every statement the store
// sends must be one the test expects, with exactly these arguments, in
// this order. TestSQLServerConformance runs the real suite when a server is
// configured.

// mssqlJob is the model of the statement tests.
type mssqlJob struct {
	ID       int64 `gorm:"primaryKey"`
	Status   string
	Priority int
	LockedBy *string
}

var mssqlCols = []string{"id", "status", "priority", "locked_by"}

// mssqlStore returns a store over table [jobs] of a GORM SQL Server handle
// whose connection is a sqlmock that matches statements exactly.
func mssqlStore(t *testing.T) (*dao.Table[mssqlJob], sqlmock.Sqlmock) {
	t.Helper()
	conn, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	db, err := gorm.Open(sqlserver.New(sqlserver.Config{Conn: conn}), sqlstore.Config())
	if err != nil {
		t.Fatal(err)
	}
	// New must detect the dialect from the dialector alone: the mock
	// expects nothing yet, so any statement New sent would fail here.
	s, err := sqlstore.New[mssqlJob](db, sqlstore.WithTable("jobs"))
	if err != nil {
		t.Fatalf("New on SQL Server: %v", err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
	return s, mock
}

// checkTSQL fails t when sql contains syntax SQL Server does not have or
// placeholders and quotes of other dialects.
func checkTSQL(t *testing.T, sql string) {
	t.Helper()
	for _, bad := range []string{"FOR UPDATE", "RETURNING", "LIMIT", "SKIP LOCKED", "?", "$", "`", `"`} {
		if strings.Contains(sql, bad) {
			t.Errorf("statement %q contains %q, which is not T-SQL", sql, bad)
		}
	}
}

func TestSQLServerDetectedWithoutQueries(t *testing.T) {
	s, _ := mssqlStore(t)
	var name dialects.Name
	if !s.As(&name) || name != dialects.SQLServer {
		t.Fatalf("dialect = %q, want %q", name, dialects.SQLServer)
	}
	c := s.Capabilities()
	want := dao.Capabilities{Backend: "sqlserver", Strategy: dao.StrategyPortable, Transactions: true, DatabaseClock: true, ClaimRoundTrips: dao.RoundTrips{Fixed: 1, PerRow: 1}, LostRace: dao.LostRaceSkip,
		ClaimTimeout: sqlstore.DefaultClaimTimeout, Collation: dao.Collation{Name: "SQL_Latin1_General_CP1_CI_AS (assumed)", CaseInsensitive: true, PadSpace: true, Linguistic: true}}
	if c != want {
		t.Errorf("Capabilities() = %+v, want %+v", c, want)
	}
	var db *gorm.DB
	if !s.As(&db) {
		t.Fatal("a SQL store gives its *gorm.DB to As")
	}
	fast, err := sqlstore.New[mssqlJob](db, sqlstore.WithStrategy(dao.StrategyFastPath))
	if err != nil {
		t.Fatalf("New with the fast path on sqlserver: %v", err)
	}
	want.Strategy, want.ClaimRoundTrips = dao.StrategyFastPath, dao.RoundTrips{Fixed: 1}
	if c := fast.Capabilities(); c != want {
		t.Errorf("fast path Capabilities() = %+v, want %+v", c, want)
	}
}

// mssqlClaim is the fast-path claim statement of mssqlClaimReq.
const mssqlClaim = "WITH claimed AS (SELECT TOP (@p1) * FROM [jobs] WITH (ROWLOCK, READPAST, UPDLOCK) WHERE [status] = @p2 ORDER BY [priority] DESC, [id]) " +
	"UPDATE claimed SET [locked_by] = @p3, [status] = @p4 OUTPUT INSERTED.*"

// mssqlFastStore returns a store like mssqlStore's, on the fast path.
func mssqlFastStore(t *testing.T) (*dao.Table[mssqlJob], sqlmock.Sqlmock) {
	t.Helper()
	s, mock := mssqlStore(t)
	var db *gorm.DB
	if !s.As(&db) {
		t.Fatal("a SQL store gives its *gorm.DB to As")
	}
	fast, err := sqlstore.New[mssqlJob](db, sqlstore.WithTable("jobs"), sqlstore.WithStrategy(dao.StrategyFastPath))
	if err != nil {
		t.Fatal(err)
	}
	return fast, mock
}

// TestSQLServerFastPathClaim checks the opt-in fast path: exactly one
// statement, with the limit, the criteria and the Set bound in that
// order, and the rows OUTPUT returns (in no particular order) sorted into
// the request's order.
func TestSQLServerFastPathClaim(t *testing.T) {
	checkTSQL(t, mssqlClaim)
	s, mock := mssqlFastStore(t)
	mock.ExpectQuery(mssqlClaim).WithArgs(int64(3), "ready", "w1", "claimed").WillReturnRows(
		sqlmock.NewRows(mssqlCols).
			AddRow(int64(6), "claimed", int64(1), "w1").
			AddRow(int64(4), "claimed", int64(9), "w1").
			AddRow(int64(5), "claimed", int64(9), "w1"))
	got, err := s.Claim(context.Background(), mssqlClaimReq())
	if err != nil {
		t.Fatal(err)
	}
	if ids := mssqlIDs(got); !slices.Equal(ids, []int64{4, 5, 6}) {
		t.Errorf("Claim returned ids %v, want [4 5 6]: priority descending, then id", ids)
	}
	for _, j := range got {
		if j.Status != "claimed" || j.LockedBy == nil || *j.LockedBy != "w1" {
			t.Errorf("row %d returned as status=%q locked_by=%v, want the state OUTPUT returned", j.ID, j.Status, j.LockedBy)
		}
	}
}

// TestSQLServerFastPathErrors: a deadlock victim (1205) was rolled back
// whole, so the statement runs again, and after three losses the claim is
// a lost race (no rows, no error); a lock wait past LOCK_TIMEOUT (1222) is
// ErrBusy with no rows and the native error reachable; no statement is
// sent once the context has ended.
func TestSQLServerFastPathErrors(t *testing.T) {
	ctx := context.Background()
	deadlock := func() error { return mssql.Error{Number: 1205, Message: "chosen as the deadlock victim"} }
	t.Run("DeadlockThenSuccess", func(t *testing.T) {
		s, mock := mssqlFastStore(t)
		mock.ExpectQuery(mssqlClaim).WithArgs(int64(3), "ready", "w1", "claimed").WillReturnError(deadlock())
		mock.ExpectQuery(mssqlClaim).WithArgs(int64(3), "ready", "w1", "claimed").WillReturnRows(
			sqlmock.NewRows(mssqlCols).AddRow(int64(2), "claimed", int64(5), "w1"))
		got, err := s.Claim(ctx, mssqlClaimReq())
		if err != nil || len(got) != 1 || got[0].ID != 2 {
			t.Errorf("Claim after one deadlock = %v, %v; want row 2 from the second run", mssqlIDs(got), err)
		}
	})
	t.Run("DeadlockThreeTimes", func(t *testing.T) {
		s, mock := mssqlFastStore(t)
		for range 3 {
			mock.ExpectQuery(mssqlClaim).WithArgs(int64(3), "ready", "w1", "claimed").WillReturnError(deadlock())
		}
		got, err := s.Claim(ctx, mssqlClaimReq())
		if err != nil || len(got) != 0 {
			t.Errorf("Claim losing three deadlocks = %v, %v; want no rows and no error (a lost race)", mssqlIDs(got), err)
		}
	})
	t.Run("LockTimeout", func(t *testing.T) {
		s, mock := mssqlFastStore(t)
		mock.ExpectQuery(mssqlClaim).WithArgs(int64(3), "ready", "w1", "claimed").
			WillReturnError(&mssql.Error{Number: 1222, Message: "Lock request time out period exceeded."})
		got, err := s.Claim(ctx, mssqlClaimReq())
		if !errors.Is(err, dao.ErrBusy) || !dao.IsRetryable(err) || len(got) != 0 {
			t.Errorf("Claim past LOCK_TIMEOUT = %v, %v; want no rows and a retryable ErrBusy", mssqlIDs(got), err)
		}
		if n, ok := sqlserverErrorNumber(err); !ok || n != 1222 {
			t.Errorf("errors.As does not reach the native error 1222 in %v", err)
		}
	})
	t.Run("ContextDoneBeforeSending", func(t *testing.T) {
		s, _ := mssqlFastStore(t) // the mock expects nothing
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		got, err := s.Claim(cctx, mssqlClaimReq())
		if !errors.Is(err, context.Canceled) || len(got) != 0 {
			t.Errorf("Claim with a canceled context = %v, %v; want nothing sent and context.Canceled", mssqlIDs(got), err)
		}
	})
}

// sqlserverErrorNumber returns the number of the mssql.Error err wraps.
func sqlserverErrorNumber(err error) (int32, bool) {
	var p *mssql.Error
	if errors.As(err, &p) && p != nil {
		return p.Number, true
	}
	var v mssql.Error
	if errors.As(err, &v) {
		return v.Number, true
	}
	return 0, false
}

func TestSQLServerStatements(t *testing.T) {
	ctx := context.Background()
	type stmt struct {
		name string
		sql  string
		args []driver.Value
		run  func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error
	}
	rows := func() *sqlmock.Rows {
		return sqlmock.NewRows(mssqlCols).AddRow(int64(7), "ready", int64(2), nil)
	}
	cases := []stmt{
		{
			name: "Find",
			sql:  "SELECT TOP (@p1) * FROM [jobs] WHERE [status] = @p2 AND [priority] >= @p3 ORDER BY [priority] DESC, [id]",
			args: []driver.Value{int64(5), "ready", int64(1)},
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				mock.ExpectQuery(sql).WithArgs(args...).WillReturnRows(rows())
				got, err := s.Find(ctx, dao.Query{
					Where:   dao.And(dao.Eq("status", "ready"), dao.Ge("priority", 1)),
					OrderBy: []dao.Order{dao.Desc("priority")},
					Limit:   5,
				})
				if err == nil && (len(got) != 1 || got[0].ID != 7 || got[0].Priority != 2 || got[0].LockedBy != nil) {
					t.Errorf("Find returned %+v, want the one mocked row", got)
				}
				return err
			},
		},
		{
			name: "FindNullableOrderNoLimit",
			sql:  "SELECT * FROM [jobs] WHERE [locked_by] IS NULL ORDER BY CASE WHEN [locked_by] IS NULL THEN 1 ELSE 0 END, [locked_by], [id]",
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				mock.ExpectQuery(sql).WithoutArgs().WillReturnRows(sqlmock.NewRows(mssqlCols))
				got, err := s.Find(ctx, dao.Query{Where: dao.IsNull("locked_by"), OrderBy: []dao.Order{dao.Asc("locked_by")}})
				if err == nil && len(got) != 0 {
					t.Errorf("Find returned %+v from an empty result", got)
				}
				return err
			},
		},
		{
			name: "Count",
			sql:  "SELECT COUNT(*) FROM [jobs] WHERE [status] IN (@p1, @p2)",
			args: []driver.Value{"ready", "failed"},
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				mock.ExpectQuery(sql).WithArgs(args...).WillReturnRows(sqlmock.NewRows([]string{""}).AddRow(int64(42)))
				n, err := s.Count(ctx, dao.In("status", "ready", "failed"))
				if err == nil && n != 42 {
					t.Errorf("Count = %d, want 42", n)
				}
				return err
			},
		},
		{
			name: "Update",
			sql:  "UPDATE [jobs] SET [locked_by] = @p1, [priority] = [priority] + @p2 WHERE [status] = @p3",
			args: []driver.Value{nil, int64(1), "failed"},
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				// SQL Server reports matched rows: one statement, no
				// locking count as on MySQL without clientFoundRows.
				mock.ExpectExec(sql).WithArgs(args...).WillReturnResult(sqlmock.NewResult(0, 3))
				n, err := s.Update(ctx, dao.Eq("status", "failed"), dao.Set{"locked_by": nil, "priority": dao.Incr(1)})
				if err == nil && n != 3 {
					t.Errorf("Update = %d, want 3", n)
				}
				return err
			},
		},
		{
			name: "BoundedDelete",
			sql:  "WITH delete_batch AS (SELECT TOP (@p1) * FROM [jobs] WHERE [status] = @p2 ORDER BY [id]) DELETE FROM delete_batch",
			args: []driver.Value{int64(500), "done"},
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				mock.ExpectExec(sql).WithArgs(args...).WillReturnResult(sqlmock.NewResult(0, 500))
				n, err := s.Delete(ctx, dao.Eq("status", "done"), 500)
				if err == nil && n != 500 {
					t.Errorf("Delete = %d, want 500", n)
				}
				return err
			},
		},
		{
			name: "Get",
			sql:  "SELECT TOP (@p1) * FROM [jobs] WHERE [id] = @p2 ORDER BY [id]",
			args: []driver.Value{int64(1), int64(7)},
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				mock.ExpectQuery(sql).WithArgs(args...).WillReturnRows(rows())
				got, err := s.Get(ctx, int64(7))
				if err == nil && got.ID != 7 {
					t.Errorf("Get(7) = %+v", got)
				}
				return err
			},
		},
		{
			name: "GetNotFound",
			sql:  "SELECT TOP (@p1) * FROM [jobs] WHERE [id] = @p2 ORDER BY [id]",
			args: []driver.Value{int64(1), int64(8)},
			run: func(s *dao.Table[mssqlJob], mock sqlmock.Sqlmock, sql string, args []driver.Value) error {
				mock.ExpectQuery(sql).WithArgs(args...).WillReturnRows(sqlmock.NewRows(mssqlCols))
				_, err := s.Get(ctx, int64(8))
				if !errors.Is(err, dao.ErrNotFound) {
					t.Errorf("Get of a missing row = %v, want ErrNotFound", err)
				}
				return nil
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkTSQL(t, c.sql)
			if len(c.args) > 0 && !strings.Contains(c.sql, "@p1") {
				t.Errorf("statement %q binds arguments without @p1", c.sql)
			}
			s, mock := mssqlStore(t)
			if err := c.run(s, mock, c.sql, c.args); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		})
	}
}

const (
	mssqlCandidates = "SELECT TOP (@p1) * FROM [jobs] WHERE [status] = @p2 ORDER BY [priority] DESC, [id]"
	mssqlGuarded    = "UPDATE [jobs] SET [locked_by] = @p1, [status] = @p2 WHERE [id] = @p3 AND [status] = @p4"
)

func mssqlClaimReq() dao.ClaimRequest {
	return dao.ClaimRequest{
		Where:   dao.Eq("status", "ready"),
		Set:     dao.Set{"status": "claimed", "locked_by": "w1"},
		Limit:   3,
		OrderBy: []dao.Order{dao.Desc("priority")},
	}
}

// TestSQLServerPortableClaim checks the portable default's statements: one
// candidate read, then one guarded update per candidate that re-asserts
// the criteria. The second candidate's update affects no row (another
// claimer took it after the read): it is skipped without an error
// (dao.LostRaceSkip), and nothing else is sent for it.
func TestSQLServerPortableClaim(t *testing.T) {
	for _, sql := range []string{mssqlCandidates, mssqlGuarded} {
		checkTSQL(t, sql)
	}
	s, mock := mssqlStore(t)
	mock.ExpectQuery(mssqlCandidates).WithArgs(int64(3), "ready").WillReturnRows(
		sqlmock.NewRows(mssqlCols).
			AddRow(int64(4), "ready", int64(9), nil).
			AddRow(int64(2), "ready", int64(5), nil).
			AddRow(int64(6), "ready", int64(1), nil))
	mock.ExpectExec(mssqlGuarded).WithArgs("w1", "claimed", int64(4), "ready").WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec(mssqlGuarded).WithArgs("w1", "claimed", int64(2), "ready").WillReturnResult(sqlmock.NewResult(0, 0))
	mock.ExpectExec(mssqlGuarded).WithArgs("w1", "claimed", int64(6), "ready").WillReturnResult(sqlmock.NewResult(0, 1))

	got, err := s.Claim(context.Background(), mssqlClaimReq())
	if err != nil {
		t.Fatalf("Claim with a lost race = %v, want no error (LostRaceSkip)", err)
	}
	if len(got) != 2 || got[0].ID != 4 || got[1].ID != 6 {
		t.Fatalf("Claim returned ids %v, want [4 6] in priority order", mssqlIDs(got))
	}
	for _, j := range got {
		if j.Status != "claimed" || j.LockedBy == nil || *j.LockedBy != "w1" {
			t.Errorf("row %d returned as status=%q locked_by=%v, want its post-claim state", j.ID, j.Status, j.LockedBy)
		}
	}
}

func mssqlIDs(rows []mssqlJob) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// TestSQLServerErrorsThroughStore checks that SQL Server errors the driver
// returns from the store's statements arrive as dao sentinels with the
// native error reachable, whether the driver returns mssql.Error by value
// (as go-mssqldb does) or by pointer.
func TestSQLServerErrorsThroughStore(t *testing.T) {
	ctx := context.Background()
	const update = "UPDATE [jobs] SET [status] = @p1 WHERE [id] = @p2"
	for _, c := range []struct {
		number int32
		want   error
	}{{2627, dao.ErrDuplicate}, {2601, dao.ErrDuplicate}, {1205, dao.ErrConflict}} {
		for _, byPointer := range []bool{false, true} {
			s, mock := mssqlStore(t)
			var native error = mssql.Error{Number: c.number, Message: "mocked"}
			if byPointer {
				native = &mssql.Error{Number: c.number, Message: "mocked"}
			}
			mock.ExpectExec(update).WithArgs("x", int64(1)).WillReturnError(native)
			_, err := s.Update(ctx, dao.Eq("id", int64(1)), dao.Set{"status": "x"})
			if !errors.Is(err, c.want) {
				t.Errorf("Update failing with SQL Server error %d = %v, want %v", c.number, err, c.want)
			}
			var number int32
			if byPointer {
				var p *mssql.Error
				if errors.As(err, &p) {
					number = p.Number
				}
			} else {
				var v mssql.Error
				if errors.As(err, &v) {
					number = v.Number
				}
			}
			if number != c.number {
				t.Errorf("error %d (pointer %v): errors.As does not reach the *mssql.Error / mssql.Error in %v", c.number, byPointer, err)
			}
			if c.want == dao.ErrConflict && !dao.IsRetryable(err) {
				t.Errorf("IsRetryable(%v) = false for a deadlock victim", err)
			}
		}
	}
}

// TestSQLServerClaimDeadlockIsALostRace: a guarded update chosen as
// deadlock victim (1205) was rolled back alone; the portable claim counts
// that row as lost to the other transaction, without an error, and goes on
// with the next candidate.
func TestSQLServerClaimDeadlockIsALostRace(t *testing.T) {
	s, mock := mssqlStore(t)
	mock.ExpectQuery(mssqlCandidates).WithArgs(int64(3), "ready").WillReturnRows(
		sqlmock.NewRows(mssqlCols).
			AddRow(int64(4), "ready", int64(9), nil).
			AddRow(int64(2), "ready", int64(5), nil).
			AddRow(int64(6), "ready", int64(1), nil))
	mock.ExpectExec(mssqlGuarded).WithArgs("w1", "claimed", int64(4), "ready").WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec(mssqlGuarded).WithArgs("w1", "claimed", int64(2), "ready").
		WillReturnError(&mssql.Error{Number: 1205, Message: "chosen as the deadlock victim"})
	mock.ExpectExec(mssqlGuarded).WithArgs("w1", "claimed", int64(6), "ready").WillReturnResult(sqlmock.NewResult(0, 1))

	got, err := s.Claim(context.Background(), mssqlClaimReq())
	if err != nil {
		t.Errorf("Claim whose second update is a deadlock victim = %v, want no error (a lost race)", err)
	}
	if len(got) != 2 || got[0].ID != 4 || got[1].ID != 6 || got[0].Status != "claimed" || got[1].Status != "claimed" {
		t.Errorf("Claim returned %+v, want rows 4 and 6 in their claimed state", got)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}

// sqlServerHowTo says how to get a server for TestSQLServerConformance.
const sqlServerHowTo = "start one with: docker compose up -d sqlserver, then set CLAIMSTORE_SQLSERVER_DSN=sqlserver://sa:Claimstore-Passw0rd@127.0.0.1:1433?database=master"

// TestSQLServerConformance runs the conformance suite against the SQL
// Server named by CLAIMSTORE_SQLSERVER_DSN, each test in a fresh table:
// once with the portable default, once with the opt-in fast path; and its
// jobs group.
func TestSQLServerConformance(t *testing.T) {
	dsn := os.Getenv("CLAIMSTORE_SQLSERVER_DSN")
	if dsn == "" {
		if testdb.Required("sqlserver") {
			t.Fatalf("CLAIMSTORE_SQLSERVER_DSN is not set but CLAIMSTORE_REQUIRE names sqlserver; %s", sqlServerHowTo)
		}
		t.Skip("no SQL Server: CLAIMSTORE_SQLSERVER_DSN is not set; " + sqlServerHowTo)
	}
	db, err := sqlstore.Open(context.Background(), "sqlserver", dsn)
	if err != nil {
		if testdb.Required("sqlserver") {
			t.Fatalf("SQL Server unreachable: %v; %s", err, sqlServerHowTo)
		}
		t.Skipf("SQL Server unreachable: %v; %s", err, sqlServerHowTo)
	}
	testdb.CloseAtCleanup(t, db)
	t.Run("portable", func(t *testing.T) { conformance.Run(t, sqlstoretest.Harness(db)) })
	t.Run("fast_path", func(t *testing.T) {
		conformance.Run(t, sqlstoretest.Harness(db, sqlstore.WithStrategy(dao.StrategyFastPath)))
	})
	t.Run("jobs", func(t *testing.T) { conformance.RunJobs(t, sqlstoretest.JobsHarness(db)) })
}
