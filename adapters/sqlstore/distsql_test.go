package sqlstore_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// No CockroachDB or YugabyteDB server runs where these tests run, so they
// put go-sqlmock under GORM's PostgreSQL dialector and answer New's
// queries as those servers would: the version string, the collation
// probe, and the isolation probe inside a READ COMMITTED transaction.
// Real servers are checked with make conformance DB=cockroach or
// DB=yugabyte (docs/distributed-sql.md).

const (
	crdbVersion = "CockroachDB CCL v24.1.0 (x86_64-pc-linux-gnu, built 2024/05/15 21:28:29, go1.22.2 X:nocoverageredesign)"
	ybVersion   = "PostgreSQL 11.2-YB-2.20.2.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6, 64-bit"
	pgVersion   = "PostgreSQL 16.4 on x86_64-pc-linux-gnu, compiled by gcc, 64-bit"
)

// pgWireMock returns a GORM PostgreSQL handle over a sqlmock that expects
// the version query (answered with version) and the collation probe.
func pgWireMock(t *testing.T, version string) (*gorm.DB, sqlmock.Sqlmock) {
	t.Helper()
	conn, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: conn}), sqlstore.Config())
	if err != nil {
		t.Fatal(err)
	}
	mock.ExpectQuery(`^SELECT VERSION\(\)$`).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(version))
	mock.ExpectQuery(`FROM pg_database WHERE datname = current_database\(\)`).
		WillReturnRows(sqlmock.NewRows([]string{"datcollate", "a", "b", "c", "d", "e"}).AddRow("C", false, false, false, true, true))
	return db, mock
}

// expectProbe expects the isolation probe: a READ COMMITTED transaction
// running probe, answered with level, rolled back.
func expectProbe(mock sqlmock.Sqlmock, probe, level string) {
	mock.ExpectBegin()
	mock.ExpectQuery("^" + probe + "$").WillReturnRows(sqlmock.NewRows([]string{"level"}).AddRow(level))
	mock.ExpectRollback()
}

// TestDistributedSQLIsolationCheck: New detects CockroachDB and YugabyteDB
// from the version string, probes the level a READ COMMITTED transaction
// really runs at, and refuses a server on which READ COMMITTED is not
// enabled with ErrInvalidArgument naming the setting; PostgreSQL is not
// probed.
func TestDistributedSQLIsolationCheck(t *testing.T) {
	cases := []struct {
		name, version, probe, level string
		want                        dialects.Name
		refusal                     string // "" when New must succeed
	}{
		{"cockroachdb enabled", crdbVersion, "SHOW transaction_isolation", "read committed", dialects.CockroachDB, ""},
		{"cockroachdb upgraded to serializable", crdbVersion, "SHOW transaction_isolation", "serializable", dialects.CockroachDB, "sql.txn.read_committed_isolation.enabled"},
		{"yugabytedb enabled", ybVersion, "SHOW yb_effective_transaction_isolation_level", "read committed", dialects.YugabyteDB, ""},
		{"yugabytedb snapshot fallback", ybVersion, "SHOW yb_effective_transaction_isolation_level", "repeatable read", dialects.YugabyteDB, "yb_enable_read_committed_isolation"},
		{"postgresql", pgVersion, "", "", dialects.Postgres, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, mock := pgWireMock(t, c.version)
			if c.probe != "" {
				expectProbe(mock, c.probe, c.level)
			} else {
				// PostgreSQL: its default fast path reads the session's isolation.
				mock.ExpectQuery(`^SELECT current_setting\('transaction_isolation'\)$`).
					WillReturnRows(sqlmock.NewRows([]string{"level"}).AddRow("read committed"))
			}
			s, err := sqlstore.New[mssqlJob](db, sqlstore.WithTable("jobs"))
			if mErr := mock.ExpectationsWereMet(); mErr != nil {
				t.Errorf("statements New sent: %v", mErr)
			}
			if c.refusal != "" {
				if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), c.refusal) {
					t.Fatalf("New = %v; want ErrInvalidArgument naming %s", err, c.refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			var got dialects.Name
			if !s.As(&got) || got != c.want {
				t.Errorf("detected %q, want %q", got, c.want)
			}
			if caps := s.Capabilities(); caps.Backend != string(c.want) {
				t.Errorf("Capabilities().Backend = %q, want %q", caps.Backend, c.want)
			}
		})
	}
}

