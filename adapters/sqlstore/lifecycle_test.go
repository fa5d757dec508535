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
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/ngrok/sqlmw"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
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

// flagDeleted has the shape of gorm.io/plugin/soft_delete's DeletedAt (an
// unsigned integer whose type supplies GORM's query, update and delete
// clauses; here none), which the store recognizes without importing the
// plugin.
type flagDeleted uint

func (flagDeleted) QueryClauses(*schema.Field) []clause.Interface  { return nil }
func (flagDeleted) UpdateClauses(*schema.Field) []clause.Interface { return nil }
func (flagDeleted) DeleteClauses(*schema.Field) []clause.Interface { return nil }

// unixTask keeps its times as unix integers in GORM's tag forms and soft
// deletes with a 0/1 flag.
type unixTask struct {
	ID        int64
	Status    string      `gorm:"size:16"`
	CreatedAt int64       // seconds, by GORM's field-name convention
	UpdatedMs int64       `gorm:"autoUpdateTime:milli"`
	UpdatedNs int64       `gorm:"autoUpdateTime:nano"`
	Deleted   flagDeleted `gorm:"softDelete:flag;not null;default:0"`
}

// Unix-integer timestamps and the flag soft delete on every SQL database
// here: on PostgreSQL Update and the claim write the database's clock in
// the integer forms, elsewhere the application's.
func TestUnixTimestampsAndFlagSoftDelete(t *testing.T) {
	for name, open := range map[string]func(testing.TB) *gorm.DB{
		"sqlite": testdb.SQLite, "postgres": testdb.Postgres, "mysql": testdb.MySQL,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t)
			s, err := sqlstore.New[unixTask](db, sqlstore.WithTable(testdb.Table(t, db, "unix")))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			// GORM's MySQL dialector truncates NowFunc to the DATETIME
			// precision, milliseconds.
			start := time.Now().Truncate(time.Millisecond)
			a, b := &unixTask{Status: "pending"}, &unixTask{Status: "pending"}
			if err := s.Create(ctx, a, b); err != nil {
				t.Fatal(err)
			}
			if a.CreatedAt < start.Unix() || a.UpdatedMs < start.UnixMilli() || a.UpdatedNs < start.UnixNano() {
				t.Errorf("Create: created_at %d, updated_ms %d, updated_ns %d; want now (%v) in seconds, milliseconds, nanoseconds",
					a.CreatedAt, a.UpdatedMs, a.UpdatedNs, start)
			}
			time.Sleep(3 * time.Millisecond)
			if n, err := s.Update(ctx, dao.Eq("id", a.ID), dao.Set{"status": "ready"}); err != nil || n != 1 {
				t.Fatalf("Update = %d, %v", n, err)
			}
			got, err := s.Get(ctx, a.ID)
			if err != nil || got.UpdatedMs <= a.UpdatedMs || got.UpdatedNs <= a.UpdatedNs || got.CreatedAt != a.CreatedAt ||
				got.UpdatedMs > time.Now().Add(time.Minute).UnixMilli() || got.UpdatedNs/1e6 != got.UpdatedMs {
				t.Errorf("after Update: %+v, %v; want updated_ms and updated_ns bumped to the same instant, created_at kept (%+v)", got, err, a)
			}
			claimed, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "ready"), Set: dao.Set{"status": "claimed"}, Limit: 5})
			if err != nil || len(claimed) != 1 || claimed[0].UpdatedMs < got.UpdatedMs {
				t.Fatalf("Claim = %+v, %v", claimed, err)
			}
			if stored, err := s.Get(ctx, a.ID); err != nil || stored.UpdatedMs != claimed[0].UpdatedMs || stored.UpdatedNs != claimed[0].UpdatedNs {
				t.Errorf("claim returned %+v, stored %+v (%v)", claimed[0], stored, err)
			}
			if n, err := s.Delete(ctx, dao.Criteria{}, 1); err != nil || n != 1 {
				t.Fatalf("Delete = %d, %v", n, err)
			}
			if rows, err := s.Find(ctx, dao.Query{}); err != nil || len(rows) != 1 || rows[0].ID != b.ID {
				t.Errorf("Find after deleting the smallest key = %+v, %v; want row %d only", rows, err, b.ID)
			}
			if r, err := s.Unscoped().Get(ctx, a.ID); err != nil || r.Deleted != 1 {
				t.Errorf("Unscoped().Get = %+v, %v; want the deleted flag 1", r, err)
			}
		})
	}
}

// The application clock of a SQL store is the *gorm.DB's NowFunc, as in
// GORM; the store writes it in UTC, truncated to milliseconds.
func TestApplicationClockIsNowFunc(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 7200))
	db := testdb.SQLite(t).Session(&gorm.Session{NowFunc: func() time.Time { return at }})
	s, err := sqlstore.New[softTask](db, sqlstore.WithTable(testdb.Table(t, db, "clock")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := &softTask{Status: "pending"}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	want := at.UTC().Truncate(time.Millisecond)
	got, err := s.Get(ctx, r.ID)
	if err != nil || !r.CreatedAt.Equal(want) || !got.CreatedAt.Equal(want) || !got.UpdatedAt.Equal(want) {
		t.Errorf("created_at %v, stored %v, %v (%v); want %v", r.CreatedAt, got.CreatedAt, got.UpdatedAt, err, want)
	}
}
