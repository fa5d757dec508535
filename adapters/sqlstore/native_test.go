package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/roundtrip"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// claimLog is a pgx query tracer that tells, for every claim statement a
// connection sends, whether it came through database/sql or was run with
// pgx natively: pgx's database/sql driver passes its result formats
// (pgx.QueryResultFormatsByOID) as the first argument of every query.
type claimLog struct {
	mu             sync.Mutex
	native, viaSQL int
}

func (l *claimLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "claim_ids") {
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(d.Args) > 0 {
		if _, ok := d.Args[0].(pgx.QueryResultFormatsByOID); ok {
			l.viaSQL++
			return ctx
		}
	}
	l.native++
	return ctx
}

func (*claimLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the counts so far and resets them.
func (l *claimLog) take() (native, viaSQL int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	native, viaSQL = l.native, l.viaSQL
	l.native, l.viaSQL = 0, 0
	return native, viaSQL
}

// openTraced opens the PostgreSQL test database with GORM over pgx's
// database/sql driver whose connections report to log. With wrapped, the
// driver is wrapped by the round-trip counter's sqlmw middleware, which
// counts into c: the native path cannot see the pgx connection through
// it. The pool is closed at cleanup.
func openTraced(t *testing.T, log *claimLog, wrapped bool, c *roundtrip.Counter) *gorm.DB {
	t.Helper()
	var wrap func(driver.Connector) driver.Connector
	if wrapped {
		wrap = func(conn driver.Connector) driver.Connector { return roundtrip.Connector(conn, c) }
	}
	db := openPgx(t, log, wrap, testdb.Config())
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(2)
	}
	return db
}

// openPgx opens the PostgreSQL test database with GORM (configured by
// gcfg) over a connector of pgx's database/sql driver whose connections
// report to tracer, wrapped by wrap when it is not nil. It skips, or
// fails when the server is required, if the server is unreachable; the
// pool is closed at cleanup.
func openPgx(t *testing.T, tracer pgx.QueryTracer, wrap func(driver.Connector) driver.Connector, gcfg *gorm.Config) *gorm.DB {
	t.Helper()
	testdb.Postgres(t)
	cfg, err := pgx.ParseConfig(testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = tracer
	var conn driver.Connector = stdlib.GetConnector(*cfg)
	if wrap != nil {
		conn = wrap(conn)
	}
	sqlDB := sql.OpenDB(conn)
	db, err := gorm.Open(gormpg.New(gormpg.Config{Conn: sqlDB}), gcfg)
	if err != nil {
		sqlDB.Close()
		t.Fatal(err)
	}
	return testdb.CloseAtCleanup(t, db)
}

// The fast-path claim runs with pgx on the connection database/sql holds
// when the handle is pgx's own driver, and through database/sql when a
// driver middleware wraps it; both return the same rows in one round trip.
func TestPostgresNativeClaimAndWrappedFallback(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		name := "native"
		if wrapped {
			name = "wrapped"
		}
		t.Run(name, func(t *testing.T) {
			var log claimLog
			var c roundtrip.Counter
			s := newStore(t, openTraced(t, &log, wrapped, &c))
			ctx := context.Background()
			items := seed(t, s, 6) // priorities 0,1,2,0,1,2
			log.take()
			c.Reset()
			got, err := s.Claim(ctx, claimReq("w1", 4))
			if err != nil {
				t.Fatal(err)
			}
			if want := []int64{items[2].ID, items[5].ID, items[1].ID, items[4].ID}; !equal(ids(got), want) {
				t.Fatalf("claimed %v, want %v", ids(got), want)
			}
			for _, r := range got {
				if r.Status != "processing" || r.Owner == nil || *r.Owner != "w1" || r.Attempts != 1 {
					t.Fatalf("returned row not in post-claim state: %+v", r)
				}
			}
			native, viaSQL := log.take()
			if wrapped {
				if native != 0 || viaSQL != 1 {
					t.Fatalf("wrapped driver: %d native, %d database/sql claim statements; want 0, 1", native, viaSQL)
				}
				if n := c.Reset(); n != 1 {
					t.Fatalf("wrapped driver: %d round trips counted, want 1", n)
				}
			} else if native != 1 || viaSQL != 0 {
				t.Fatalf("pgx driver: %d native, %d database/sql claim statements; want 1, 0", native, viaSQL)
			}
		})
	}
}

