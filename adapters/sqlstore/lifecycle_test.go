package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/roundtrip"
	"github.com/claimstore/claimstore/internal/testdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/ngrok/sqlmw"
	"gorm.io/gorm"
)

// recorder is an sqlmw hook that records the text of every statement run
// on a connection.
type recorder struct {
	sqlmw.NullInterceptor
	mu  sync.Mutex
	sql []string
}

func (r *recorder) add(q string) {
	r.mu.Lock()
	r.sql = append(r.sql, q)
	r.mu.Unlock()
}

func (r *recorder) ConnExecContext(ctx context.Context, conn driver.ExecerContext, query string, args []driver.NamedValue) (driver.Result, error) {
	r.add(query)
	return r.NullInterceptor.ConnExecContext(ctx, conn, query, args)
}

func (r *recorder) ConnQueryContext(ctx context.Context, conn driver.QueryerContext, query string, args []driver.NamedValue) (context.Context, driver.Rows, error) {
	r.add(query)
	return r.NullInterceptor.ConnQueryContext(ctx, conn, query, args)
}

// take returns the statements recorded since the last call that start
// with prefix, and forgets every recorded statement.
func (r *recorder) take(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.sql {
		if strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	r.sql = nil
	return out
}

// connectorDriver presents a connector as a driver, which sqlmw wraps.
type connectorDriver struct{ c driver.Connector }

func (d connectorDriver) Open(string) (driver.Conn, error) { return d.c.Connect(context.Background()) }

func (d connectorDriver) OpenConnector(string) (driver.Connector, error) { return d.c, nil }

// recordedPostgres opens the test PostgreSQL server through pgx with every
// statement recorded.
func recordedPostgres(t *testing.T) (*gorm.DB, *recorder) {
	t.Helper()
	testdb.Postgres(t) // skips with instructions when the server is absent
	cfg, err := pgx.ParseConfig(testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	conn, err := sqlmw.Driver(connectorDriver{stdlib.GetConnector(*cfg)}, rec).(driver.DriverContext).OpenConnector("")
	if err != nil {
		t.Fatal(err)
	}
	db, err := roundtrip.Gorm("postgres", sql.OpenDB(conn), testdb.Config())
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	return db, rec
}

// softTask is a gorm.Model-based model of plain columns.
type softTask struct {
	gorm.Model
	Status string `gorm:"size:16"`
}

// The PostgreSQL fast-path claim, Update and the soft Delete carry the
// live-row condition and take updated_at and deleted_at from the
// database's clock in the statement itself; the claim returns the values
// stored.
func TestPostgresStatementsCarryLiveRowsAndDatabaseClock(t *testing.T) {
	ctx := context.Background()
	db, rec := recordedPostgres(t)
	s, err := sqlstore.New[softTask](db, sqlstore.WithTable(testdb.Table(t, db, "soft")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Capabilities().Strategy != dao.StrategyFastPath {
		t.Fatalf("strategy %v, want the fast path", s.Capabilities().Strategy)
	}
	rows := []*softTask{{Status: "pending"}, {Status: "pending"}, {Status: "pending"}}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	rec.take("")

	if n, err := s.Delete(ctx, dao.Eq("status", "pending"), 1); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	del := rec.take("UPDATE")
	if len(del) != 1 || !strings.Contains(del[0], `"deleted_at" = statement_timestamp()`) || !strings.Contains(del[0], `"deleted_at" IS NULL`) {
		t.Errorf("soft delete statements %q, want one UPDATE setting deleted_at = statement_timestamp() on live rows", del)
	}

	if n, err := s.Update(ctx, dao.Eq("status", "pending"), dao.Set{"status": "ready"}); err != nil || n != 2 {
		t.Fatalf("Update = %d, %v; want the 2 live rows", n, err)
	}
	up := rec.take("UPDATE")
	if len(up) != 1 || !strings.Contains(up[0], `"updated_at" = statement_timestamp()`) || !strings.Contains(up[0], `"deleted_at" IS NULL`) {
		t.Errorf("Update statements %q, want updated_at = statement_timestamp() and the live-row condition", up)
	}

	dbNow, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.take("")
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "claimed"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	claims := rec.take("WITH claim_ids")
	if len(claims) != 1 || !strings.Contains(claims[0], `WHERE "deleted_at" IS NULL AND "status" = $1`) ||
		!strings.Contains(claims[0], `"updated_at" = statement_timestamp()`) {
		t.Errorf("claim statements %q, want one carrying the live-row condition and updated_at = statement_timestamp()", claims)
	}
	if ids := []uint{got[0].ID, got[len(got)-1].ID}; len(got) != 2 || !slices.Equal(ids, []uint{rows[1].ID, rows[2].ID}) {
		t.Fatalf("claimed %d rows %v, want the live rows %d and %d", len(got), ids, rows[1].ID, rows[2].ID)
	}
	for _, r := range got {
		stored, err := s.Get(ctx, r.ID)
		if err != nil || !stored.UpdatedAt.Equal(r.UpdatedAt) {
			t.Errorf("row %d: claim returned updated_at %v, stored %v (%v)", r.ID, r.UpdatedAt, stored.UpdatedAt, err)
		}
		if d := r.UpdatedAt.Sub(dbNow); d < 0 || d > time.Minute {
			t.Errorf("row %d: updated_at %v is not the database's clock (%v before the claim)", r.ID, r.UpdatedAt, dbNow)
		}
	}
}
