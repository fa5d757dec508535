package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// arrayMood is a named string type, bound as its underlying string.
type arrayMood string

// arrayRow has a column of every kind an array INSERT binds: an
// auto-increment key, text with a unique index, NULL-able pointers, bytes,
// a default: tag, numbers, a bool, a named type, a driver.Valuer, GORM's
// timestamps in both forms, and soft delete.
type arrayRow struct {
	ID        int64     `gorm:"primaryKey"`
	Name      string    `gorm:"size:64;not null;uniqueIndex"`
	Note      *string   `gorm:"size:64"`
	Blob      []byte    //
	Count     int       `gorm:"default:7"`
	Ratio     float64   //
	Flag      bool      //
	Mood      arrayMood `gorm:"size:16"`
	Code      string    `gorm:"type:char(5)"`
	Label     sql.NullString
	Stamp     *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	CreatedMs int64 `gorm:"autoCreateTime:milli"`
	DeletedAt gorm.DeletedAt
}

// hookedRow has a BeforeCreate hook, which only GORM's create runs.
type hookedRow struct {
	ID   int64
	Name string
}

var hookCalls sync.Map // table row name → calls

func (h *hookedRow) BeforeCreate(*gorm.DB) error {
	n, _ := hookCalls.LoadOrStore(h.Name, new(int))
	*n.(*int)++
	return nil
}

// statementLog is a pgx tracer that records the text of every statement.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.sql = append(l.sql, d.SQL)
	l.mu.Unlock()
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// inserts returns the INSERT statements recorded since the last call: by
// arrays (unnest) and others, and forgets them.
func (l *statementLog) inserts() (arrays, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.sql {
		if strings.HasPrefix(q, "INSERT") {
			if strings.Contains(q, "unnest(") {
				arrays++
			} else {
				other++
			}
		}
	}
	l.sql = nil
	return arrays, other
}

// strictConn is a pgx connection that lets database/sql check bound
// values with its default rules, which refuse slices, as some driver
// middlewares do.
type strictConn struct{ *stdlib.Conn }

func (strictConn) CheckNamedValue(*driver.NamedValue) error { return driver.ErrSkip }

type strictConnector struct{ driver.Connector }

func (c strictConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return strictConn{conn.(*stdlib.Conn)}, nil
}

// openArrays opens the PostgreSQL test database through pgx's own
// database/sql driver with statements recorded in log (strict: through
// strictConn), its clock fixed at now.
func openArrays(t *testing.T, log *statementLog, strict bool, now time.Time) *gorm.DB {
	t.Helper()
	var wrap func(driver.Connector) driver.Connector
	if strict {
		wrap = func(c driver.Connector) driver.Connector { return strictConnector{c} }
	}
	gcfg := testdb.Config()
	gcfg.NowFunc = func() time.Time { return now }
	return openPgx(t, log, wrap, gcfg)
}

// migratedStore returns a store of T on a new table of db named after
// prefix, created by Migrate, and the table's name.
func migratedStore[T any](t *testing.T, db *gorm.DB, prefix string) (*dao.Table[T], string) {
	t.Helper()
	table := testdb.Table(t, db, prefix)
	s, err := sqlstore.New[T](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, table
}

// randomArrayRows returns n rows with a random mix of zero, NULL and set
// values in every column, the key left zero.
func randomArrayRows(rng *rand.Rand, n int, prefix string) []*arrayRow {
	rows := make([]*arrayRow, n)
	for i := range rows {
		r := &arrayRow{Name: fmt.Sprintf("%s-%03d", prefix, i)}
		if rng.IntN(3) == 0 {
			s := fmt.Sprintf("note %d ' \" \\ é", i)
			r.Note = &s
		}
		switch rng.IntN(3) {
		case 0:
			r.Blob = []byte{0, 1, byte(i), 0xff}
		case 1:
			r.Blob = []byte{}
		}
		if rng.IntN(2) == 0 {
			r.Count = rng.IntN(100) - 50
		}
		r.Ratio = float64(rng.IntN(1000)) / 8
		r.Flag = rng.IntN(2) == 0
		if rng.IntN(2) == 0 {
			r.Mood = "calm"
		}
		r.Code = "abcde"[:rng.IntN(6)]
		if rng.IntN(2) == 0 {
			r.Label = sql.NullString{String: "label", Valid: true}
		}
		if rng.IntN(2) == 0 {
			ts := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("UTC+3", 3*3600))
			r.Stamp = &ts
		}
		if rng.IntN(3) == 0 {
			r.CreatedAt = time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
		}
		if rng.IntN(4) == 0 {
			r.DeletedAt = gorm.DeletedAt{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Valid: true}
		}
		rows[i] = r
	}
	return rows
}

