package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// refusedConnection reports whether err carries a server's refusal of a
// connection past a limit: PostgreSQL 53300, MySQL or MariaDB 1040, 1203
// or 1226.
func refusedConnection(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "53300"
	}
	var myErr *gomysql.MySQLError
	return errors.As(err, &myErr) && (myErr.Number == 1040 || myErr.Number == 1203 || myErr.Number == 1226)
}

// refusalCounting counts the claims and the writes of a worker's store
// that failed because the server refused the pool a connection.
type refusalCounting struct {
	*dao.Table[dispatch.Schedule]
	claims, writes atomic.Int64
}

func (s *refusalCounting) count(n *atomic.Int64, err error) {
	if refusedConnection(err) {
		n.Add(1)
	}
}

func (s *refusalCounting) Claim(ctx context.Context, req dao.ClaimRequest) ([]dispatch.Schedule, error) {
	rows, err := s.Table.Claim(ctx, req)
	s.count(&s.claims, err)
	return rows, err
}

func (s *refusalCounting) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	n, err := s.Table.Update(ctx, where, set)
	s.count(&s.writes, err)
	return n, err
}

func (s *refusalCounting) UpdateKeys(ctx context.Context, where dao.Criteria, set dao.Set) ([]any, error) {
	keys, err := s.Table.UpdateKeys(ctx, where, set)
	s.count(&s.writes, err)
	return keys, err
}

// TestOutcomeWritesRetryRefusedConnections runs a schedule worker whose
// pool may open more connections than the server allows its account (a
// PostgreSQL role WITH CONNECTION LIMIT 2, a MariaDB user WITH
// MAX_USER_CONNECTIONS 2, under a pool of 8 that keeps none idle, which
// the handlers use too): the server refuses some of the connections the
// pool opens for the worker's claims and outcome writes. The refusal is retryable, so the
// worker writes every outcome in the end: each of the 300 once schedules
// fires exactly once, none waits for its lease (5 s) to run again, no
// write is counted as failed, and no row stays leased. Before the
// refusals were classified, each refused outcome write was dropped and
// its schedule fired again after its lease.
func TestOutcomeWritesRetryRefusedConnections(t *testing.T) {
	for _, b := range []struct {
		name    string
		admin   func(testing.TB) *gorm.DB
		limited func(testing.TB, *gorm.DB, int, ...string) *gorm.DB
	}{
		{"postgres", testdb.Postgres, testdb.PostgresLimited},
		{"mariadb", testdb.MySQL, testdb.MySQLLimited},
	} {
		t.Run(b.name, func(t *testing.T) {
			admin := b.admin(t)
			ctx := context.Background()
			table := testdb.Table(t, admin, "connlimit")
			if err := dispatch.MigrateSchedules(ctx, admin, table); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			adminStore, err := sqlstore.New[dispatch.Schedule](admin, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			sc := newSchedules(t, adminStore, dispatch.SchedulesConfig{})
			const n = 300
			past := time.Now().Add(-time.Minute)
			for i := range n {
				if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("once-%03d", i), At: past}); err != nil {
					t.Fatal(err)
				}
			}

			limited := b.limited(t, admin, 2, table)
			pool, err := limited.DB()
			if err != nil {
				t.Fatal(err)
			}
			pool.SetMaxOpenConns(8)
			pool.SetMaxIdleConns(0)
			table2, err := sqlstore.New[dispatch.Schedule](limited, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			store := &refusalCounting{Table: table2}
			f := newFires()
			var handlerRefused atomic.Int64
			w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
				f.record(fr)
				// The handler's own use of the pool, as an application's
				// handlers share it with the worker: it keeps the pool
				// opening connections past the account's limit. Its error
				// is only counted.
				if err := pool.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); refusedConnection(err) {
					handlerRefused.Add(1)
				}
				return nil
			}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
				WorkerID: "limited", Concurrency: 16, PollInterval: 20 * time.Millisecond, Lease: 5 * time.Second, OutcomeDelay: time.Millisecond,
			})
			stop := runWorker(t, w.Run)
			waitFor(t, 90*time.Second, "every once schedule fired", func() bool {
				c, err := adminStore.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, "once"), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired))))
				return err == nil && c == n
			})
			stop()
			st := w.Stats()
			t.Logf("refused connections: %d claims, %d writes (each retried), %d handler queries; worker %+v",
				store.claims.Load(), store.writes.Load(), handlerRefused.Load(), st)
			if store.writes.Load() == 0 {
				t.Fatal("no write was refused a connection: the test did not exercise the limit")
			}
			for i := range n {
				if c := f.count(fmt.Sprintf("once-%03d", i)); c != 1 {
					t.Errorf("once-%03d fired %d times", i, c)
				}
			}
			if st.WriteErrors != 0 {
				t.Errorf("worker stats %+v; want no write errors", st)
			}
			owned, err := adminStore.Count(ctx, dao.Ne(dispatch.ColLeaseOwner, ""))
			if err != nil || owned != 0 {
				t.Errorf("%d rows still leased after the worker stopped (err %v)", owned, err)
			}
		})
	}
}
