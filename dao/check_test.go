package dao

import (
	"errors"
	"github.com/claimstore/claimstore/dao/driver"
	"gorm.io/gorm/schema"
	"math"
	"testing"
	"time"
)

type status string

type row struct {
	ID          int64
	Status      status
	Priority    int
	Score       float64
	Owner       *string
	LockedUntil *time.Time
	Attempts    uint
	Blob        []byte
	Flag        bool
	Note        string `gorm:"uniqueIndex"`
}

func model(t *testing.T) testModel[row] {
	t.Helper()
	m, err := newTestModel[row](nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewModelRejectsNonStruct(t *testing.T) {
	if _, err := newTestModel[int](nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewModel[int] error = %v, want ErrInvalidArgument", err)
	}
	type noKey struct{ Name string }
	if _, err := newTestModel[noKey](nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("model without primary key: error = %v, want ErrInvalidArgument", err)
	}
}

func TestModelSchema(t *testing.T) {
	m := model(t)
	if m.Table() != "rows" || m.PrimaryKey() != "id" {
		t.Fatalf("table %q pk %q", m.Table(), m.PrimaryKey())
	}
	want := []string{"id", "status", "priority", "score", "owner", "locked_until", "attempts", "blob", "flag", "note"}
	if got := m.Columns(); len(got) != len(want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	if keys := m.UniqueKeys(); len(keys) != 1 || len(keys[0]) != 1 || keys[0][0] != "note" {
		t.Fatalf("unique keys %v", keys)
	}
}

func TestCheckCriteriaRejectsBadInput(t *testing.T) {
	m := model(t)
	bad := map[string]Criteria{
		"unknown field":            Eq("nope", 1),
		"string column, int value": Eq("status", 3),
		"int column, string value": Lt("priority", "3"),
		"int column, float value":  Eq("priority", 1.5),
		"negative into unsigned":   Eq("attempts", -1),
		"nil value":                Eq("status", nil),
		"empty In":                 In("status"),
		"bad In element":           In("priority", 1, "two"),
		"empty Or":                 Or(),
		"unknown ref field":        LtField("attempts", "nope"),
		"incomparable fields":      LtField("status", "priority"),
		"unsupported type":         Eq("priority", struct{}{}),
		"nested unknown field":     And(Eq("status", "a"), Or(IsNull("ghost"), Eq("flag", true))),
		"time column, string":      Lt("locked_until", "2024-01-01"),
	}
	for name, c := range bad {
		if _, err := m.CheckCriteria(c); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v: error = %v, want ErrInvalidArgument", name, c, err)
		}
	}
}

func TestCheckCriteriaNormalizesValues(t *testing.T) {
	m := model(t)
	owner := "w1"
	c, err := m.CheckCriteria(And(
		Eq("status", status("pending")),
		In("priority", int8(1), uint16(2)),
		Ge("score", 2),
		Eq("owner", &owner),
		LtField("attempts", "priority"),
	))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Children()
	if v, ok := ch[0].Value().(string); !ok || v != "pending" {
		t.Errorf("named string not normalized: %#v", ch[0].Value())
	}
	if vs := ch[1].Values(); vs[0] != int64(1) || vs[1] != int64(2) {
		t.Errorf("In values not int64: %#v", vs)
	}
	if v := ch[2].Value(); v != float64(2) {
		t.Errorf("int into float column: %#v", v)
	}
	if v := ch[3].Value(); v != "w1" {
		t.Errorf("pointer not dereferenced: %#v", v)
	}
	if ch[4].RefField() != "priority" {
		t.Errorf("ref field lost: %v", ch[4])
	}
}

func TestAndOrSimplify(t *testing.T) {
	if !And().IsAll() || !And(Criteria{}, Criteria{}).IsAll() {
		t.Fatal("And of nothing must match all")
	}
	if c := And(Eq("a", 1)); c.Op() != OpEq {
		t.Fatalf("And of one = %v", c)
	}
	if !Or(Eq("a", 1), Criteria{}).IsAll() {
		t.Fatal("Or with a match-all operand must match all")
	}
}

func TestCheckSet(t *testing.T) {
	m := model(t)
	bad := map[string]Set{
		"empty":                  {},
		"primary key":            {"id": 5},
		"unknown":                {"nope": 1},
		"nil into non-nullable":  {"status": nil},
		"increment on string":    {"status": Incr(1)},
		"wrong type":             {"flag": "yes"},
		"wrong type beside Incr": {"priority": Incr(1), "note": 3},
	}
	for name, s := range bad {
		if _, err := m.CheckSet(s); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: error = %v, want ErrInvalidArgument", name, err)
		}
	}
	s, err := m.CheckSet(Set{"owner": nil, "status": status("x"), "attempts": Incr(2)})
	if err != nil {
		t.Fatal(err)
	}
	if s["owner"] != nil || s["status"] != "x" || s["attempts"] != Incr(2) {
		t.Fatalf("checked set %#v", s)
	}
	if got := driver.SetColumns(s); len(got) != 3 || got[0] != "attempts" || got[2] != "status" {
		t.Fatalf("SetColumns = %v", got)
	}
}

func TestCheckOrderAppendsPrimaryKey(t *testing.T) {
	m := model(t)
	o, err := m.CheckOrder([]Order{Desc("priority")})
	if err != nil {
		t.Fatal(err)
	}
	if len(o) != 2 || o[1] != Asc("id") {
		t.Fatalf("order %v", o)
	}
	o, _ = m.CheckOrder([]Order{Desc("id")})
	if len(o) != 1 {
		t.Fatalf("pk appended twice: %v", o)
	}
	if _, err := m.CheckOrder([]Order{Asc("ghost")}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown order field: %v", err)
	}
}

func TestApplyAndValue(t *testing.T) {
	m := model(t)
	owner := "old"
	r := row{ID: 7, Owner: &owner, Attempts: 3, Priority: 1}
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	set, err := m.CheckSet(Set{"owner": nil, "locked_until": until, "attempts": Incr(1), "status": "claimed", "priority": Incr(-2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(&r, set); err != nil {
		t.Fatal(err)
	}
	if r.Owner != nil || r.LockedUntil == nil || !r.LockedUntil.Equal(until) || r.Attempts != 4 || r.Status != "claimed" || r.Priority != -1 {
		t.Fatalf("after Apply: %+v", r)
	}
	if v, _ := m.Value(&r, "owner"); v != nil {
		t.Fatalf("NULL pointer reads as %#v", v)
	}
	if id := m.ID(&r); id != int64(7) {
		t.Fatalf("ID = %#v", id)
	}
}

func TestMatchSQLSemantics(t *testing.T) {
	m := model(t)
	owner := "w1"
	until := time.Now()
	withOwner := row{ID: 1, Status: "a", Priority: 2, Owner: &owner, LockedUntil: &until, Attempts: 1}
	noOwner := row{ID: 2, Status: "b", Priority: 5, Attempts: 5}
	cases := []struct {
		c        Criteria
		one, two bool
	}{
		{Criteria{}, true, true},
		{Eq("owner", "w1"), true, false},
		{Ne("owner", "w1"), false, false}, // NULL matches neither
		{Ne("owner", "w2"), true, false},
		{IsNull("owner"), false, true},
		{NotNull("owner"), true, false},
		{Lt("locked_until", until.Add(time.Second)), true, false},
		{In("status", "b", "c"), false, true},
		{Or(Eq("status", "a"), Gt("priority", 4)), true, true},
		{And(Eq("status", "a"), Gt("priority", 4)), false, false},
		{LtField("attempts", "priority"), true, false},
		{GeField("attempts", "priority"), false, true},
		{Le("score", 0), true, true},
	}
	for _, tc := range cases {
		c, err := m.CheckCriteria(tc.c)
		if err != nil {
			t.Fatalf("%v: %v", tc.c, err)
		}
		if got := m.Match(&withOwner, c); got != tc.one {
			t.Errorf("%v on row 1 = %v, want %v", tc.c, got, tc.one)
		}
		if got := m.Match(&noOwner, c); got != tc.two {
			t.Errorf("%v on row 2 = %v, want %v", tc.c, got, tc.two)
		}
	}
}

func TestLessNullsLastAscending(t *testing.T) {
	m := model(t)
	t1 := time.Unix(100, 0)
	a := row{ID: 1, LockedUntil: &t1}
	b := row{ID: 2}
	asc, _ := m.CheckOrder([]Order{Asc("locked_until")})
	desc, _ := m.CheckOrder([]Order{Desc("locked_until")})
	if !m.Less(&a, &b, asc) || m.Less(&b, &a, asc) {
		t.Fatal("ascending: NULL must sort last")
	}
	if !m.Less(&b, &a, desc) {
		t.Fatal("descending: NULL must sort first")
	}
	same := row{ID: 3, LockedUntil: &t1}
	if !m.Less(&a, &same, asc) {
		t.Fatal("ties must fall back to the primary key")
	}
}

func TestIsRetryable(t *testing.T) {
	for _, err := range []error{ErrBusy, ErrConflict, ErrUnavailable} {
		if !IsRetryable(errors.Join(errors.New("ctx"), err)) {
			t.Errorf("%v must be retryable", err)
		}
	}
	for _, err := range []error{nil, ErrDuplicate, ErrNotFound, ErrInvalidArgument, ErrInTransaction} {
		if IsRetryable(err) {
			t.Errorf("%v must not be retryable", err)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	if got := (RoundTrips{Fixed: 1, PerRow: 1}).For(100); got != 101 {
		t.Fatalf("For(100) = %d", got)
	}
	if s := (RoundTrips{Fixed: 1}).String(); s != "1" {
		t.Fatalf("String = %q", s)
	}
}

type sized struct {
	ID     int64
	Small  int8
	Medium int32
	Count  uint64
	Ratio  float32
	When   time.Time
	Name   string
	Raw    []byte
}

func TestValuesEveryBackendStores(t *testing.T) {
	m, err := newTestModel[sized](nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		col string
		v   any
	}{
		{"name", "a\x00b"},
		{"name", "\xff"},
		{"ratio", math.NaN()},
		{"ratio", math.Inf(-1)},
		{"ratio", 1e39},
		{"small", 128},
		{"small", -129},
		{"medium", int64(math.MaxInt32) + 1},
		{"count", uint64(math.MaxInt64) + 1},
		{"when", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"when", time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC)},
		{"when", time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC)},
	}
	for _, b := range bad {
		if _, err := m.CheckCriteria(Eq(b.col, b.v)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckCriteria(Eq(%s, %v)) error = %v, want ErrInvalidArgument", b.col, b.v, err)
		}
		if _, err := m.CheckSet(Set{b.col: b.v}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckSet(%s: %v) error = %v, want ErrInvalidArgument", b.col, b.v, err)
		}
	}
	good := []struct {
		col string
		v   any
	}{
		{"name", "é✓😀"},
		{"raw", []byte{0, 0xff}},
		{"ratio", math.MaxFloat32},
		{"small", -128},
		{"count", uint64(math.MaxInt64)},
		{"when", time.Time{}},
		{"when", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"when", time.Date(10000, 1, 1, 1, 59, 59, 0, time.FixedZone("UTC+2", 7200))},
	}
	for _, g := range good {
		if _, err := m.CheckCriteria(Eq(g.col, g.v)); err != nil {
			t.Errorf("CheckCriteria(Eq(%s, %v)): %v", g.col, g.v, err)
		}
	}
	rows := map[string]sized{
		"NUL":        {Name: "\x00"},
		"NaN":        {Ratio: float32(math.NaN())},
		"Inf":        {Ratio: float32(math.Inf(1))},
		"uint64":     {Count: math.MaxUint64},
		"year 10000": {When: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for name, r := range rows {
		if err := m.CheckRow(&r); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckRow(%s) error = %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := m.CheckRow(&sized{Name: "ok", Raw: []byte{0}}); err != nil {
		t.Errorf("CheckRow(zero row): %v", err)
	}
	if err := m.CheckRow(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CheckRow(nil) error = %v, want ErrInvalidArgument", err)
	}
}

// testModel is a parsed model with the checks of the portable layer, as
// the tests call them.
type testModel[T any] struct {
	*driver.Model[T]
	k checker[T]
}

func newTestModel[T any](namer schema.Namer) (testModel[T], error) {
	m, err := driver.NewModel[T](namer)
	if err != nil {
		return testModel[T]{}, err
	}
	return testModel[T]{m, checker[T]{m}}, nil
}

func (m testModel[T]) CheckCriteria(c Criteria) (Criteria, error) { return m.k.criteria(c) }
func (m testModel[T]) CheckSet(s Set) (Set, error)                { return m.k.set(s) }
func (m testModel[T]) CheckOrder(o []Order) ([]Order, error)      { return m.k.order(o) }