func cloneArrayRows(rows []*arrayRow) []*arrayRow {
	out := make([]*arrayRow, len(rows))
	for i, r := range rows {
		c := *r
		out[i] = &c
	}
	return out
}

// readArrayRows reads every row of table, deleted ones included, by name.
func readArrayRows(t *testing.T, db *gorm.DB, table string) []arrayRow {
	t.Helper()
	var rows []arrayRow
	if err := db.Unscoped().Table(table).Order("name").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// Store.Create on PostgreSQL writes many rows by arrays, and what it
// writes is what GORM's own Create writes (with the store's clock): rounds of random NULL-heavy
// rows go once through the store and once through db.Create into a second
// table; the stored rows and the items after the call (keys, defaults and
// timestamps filled in) are compared field by field.
func TestPostgresArrayInsertWritesWhatGORMWrites(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 1, 2, 3, 456789000, time.UTC)
	var log statementLog
	db := openArrays(t, &log, false, now)
	rng := rand.New(rand.NewPCG(7, 27))
	for round := range 5 {
		mine, theirs := testdb.Table(t, db, "arrays"), testdb.Table(t, db, "gormref")
		for _, name := range []string{mine, theirs} {
			if err := db.Table(name).AutoMigrate(&arrayRow{}); err != nil {
				t.Fatal(err)
			}
		}
		s, err := sqlstore.New[arrayRow](db, sqlstore.WithTable(mine))
		if err != nil {
			t.Fatal(err)
		}
		n := 2 + rng.IntN(60)
		items := randomArrayRows(rng, n, fmt.Sprintf("r%d", round))
		ref := cloneArrayRows(items)
		log.inserts()
		if err := s.Create(ctx, items...); err != nil {
			t.Fatal(err)
		}
		if arrays, other := log.inserts(); arrays != 1 || other != 0 {
			t.Fatalf("round %d: %d array INSERTs and %d others for %d rows, want 1 and 0", round, arrays, other, n)
		}
		// The store stamps zero timestamps with its clock to the
		// millisecond (driver.DefaultTimePrecision) before it inserts;
		// GORM's Create with that clock stamps the same values.
		ms := db.Session(&gorm.Session{NowFunc: func() time.Time { return now.Truncate(time.Millisecond) }})
		if err := ms.Table(theirs).Create(ref).Error; err != nil {
			t.Fatal(err)
		}
		for i := range items {
			if !reflect.DeepEqual(*items[i], *ref[i]) {
				t.Errorf("round %d: item %d after Create:\n store %+v\n  gorm %+v", round, i, *items[i], *ref[i])
			}
		}
		got, want := readArrayRows(t, db, mine), readArrayRows(t, db, theirs)
		if len(got) != n || len(want) != n {
			t.Fatalf("round %d: %d and %d rows stored, want %d", round, len(got), len(want), n)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("round %d: row %d stored:\n store %+v\n  gorm %+v", round, i, got[i], want[i])
			}
		}
		t.Logf("round %d: %d rows, one array INSERT, the same rows and items as GORM's", round, n)
	}
}

// A duplicate key among the rows, in one statement or in the second
// statement of a call that needs two, is dao.ErrDuplicate and inserts
// nothing; a value too long for its column is refused, not cut.
func TestPostgresArrayInsertDuplicateInsertsNothing(t *testing.T) {
	ctx := context.Background()
	var log statementLog
	db := openArrays(t, &log, false, time.Now())
	s, _ := migratedStore[arrayRow](t, db, "arraydup")
	// A value longer than a char(5) column is refused, not cut.
	err := s.Create(ctx, &arrayRow{Name: "long1", Code: "abcdefg"}, &arrayRow{Name: "long2"})
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("a char(5) value of 7 characters: %v, want value too long", err)
	}
	for _, n := range []int{3, 10001 + 5} {
		items := make([]*arrayRow, n)
		for i := range items {
			items[i] = &arrayRow{Name: fmt.Sprintf("d%06d", i)}
		}
		items[n-1].Name = items[0].Name
		log.inserts()
		err := s.Create(ctx, items...)
		if !errors.Is(err, dao.ErrDuplicate) {
			t.Fatalf("%d rows with a duplicate: %v, want dao.ErrDuplicate", n, err)
		}
		arrays, _ := log.inserts()
		count, err := s.Count(ctx, dao.Criteria{})
		if err != nil {
			t.Fatal(err)
		}
		if count != 0 || arrays == 0 {
			t.Fatalf("%d rows with a duplicate: %d stored after %d array INSERTs, want 0 stored", n, count, arrays)
		}
		t.Logf("%d rows, last duplicates first: dao.ErrDuplicate after %d array INSERTs, 0 stored", n, arrays)
	}
}

