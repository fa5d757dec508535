package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/google/uuid"
	"gorm.io/gorm"
)

// label is a named string type: the SQLite scanner reads it through
// GORM's own per-field scan.
type label string

// KindsAudit is a struct embedded by value in kindsRow (exported: GORM
// skips an embedded struct of an unexported type).
type KindsAudit struct {
	Reviewer *string `gorm:"size:32"`
	Rounds   int32
}

// KindsExtra is a struct embedded through a pointer in kindsRow: GORM
// allocates it when it reads a row, also when its columns are NULL.
type KindsExtra struct {
	Hint *string `gorm:"size:32"`
}

// kindsRow has a field of every kind of column the SQLite scanner
// converts, a timestamp column of each form GORM writes, and a soft
// delete column.
type kindsRow struct {
	ID        int64 `gorm:"primaryKey;autoIncrement:false"`
	Status    string
	Flag      bool
	FlagP     *bool
	I8        int8
	I16       int16
	I32       int32
	I         int
	IP        *int64
	U8        uint8
	U16       uint16
	U32       uint32
	U64       uint64
	U         uint
	F32       float32
	F64       float64
	FP        *float64
	S         string `gorm:"size:64"`
	SP        *string
	Bytes     []byte
	At        time.Time
	AtP       *time.Time
	NS        sql.NullString
	NI        sql.NullInt64
	NT        sql.NullTime
	UID       uuid.UUID `gorm:"type:text"`
	UIDP      *uuid.UUID
	Label     label `gorm:"size:16"`
	LabelP    *label
	CreatedAt time.Time
	UpdatedAt int64 `gorm:"autoUpdateTime:nano"`
	Deleted   gorm.DeletedAt
	KindsAudit
	*KindsExtra
}

// fullKindsRow returns a row with a value in every column; at has
// nanoseconds, which SQLite's text keeps.
func fullKindsRow(id int64, at time.Time) *kindsRow {
	hint, reviewer, note := "hint", "ann", "text with 'quotes' and ünïcödé"
	lbl := label("blue")
	u := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	t2 := at.Add(90 * time.Minute)
	return &kindsRow{
		ID: id, Status: "pending", Flag: true, FlagP: new(bool),
		I8: -128, I16: 32767, I32: -2147483648, I: 1 << 40, IP: new(int64(-7)),
		U8: 255, U16: 65535, U32: 4294967295, U64: 1<<63 - 1, U: 42,
		F32: 1.5, F64: -0.1, FP: new(1e-300),
		S: "plain", SP: &note, Bytes: []byte{0, 1, 2, 255},
		At: at, AtP: &t2,
		NS: sql.NullString{String: "ns", Valid: true}, NI: sql.NullInt64{Int64: -3, Valid: true},
		NT:  sql.NullTime{Time: at, Valid: true},
		UID: u, UIDP: &u, Label: lbl, LabelP: &lbl,
		KindsAudit: KindsAudit{Reviewer: &reviewer, Rounds: 3},
		KindsExtra: &KindsExtra{Hint: &hint},
	}
}