// A store bound to a caller's transaction still refuses Claim on the
// native path's handle, sends no claim statement, and runs its reads in
// the transaction.
func TestPostgresNativeClaimInTransaction(t *testing.T) {
	var log claimLog
	s := newStore(t, openTraced(t, &log, false, nil))
	ctx := context.Background()
	seed(t, s, 3)
	log.take()
	err := s.DB().Transaction(func(tx *gorm.DB) error {
		ts := s.WithTx(tx)
		if err := ts.Create(ctx, &job{Name: "in-tx", Status: "pending"}); err != nil {
			return err
		}
		if rows, err := ts.Claim(ctx, claimReq("w1", 10)); !errors.Is(err, dao.ErrInTransaction) || rows != nil {
			t.Errorf("Claim in WithTx = %v, %v; want ErrInTransaction", rows, err)
		}
		if n, err := ts.Count(ctx, dao.Eq("status", "pending")); err != nil || n != 4 {
			t.Errorf("Count in tx = %d, %v; want 4", n, err)
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("transaction: %v", err)
	}
	if native, viaSQL := log.take(); native+viaSQL != 0 {
		t.Fatalf("%d claim statements sent from a transaction, want none", native+viaSQL)
	}
	got, err := s.Claim(ctx, claimReq("w1", 10))
	if err != nil || len(got) != 3 {
		t.Fatalf("claim after rollback: %d rows, %v; want 3", len(got), err)
	}
}

// Kind is a named string type, scanned by its kind.
type Kind string

// NativeEmbed is embedded by value: its fields sit at fixed offsets.
type NativeEmbed struct {
	Note  string `gorm:"size:32"`
	Score float64
}

// NativeExtra is embedded through a pointer: the native scan reaches its
// fields with GORM's reflection, which allocates it.
type NativeExtra struct {
	Tag *string `gorm:"size:16"`
}

// wideRow has a field of every kind the native scan handles differently.
type wideRow struct {
	ID          uint64 `gorm:"primaryKey;autoIncrement:false"`
	Status      string `gorm:"size:16;index"`
	Kind        Kind   `gorm:"size:8"`
	Priority    int32
	Attempts    int64
	Owner       *string `gorm:"size:32"`
	Ratio       float32
	Flag        bool
	Blob        []byte
	Maybe       sql.NullString `gorm:"size:16"`
	MaybeN      sql.NullInt64
	LockedUntil *time.Time
	NativeEmbed `gorm:"embedded"`
	*NativeExtra
	CreatedAt time.Time
	UpdatedAt time.Time
	DeletedAt gorm.DeletedAt `gorm:"index"`
}

// The native scan agrees with database/sql's: the rows a claim returns
// equal, field for field, the same rows read back with Find (which scans
// through database/sql); timestamps come from the statement, soft-deleted
// rows are not claimed, and a model with a serializer field claims through
// database/sql.
func TestPostgresNativeScanMatchesFind(t *testing.T) {
	var log claimLog
	db := openTraced(t, &log, false, nil)
	table := testdb.Table(t, db, "native_wide")
	s, err := sqlstore.New[wideRow](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tag, owner := "t", "o"
	until := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	var rows []*wideRow
	for i := range 8 {
		r := &wideRow{ID: uint64(i + 1), Status: "pending", Kind: Kind("k" + string(rune('a'+i))), Priority: int32(i % 3), Ratio: 0.5,
			Flag: i%2 == 0, NativeEmbed: NativeEmbed{Note: "n", Score: float64(i) / 4}}
		if i%2 == 1 {
			r.Owner, r.Blob, r.LockedUntil = &owner, []byte{0, byte(i), 255}, &until
			r.Maybe, r.MaybeN = sql.NullString{String: "m", Valid: true}, sql.NullInt64{Int64: int64(i), Valid: true}
			r.NativeExtra = &NativeExtra{Tag: &tag}
		}
		rows = append(rows, r)
	}
	if err := s.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Delete(ctx, dao.Eq("id", uint64(3)), 1); err != nil || n != 1 {
		t.Fatalf("soft delete: %d, %v", n, err)
	}
	log.take()
	before := time.Now()
	got, err := s.Claim(ctx, dao.ClaimRequest{
		Where:   dao.Eq("status", "pending"),
		Set:     dao.Set{"status": "claimed", "attempts": dao.Incr(1)},
		OrderBy: []dao.Order{dao.Desc("priority"), dao.Asc("id")},
		Limit:   10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if native, viaSQL := log.take(); native != 1 || viaSQL != 0 {
		t.Fatalf("%d native, %d database/sql claim statements; want 1, 0", native, viaSQL)
	}
	var gotIDs []any
	for _, r := range got {
		gotIDs = append(gotIDs, r.ID)
	}
	if want := []any{uint64(6), uint64(2), uint64(5), uint64(8), uint64(1), uint64(4), uint64(7)}; !reflect.DeepEqual(gotIDs, want) {
		t.Fatalf("claimed %v, want %v (row 3 is deleted)", gotIDs, want)
	}
	stored, err := s.Find(ctx, dao.Query{Where: dao.In("id", gotIDs...)})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uint64]wideRow{}
	for _, r := range stored {
		byID[r.ID] = r
	}
	for _, r := range got {
		if r.Status != "claimed" || r.Attempts != 1 || r.UpdatedAt.Before(before.Add(-time.Minute)) {
			t.Errorf("row %d not in its post-claim state: %+v", r.ID, r)
		}
		if !reflect.DeepEqual(r, byID[r.ID]) {
			t.Errorf("row %d: claim scanned\n%+v\nFind scanned\n%+v", r.ID, r, byID[r.ID])
		}
	}
}

// pgSerialRow has a serializer field, which only GORM's scanner reads.
type pgSerialRow struct {
	ID     int64             `gorm:"primaryKey"`
	Status string            `gorm:"size:16"`
	Meta   map[string]string `gorm:"serializer:json"`
}

func TestPostgresSerializerClaimsThroughDatabaseSQL(t *testing.T) {
	var log claimLog
	db := openTraced(t, &log, false, nil)
	table := testdb.Table(t, db, "native_serial")
	s, err := sqlstore.New[pgSerialRow](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &pgSerialRow{Status: "pending", Meta: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	log.take()
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "claimed"}, Limit: 5})
	if err != nil || len(got) != 1 || got[0].Meta["a"] != "b" || got[0].Status != "claimed" {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	if native, viaSQL := log.take(); native != 0 || viaSQL != 1 {
		t.Fatalf("%d native, %d database/sql claim statements; want 0, 1", native, viaSQL)
	}
}

// A database error of the native claim is mapped as on database/sql: a
// unique violation is dao.ErrDuplicate with the pgx error reachable, and
// the statement claimed nothing.
func TestPostgresNativeClaimErrorMapped(t *testing.T) {
	var log claimLog
	s := newStore(t, openTraced(t, &log, false, nil))
	ctx := context.Background()
	seed(t, s, 3)
	log.take()
	rows, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"name": "same"}, Limit: 2})
	var pgErr *pgconn.PgError
	if !errors.Is(err, dao.ErrDuplicate) || !errors.As(err, &pgErr) || pgErr.Code != "23505" || rows != nil {
		t.Fatalf("claim writing one unique value to two rows = %v, %v; want no rows, ErrDuplicate wrapping SQLSTATE 23505", rows, err)
	}
	if native, viaSQL := log.take(); native != 1 || viaSQL != 0 {
		t.Fatalf("%d native, %d database/sql claim statements; want 1, 0", native, viaSQL)
	}
	if n, err := s.Count(ctx, dao.Eq("status", "pending")); err != nil || n != 3 {
		t.Fatalf("after the failed claim: %d pending, %v; want 3", n, err)
	}
}

// NativeShadowed is embedded after a field of the same column name.
type NativeShadowed struct {
	Note string `gorm:"size:32"`
}

// shadowRow has two fields for the column note: its own Note, which GORM
// reads the column into (the shortest path), and NativeShadowed.Note.
type shadowRow struct {
	ID       int64  `gorm:"primaryKey;autoIncrement:false"`
	Status   string `gorm:"size:16"`
	Priority int
	Note     string `gorm:"size:32"`
	NativeShadowed
}

// A column two fields share is scanned by the native claim into the field
// GORM reads it into (schema.Schema.FieldsByDBName), as Find does.
func TestPostgresNativeScanShadowedField(t *testing.T) {
	var log claimLog
	db := openTraced(t, &log, false, nil)
	table := testdb.Table(t, db, "native_shadow")
	s, err := sqlstore.New[shadowRow](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &shadowRow{ID: 1, Status: "pending", Note: "n"}); err != nil {
		t.Fatal(err)
	}
	log.take()
	got, err := s.Claim(ctx, dao.ClaimRequest{
		Where:   dao.Eq("status", "pending"),
		Set:     dao.Set{"status": "claimed"},
		OrderBy: []dao.Order{dao.Asc("id")},
		Limit:   1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if native, viaSQL := log.take(); native != 1 || viaSQL != 0 {
		t.Fatalf("%d native, %d database/sql claim statements; want 1, 0", native, viaSQL)
	}
	stored, err := s.Find(ctx, dao.Query{Where: dao.Eq("id", int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(stored) != 1 {
		t.Fatalf("claimed %d rows, found %d; want 1 and 1", len(got), len(stored))
	}
	if stored[0].Note != "n" {
		t.Fatalf("Find read note into %+v, want Note \"n\"", stored[0])
	}
	if !reflect.DeepEqual(got[0], stored[0]) {
		t.Fatalf("claim scanned\n%+v\nFind scanned\n%+v", got[0], stored[0])
	}
}
