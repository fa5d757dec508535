package driver_test

import (
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao/driver"
)

// status is a typed string enum with a Valuer, as models declare them.
type status string

func (s status) Value() (sqldriver.Value, error) { return string(s), nil }

func (s *status) Scan(v any) error {
	switch x := v.(type) {
	case string:
		*s = status(x)
	case []byte:
		*s = status(x)
	default:
		return fmt.Errorf("scan %T into status", v)
	}
	return nil
}

// level is a typed integer enum with a Valuer.
type level int8

func (l level) Value() (sqldriver.Value, error) { return int64(l), nil }

// money is a decimal type stored as its text, as decimal libraries do.
type money struct{ units, cents int64 }

func (m money) Value() (sqldriver.Value, error) { return fmt.Sprintf("%d.%02d", m.units, m.cents), nil }

func (m *money) Scan(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("scan %T into money", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	m.units, m.cents = int64(f), int64(f*100)%100
	return err
}

type embedded struct {
	By   string
	Note string
}

// kinds is a model with one column of every classified shape.
type kinds struct {
	ID         int64
	Plain      string
	Varchar    string  `gorm:"type:varchar(64)"`
	Char       string  `gorm:"type:char(8)"`
	Text       string  `gorm:"type:TEXT"`
	NVarchar   string  `gorm:"type:nvarchar(32)"`
	Small      int16   `gorm:"type:smallint"`
	Big        int64   `gorm:"type:bigint"`
	Tiny       bool    `gorm:"type:tinyint(1)"`
	Unsigned   uint32  `gorm:"type:int unsigned"`
	Float      float64 `gorm:"type:double precision"`
	Status     status  `gorm:"type:varchar(16)"`
	StatusPtr  *status
	Level      level `gorm:"type:smallint"`
	UUID       uuid.UUID
	UUIDPtr    *uuid.UUID
	UUIDCol    uuid.UUID `gorm:"type:uuid"`
	UUIDText   string    `gorm:"type:uuid"`
	NullString sql.NullString
	NullInt    sql.NullInt64
	NullTime   sql.NullTime
	At         time.Time `gorm:"type:timestamptz"`
	AtPtr      *time.Time
	Deleted    gorm.DeletedAt
	Blob       []byte
	Labels     []string          `gorm:"serializer:json;type:text"`
	Meta       map[string]string `gorm:"serializer:json"`
	Doc        string            `gorm:"type:jsonb"`
	DocJSON    []byte            `gorm:"type:json"`
	Price      money             `gorm:"type:numeric(12,2)"`
	Amount     money
	Ratio      float64   `gorm:"type:decimal(10,4)"`
	IntAsText  int       `gorm:"type:varchar(10)"`
	TimeAsInt  time.Time `gorm:"type:bigint"`
	Audit      embedded  `gorm:"embedded;embeddedPrefix:audit_"`
}

func TestKindOf(t *testing.T) {
	m, err := driver.NewModel[kinds](nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		column string
		want   driver.Kind
	}{
		{"id", driver.KindInt},
		{"plain", driver.KindString},
		{"varchar", driver.KindString},
		{"char", driver.KindString},
		{"text", driver.KindString},
		{"n_varchar", driver.KindString},
		{"small", driver.KindInt},
		{"big", driver.KindInt},
		{"tiny", driver.KindBool},
		{"unsigned", driver.KindUint},
		{"float", driver.KindFloat},
		{"status", driver.KindString},
		{"status_ptr", driver.KindString},
		{"level", driver.KindInt},
		{"uuid", driver.KindString},
		{"uuid_ptr", driver.KindString},
		{"uuid_col", driver.KindUUID},
		{"uuid_text", driver.KindUUID},
		{"null_string", driver.KindString},
		{"null_int", driver.KindInt},
		{"null_time", driver.KindTime},
		{"at", driver.KindTime},
		{"at_ptr", driver.KindTime},
		{"deleted", driver.KindTime},
		{"blob", driver.KindBytes},
		{"labels", driver.KindOther},
		{"meta", driver.KindOther},
		{"doc", driver.KindOther},
		{"doc_json", driver.KindOther},
		{"price", driver.KindOther},
		{"amount", driver.KindOther},
		{"ratio", driver.KindOther},
		{"int_as_text", driver.KindOther},
		{"time_as_int", driver.KindOther},
		{"audit_by", driver.KindString},
		{"audit_note", driver.KindString},
	} {
		f, err := m.Field(tc.column)
		if err != nil {
			t.Errorf("%s: %v", tc.column, err)
			continue
		}
		if got := m.KindOf(f); got != tc.want {
			t.Errorf("kind of %s (%s, tag type %q) = %v, want %v", tc.column, f.FieldType, f.TagSettings["TYPE"], got, tc.want)
		}
		if got := driver.KindOf(f); got != tc.want {
			t.Errorf("driver.KindOf(%s) = %v, want %v", tc.column, got, tc.want)
		}
	}
}

// TestNormalizeFieldTypes gives criteria values in the field's own Go
// type and in plain form, and checks the one plain value each becomes.
func TestNormalizeFieldTypes(t *testing.T) {
	m, err := driver.NewModel[kinds](nil)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse("0190f3c4-7b1e-7cc2-9a5b-3d4e5f607182")
	st := status("queued")
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tc := range []struct {
		column string
		in     any
		want   any
	}{
		{"status", st, "queued"},
		{"status", "queued", "queued"},
		{"status", &st, "queued"},
		{"status_ptr", st, "queued"},
		{"level", level(3), int64(3)},
		{"level", 3, int64(3)},
		{"small", int16(-2), int64(-2)},
		{"varchar", "x", "x"},
		{"uuid", id, id.String()},
		{"uuid", &id, id.String()},
		{"uuid", id.String(), id.String()},
		{"uuid", "0190F3C4-7B1E-7CC2-9A5B-3D4E5F607182", id.String()},
		{"uuid_col", id, id.String()},
		{"uuid_text", "{0190F3C4-7B1E-7CC2-9A5B-3D4E5F607182}", id.String()},
		{"null_string", sql.NullString{String: "a", Valid: true}, "a"},
		{"null_string", "a", "a"},
		{"null_int", sql.NullInt64{Int64: 4, Valid: true}, int64(4)},
		{"null_time", sql.NullTime{Time: when, Valid: true}, when},
		{"deleted", gorm.DeletedAt{Time: when, Valid: true}, when},
		{"at", when, when},
	} {
		f, _ := m.Field(tc.column)
		got, err := m.Normalize(f, tc.in, false)
		if err != nil || got != tc.want {
			t.Errorf("Normalize(%s, %T %v) = %T %v, %v; want %T %v", tc.column, tc.in, tc.in, got, got, err, tc.want, tc.want)
		}
	}
	for _, tc := range []struct {
		column string
		in     any
	}{
		{"uuid", "not-a-uuid"},
		{"uuid_col", "0190f3c4"},
		{"uuid_text", 42},
		{"status", 7},
		{"labels", []string{"a"}},
		{"doc", "{}"},
		{"price", money{1, 2}},
		{"amount", "1.20"},
		{"ratio", 1.5},
		{"int_as_text", 3},
	} {
		f, _ := m.Field(tc.column)
		if got, err := m.Normalize(f, tc.in, false); !errors.Is(err, driver.ErrInvalidArgument) {
			t.Errorf("Normalize(%s, %T %v) = %v, %v; want ErrInvalidArgument", tc.column, tc.in, tc.in, got, err)
		}
	}
}

// TestApplyFieldTypes writes normalized values back into fields of their
// own Go type, as the memory store's claim returns post-claim rows.
func TestApplyFieldTypes(t *testing.T) {
	m, err := driver.NewModel[kinds](nil)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse("0190f3c4-7b1e-7cc2-9a5b-3d4e5f607182")
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	set := driver.Set{}
	for col, v := range map[string]any{
		"status": status("running"), "status_ptr": "done", "level": level(2), "uuid": id, "uuid_ptr": id,
		"uuid_col": id.String(), "uuid_text": id, "null_string": "s", "null_int": 9, "null_time": when,
		"deleted": when, "small": int16(5), "audit_by": "me",
	} {
		f, _ := m.Field(col)
		p, err := m.Normalize(f, v, true)
		if err != nil {
			t.Fatalf("Normalize(%s, %v): %v", col, v, err)
		}
		set[col] = p
	}
	var row kinds
	if err := m.Apply(&row, set); err != nil {
		t.Fatal(err)
	}
	if row.Status != "running" || row.StatusPtr == nil || *row.StatusPtr != "done" || row.Level != 2 ||
		row.UUID != id || row.UUIDPtr == nil || *row.UUIDPtr != id || row.UUIDCol != id || row.UUIDText != id.String() ||
		row.NullString != (sql.NullString{String: "s", Valid: true}) || row.NullInt != (sql.NullInt64{Int64: 9, Valid: true}) ||
		!row.NullTime.Time.Equal(when) || !row.Deleted.Valid || row.Small != 5 || row.Audit.By != "me" {
		t.Errorf("row after Apply = %+v", row)
	}
	for col, want := range map[string]any{"uuid": id.String(), "uuid_col": id.String(), "status": "running", "level": int64(2)} {
		if got, _ := m.Value(&row, col); got != want {
			t.Errorf("Value(%s) = %T %v, want %T %v", col, got, got, want, want)
		}
	}
}