// kindsStore returns a store of kindsRow on a fresh migrated SQLite table,
// with opts, and the handle it runs on.
func kindsStore(t *testing.T, opts ...sqlstore.Option) (*dao.Table[kindsRow], *gorm.DB) {
	t.Helper()
	db := testdb.SQLite(t)
	s, err := sqlstore.New[kindsRow](db, append(opts, sqlstore.WithTable(testdb.Table(t, db, "kinds")))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, db
}

// gormRows reads the rows of s's table with GORM's own finder (its
// scanner, as ScanRows), deleted rows included, by id.
func gormRows(t *testing.T, db *gorm.DB, s *dao.Table[kindsRow]) []kindsRow {
	t.Helper()
	var out []kindsRow
	if err := db.Unscoped().Table(s.TableName()).Order("id").Find(&out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}

// The store reads every column kind of SQLite into the same values as
// GORM's scanner does, for full rows, rows that are NULL wherever the
// column allows, and rows NULL in every column but the key (also where
// the Go type cannot hold NULL, which reads as the zero value); the
// fast-path claim returns the same rows as the stored ones, times to the
// nanosecond.
func TestSQLiteScannerMatchesGORM(t *testing.T) {
	for _, strategy := range []dao.Strategy{dao.StrategyFastPath, dao.StrategyPortable} {
		t.Run(strategy.String(), func(t *testing.T) {
			ctx := context.Background()
			s, db := kindsStore(t, sqlstore.WithStrategy(strategy))
			at := time.Date(2031, 2, 3, 4, 5, 6, 123456789, time.UTC)
			rows := []*kindsRow{fullKindsRow(1, at), {ID: 2, Status: "pending"}, fullKindsRow(3, at.Add(time.Nanosecond))}
			if err := s.Create(ctx, rows...); err != nil {
				t.Fatal(err)
			}
			// Row 4 is NULL in every column but id and status, written
			// past the store.
			if err := db.Exec("INSERT INTO `" + s.TableName() + "` (id, status) VALUES (4, 'pending')").Error; err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, int64(1)); err != nil || kindsDiff(got, *rows[0]) != nil {
				t.Fatalf("Get(1): %v; fields differing from the row created: %v", err, kindsDiff(got, *rows[0]))
			}
			found, err := s.Find(ctx, dao.Query{OrderBy: []dao.Order{dao.Asc("id")}})
			if err != nil {
				t.Fatal(err)
			}
			want := gormRows(t, db, s)
			if len(found) != len(want) {
				t.Fatalf("Find read %d rows, GORM %d", len(found), len(want))
			}
			for i := range found {
				if d := kindsDiff(found[i], want[i]); d != nil {
					t.Fatalf("row %d: fields Find reads otherwise than GORM: %v", found[i].ID, d)
				}
			}
			if f := found[3]; f.KindsExtra == nil || f.Hint != nil || f.UIDP != nil || f.Flag || f.I8 != 0 || f.S != "" || f.Bytes != nil || !f.At.IsZero() || f.NS.Valid {
				t.Fatalf("row NULL in every column read as %+v", found[3])
			}
			claimed, err := s.Claim(ctx, dao.ClaimRequest{
				Where:   dao.Eq("status", "pending"),
				Set:     dao.Set{"status": "claimed", "s": "taken"},
				OrderBy: []dao.Order{dao.Desc("id")},
				Limit:   10,
			})
			if err != nil {
				t.Fatal(err)
			}
			after := gormRows(t, db, s)
			if len(claimed) != 4 {
				t.Fatalf("claimed %d rows, want 4", len(claimed))
			}
			for i, r := range claimed {
				// Descending id; the claim's Set is in the stored row.
				if d := kindsDiff(r, after[len(after)-1-i]); d != nil {
					t.Fatalf("row %d: fields the claim returned otherwise than the table holds: %v", r.ID, d)
				}
			}
			if !claimed[3].At.Equal(at) || claimed[3].At.Nanosecond() != 123456789 || claimed[1].At.Nanosecond() != 123456790 {
				t.Fatalf("times read back as %v and %v, want %v and 1 ns later", claimed[3].At, claimed[1].At, at)
			}
			// A soft-deleted row is read with its deletion time.
			if _, err := s.Update(ctx, dao.Eq("id", int64(1)), dao.Set{"deleted": at}); err != nil {
				t.Fatal(err)
			}
			del, err := s.Unscoped().Get(ctx, int64(1))
			if err != nil || !del.Deleted.Valid || !del.Deleted.Time.Equal(at) {
				t.Fatalf("soft-deleted row read as %+v, %v", del.Deleted, err)
			}
		})
	}
}

// kindsDiff returns the fields in which a and b differ (reflect.DeepEqual,
// through pointers, times as instants), with both values, or nil.
func kindsDiff(a, b kindsRow) []string {
	var out []string
	va, vb := reflect.ValueOf(utcTimes(a)), reflect.ValueOf(utcTimes(b))
	for i := range va.NumField() {
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if !reflect.DeepEqual(x, y) {
			out = append(out, fmt.Sprintf("%s: %s vs %s", va.Type().Field(i).Name, show(x), show(y)))
		}
	}
	return out
}

// utcTimes returns r with its times in UTC without a monotonic reading,
// so that equal instants compare equal with reflect.DeepEqual.
func utcTimes(r kindsRow) kindsRow {
	r.At, r.NT.Time, r.CreatedAt, r.Deleted.Time = r.At.UTC(), r.NT.Time.UTC(), r.CreatedAt.UTC(), r.Deleted.Time.UTC()
	if r.AtP != nil {
		r.AtP = new(r.AtP.UTC())
	}
	return r
}

// show formats v, and what v points to.
func show(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return fmt.Sprintf("&%+v", rv.Elem().Interface())
	}
	return fmt.Sprintf("%+v", v)
}

