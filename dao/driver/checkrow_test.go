package driver

import (
	"errors"
	"math"
	"testing"
	"time"
)

type checkAudit struct {
	By string
}

type checkMood string

// checkRowModel has columns of every check mode: plain integers and
// bools (never refused), plain and named strings, a pointer string, a
// time, a float, an unsigned integer, a string of an embedded struct and
// one of an embedded pointer struct.
type checkRowModel struct {
	ID    int64
	N     int32
	Flag  bool
	Name  string
	Mood  checkMood
	Note  *string
	At    time.Time
	Ratio float64
	Big   uint64
	Audit checkAudit `gorm:"embedded;embeddedPrefix:audit_"`
	*CheckOwner
}

type CheckOwner struct {
	Owner string
}

// CheckRow refuses a bad value in any column, whichever way it reads the
// column, and leaves the row unchanged: a nil embedded pointer struct
// stays nil.
func TestCheckRowRefusesBadValuesAndChangesNothing(t *testing.T) {
	m, err := NewModel[checkRowModel](nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := func() *checkRowModel {
		return &checkRowModel{ID: 1, N: math.MaxInt32, Flag: true, Name: "n", Mood: "calm", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Ratio: 1.5}
	}
	row := ok()
	if err := m.CheckRow(row); err != nil {
		t.Fatalf("a good row: %v", err)
	}
	if row.CheckOwner != nil {
		t.Fatal("CheckRow allocated the nil embedded struct")
	}
	bad := "a\x00b"
	notUTF8 := "\xff"
	cases := map[string]func(*checkRowModel){
		"name NUL":        func(r *checkRowModel) { r.Name = bad },
		"name not UTF-8":  func(r *checkRowModel) { r.Name = notUTF8 },
		"named string":    func(r *checkRowModel) { r.Mood = checkMood(bad) },
		"pointer string":  func(r *checkRowModel) { r.Note = &bad },
		"time too late":   func(r *checkRowModel) { r.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"float NaN":       func(r *checkRowModel) { r.Ratio = math.NaN() },
		"uint too big":    func(r *checkRowModel) { r.Big = math.MaxUint64 },
		"embedded string": func(r *checkRowModel) { r.Audit.By = notUTF8 },
		"embedded pointer string": func(r *checkRowModel) {
			r.CheckOwner = &CheckOwner{Owner: bad}
		},
	}
	for name, spoil := range cases {
		r := ok()
		spoil(r)
		if err := m.CheckRow(r); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: CheckRow = %v, want ErrInvalidArgument", name, err)
		}
	}
}