// TestDistributedSQLFastPath: with the fast path opted in, New reads the
// session's default isolation as on PostgreSQL, and the claim is one
// statement when it is READ COMMITTED, an explicit READ COMMITTED
// transaction (three round trips) otherwise; the statement a claim sends
// is the dialect's (YugabyteDB's without MATERIALIZED).
func TestDistributedSQLFastPath(t *testing.T) {
	cases := []struct {
		name, version, probe, sessionDefault string
		trips                                int
		claimPrefix                          string
	}{
		{"cockroachdb session read committed", crdbVersion, "SHOW transaction_isolation", "read committed", 1, `WITH claim_ids AS MATERIALIZED (SELECT`},
		{"cockroachdb session serializable", crdbVersion, "SHOW transaction_isolation", "serializable", 3, `WITH claim_ids AS MATERIALIZED (SELECT`},
		{"yugabytedb session read committed", ybVersion, "SHOW yb_effective_transaction_isolation_level", "read committed", 1, `WITH claim_ids AS (SELECT`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, mock := pgWireMock(t, c.version)
			expectProbe(mock, c.probe, "read committed")
			mock.ExpectQuery(`^SELECT current_setting\('transaction_isolation'\)$`).
				WillReturnRows(sqlmock.NewRows([]string{"level"}).AddRow(c.sessionDefault))
			s, err := sqlstore.New[mssqlJob](db, sqlstore.WithTable("jobs"), sqlstore.WithStrategy(dao.StrategyFastPath))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
			caps := s.Capabilities()
			if caps.Strategy != dao.StrategyFastPath || caps.ClaimRoundTrips.Fixed != c.trips || caps.LostRace != dao.LostRaceSkip {
				t.Errorf("Capabilities: strategy %v, round trips %+v, lost race %v; want fast path, %d, skip", caps.Strategy, caps.ClaimRoundTrips, caps.LostRace, c.trips)
			}
			inTx := c.trips == 3
			if inTx {
				mock.ExpectExec(`^BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = \d+; SET LOCAL statement_timeout = \d+$`).
					WillReturnResult(sqlmock.NewResult(0, 0))
			}
			mock.ExpectQuery("^" + regexp.QuoteMeta(c.claimPrefix) + `.* FOR UPDATE SKIP LOCKED\), claimed AS \(UPDATE`).
				WillReturnRows(sqlmock.NewRows(mssqlCols).AddRow(int64(1), "running", 0, nil))
			if inTx {
				mock.ExpectExec(`^COMMIT$`).WillReturnResult(sqlmock.NewResult(0, 0))
			}
			got, err := s.Claim(t.Context(), dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "running"}, Limit: 2})
			if err != nil || len(got) != 1 || got[0].ID != 1 || got[0].Status != "running" {
				t.Errorf("Claim = %+v, %v; want row 1 running", got, err)
			}
			if err := mock.ExpectationsWereMet(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDistributedSQLLockerUnsupported: a Locker made from a *gorm.DB with
// GORM's PostgreSQL dialector asks the server its version on the first
// attempt, and on CockroachDB and YugabyteDB, which have no advisory
// locks, refuses with errors.ErrUnsupported before any transaction, fn
// not run; on PostgreSQL it goes on to the advisory lock.
func TestDistributedSQLLockerUnsupported(t *testing.T) {
	for _, version := range []string{crdbVersion, ybVersion} {
		conn, mock, err := sqlmock.New()
		if err != nil {
			t.Fatal(err)
		}
		db, err := gorm.Open(postgres.New(postgres.Config{Conn: conn}), sqlstore.Config())
		if err != nil {
			t.Fatal(err)
		}
		mock.ExpectQuery(`^SELECT VERSION\(\)$`).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(version))
		l, err := sqlstore.NewLocker(db)
		if err != nil {
			t.Fatalf("NewLocker: %v", err)
		}
		for range 2 { // the version is asked once
			ran, err := l.TryLock(t.Context(), "k", func(context.Context, any) error { t.Error("fn ran"); return nil })
			if ran || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%.30s: TryLock = %v, %v; want false, errors.ErrUnsupported", version, ran, err)
			}
		}
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
		conn.Close()
	}

	conn, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: conn}), sqlstore.Config())
	if err != nil {
		t.Fatal(err)
	}
	mock.ExpectQuery(`^SELECT VERSION\(\)$`).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(pgVersion))
	mock.ExpectBegin()
	mock.ExpectQuery(`pg_try_advisory_xact_lock`).WillReturnRows(sqlmock.NewRows([]string{"ok"}).AddRow(1))
	mock.ExpectCommit()
	l, err := sqlstore.NewLocker(db)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	ran, err := l.TryLock(t.Context(), "k", func(context.Context, any) error { return nil })
	if !ran || err != nil {
		t.Errorf("PostgreSQL: TryLock = %v, %v; want true, nil", ran, err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