// The calls an array INSERT cannot make go through GORM, and store what
// GORM stores: a model with a create hook (which runs once per row), rows
// of which some set the key and some do not, and a store bound to a
// transaction whose driver refuses slices as bound values.
func TestPostgresArrayInsertFallsBackToGORM(t *testing.T) {
	ctx := context.Background()
	var log statementLog
	db := openArrays(t, &log, false, time.Now())

	t.Run("hook", func(t *testing.T) {
		s, table := migratedStore[hookedRow](t, db, "arrayhook")
		items := []*hookedRow{{Name: table + "a"}, {Name: table + "b"}, {Name: table + "c"}}
		log.inserts()
		if err := s.Create(ctx, items...); err != nil {
			t.Fatal(err)
		}
		if arrays, other := log.inserts(); arrays != 0 || other != 1 {
			t.Errorf("%d array INSERTs and %d others, want GORM's one", arrays, other)
		}
		for _, it := range items {
			n, ok := hookCalls.Load(it.Name)
			if !ok || *n.(*int) != 1 || it.ID == 0 {
				t.Errorf("%s: hook ran %v times, id %d; want once and an id", it.Name, n, it.ID)
			}
		}
	})

	t.Run("mixed-keys", func(t *testing.T) {
		s, table := migratedStore[arrayRow](t, db, "arraymixed")
		items := []*arrayRow{{ID: 1000, Name: "set"}, {Name: "unset"}}
		log.inserts()
		if err := s.Create(ctx, items...); err != nil {
			t.Fatal(err)
		}
		if arrays, other := log.inserts(); arrays != 0 || other != 1 {
			t.Errorf("%d array INSERTs and %d others, want GORM's one", arrays, other)
		}
		if items[0].ID != 1000 || items[1].ID == 0 || items[1].Count != 7 {
			t.Errorf("items after Create: %+v %+v", *items[0], *items[1])
		}
		all := []*arrayRow{{ID: 2000, Name: "k1"}, {ID: 2001, Name: "k2"}}
		if err := s.Create(ctx, all...); err != nil {
			t.Fatal(err)
		}
		if arrays, other := log.inserts(); arrays != 1 || other != 0 {
			t.Errorf("keys all set: %d array INSERTs and %d others, want 1 and 0", arrays, other)
		}
		if got := readArrayRows(t, db, table); len(got) != 4 || got[0].ID != 2000 || got[1].ID != 2001 {
			t.Errorf("stored %+v", got)
		}
	})

	t.Run("missing-table", func(t *testing.T) {
		// The catalog read finds no table without failing, so the error
		// is GORM's INSERT's, not an aborted transaction's.
		s, err := sqlstore.New[arrayRow](db, sqlstore.WithTable(testdb.Table(t, db, "arraymissing")))
		if err != nil {
			t.Fatal(err)
		}
		err = db.Transaction(func(tx *gorm.DB) error {
			return s.WithTx(tx).Create(ctx, &arrayRow{Name: "m1"}, &arrayRow{Name: "m2"})
		})
		if err == nil || !strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "aborted") {
			t.Errorf("Create on a missing table: %v, want the missing relation's error", err)
		}
	})

	t.Run("driver-refuses-arrays", func(t *testing.T) {
		var strictLog statementLog
		strict := openArrays(t, &strictLog, true, time.Now())
		base, table := migratedStore[arrayRow](t, db, "arraystrict")
		err := strict.Transaction(func(tx *gorm.DB) error {
			return base.WithTx(tx).Create(ctx, &arrayRow{Name: "s1"}, &arrayRow{Name: "s2"})
		})
		if err != nil {
			t.Fatal(err)
		}
		if arrays, other := strictLog.inserts(); arrays != 0 || other != 1 {
			t.Errorf("%d array INSERTs and %d others, want GORM's one", arrays, other)
		}
		if got := readArrayRows(t, db, table); len(got) != 2 {
			t.Errorf("stored %d rows, want 2", len(got))
		}
	})
}