// textTimeRow reads a time column that the table declares TEXT: the
// driver returns its values as text.
type textTimeRow struct {
	ID int64 `gorm:"primaryKey"`
	At time.Time
	Pt *time.Time
}

// A time stored as text in a column declared TEXT reads into time.Time
// fields in each layout the scanner accepts; text in another form is an
// error, not a zero time.
func TestSQLiteScannerTextTimes(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t)
	table := testdb.Table(t, db, "text_times")
	if err := db.Exec("CREATE TABLE `" + table + "` (id integer PRIMARY KEY, at text, pt text)").Error; err != nil {
		t.Fatal(err)
	}
	s, err := sqlstore.New[textTimeRow](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2030, 1, 2, 3, 4, 5, 600000000, time.UTC)
	for i, text := range []string{"2030-01-02 03:04:05.6+00:00", "2030-01-02T03:04:05.6Z", "2030-01-02 03:04:05.600"} {
		if err := db.Exec("INSERT INTO `"+table+"` (id, at, pt) VALUES (?, ?, NULL)", i+1, text).Error; err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, int64(i+1))
		if err != nil || !got.At.Equal(want) || got.Pt != nil {
			t.Fatalf("text %q read as %+v, %v; want %v", text, got, err, want)
		}
	}
	if err := db.Exec("INSERT INTO `" + table + "` (id, at) VALUES (9, 'soon')").Error; err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, int64(9)); err == nil {
		t.Fatalf("text 'soon' read as %+v, want an error", got)
	}
}

// narrowRow reads an integer column into an int8 field.
type narrowRow struct {
	ID     int64 `gorm:"primaryKey"`
	Status string
	N      int8
}

// A stored value that does not fit the field is an error, from Find and
// from the fast-path claim, and the claim's error says nothing was
// returned; GORM's scanner refuses the value too.
func TestSQLiteScannerOutOfRange(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t)
	s, err := sqlstore.New[narrowRow](db, sqlstore.WithTable(testdb.Table(t, db, "narrow")), sqlstore.WithStrategy(dao.StrategyFastPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO `" + s.TableName() + "` (id, status, n) VALUES (1, 'pending', 300)").Error; err != nil {
		t.Fatal(err)
	}
	if got, err := s.Find(ctx, dao.Query{}); err == nil || !strings.Contains(err.Error(), "range") {
		t.Fatalf("Find = %+v, %v; want an out-of-range error", got, err)
	}
	var viaGORM []narrowRow
	if err := db.Table(s.TableName()).Find(&viaGORM).Error; err == nil {
		t.Fatalf("GORM read %+v; it refuses 300 in an int8 too", viaGORM)
	}
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "claimed"}, Limit: 1})
	if err == nil || got != nil {
		t.Fatalf("Claim = %+v, %v; want no rows and an error", got, err)
	}
}

// serialRow has a serializer field: the store scans it with ScanRows.
type serialRow struct {
	ID     int64 `gorm:"primaryKey"`
	Status string
	Tags   []string `gorm:"serializer:json"`
}

// A model with a serializer field is read through GORM's scanner, on the
// fast path too.
func TestSQLiteScannerSerializerFallback(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t)
	s, err := sqlstore.New[serialRow](db, sqlstore.WithTable(testdb.Table(t, db, "serial")), sqlstore.WithStrategy(dao.StrategyFastPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &serialRow{ID: 1, Status: "pending", Tags: []string{"a", "b"}}, &serialRow{ID: 2, Status: "pending"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "claimed"}, Limit: 5, OrderBy: []dao.Order{dao.Desc("id")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []serialRow{{ID: 2, Status: "claimed"}, {ID: 1, Status: "claimed", Tags: []string{"a", "b"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("claimed %+v, want %+v", got, want)
	}
}
