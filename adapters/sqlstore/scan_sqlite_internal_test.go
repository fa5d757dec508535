package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm/schema"
)

// oracle scans src into a fresh V with database/sql's own conversion
// (sql.Null[V].Scan runs it for a non-NULL value).
func oracle[V any](src any) (V, error) {
	var n sql.Null[V]
	err := n.Scan(src)
	return n.V, err
}

// checkConv compares the scanner's conversion into a V field with
// database/sql's for every value in srcs: the same value, or an error
// from both.
func checkConv[V any](t *testing.T, srcs []any) {
	t.Helper()
	typ := reflect.TypeFor[V]()
	conv := sqliteConvOf(typ)
	if conv == nil {
		t.Fatalf("no conversion for %s", typ)
	}
	for _, src := range srcs {
		want, werr := oracle[V](src)
		got := reflect.New(typ).Elem()
		gerr := conv(got, src)
		switch {
		case (werr == nil) != (gerr == nil):
			t.Errorf("%T %v into %s: error %v, database/sql: %v", src, src, typ, gerr, werr)
		case werr == nil && !reflect.DeepEqual(got.Interface(), want):
			t.Errorf("%T %v into %s: %#v, database/sql: %#v", src, src, typ, got.Interface(), want)
		}
	}
}

// The conversions of the SQLite scanner agree with database/sql's for
// every value type the SQLite driver returns, including values that do
// not fit and text that is not a number. (Text into time.Time, which
// database/sql refuses, is read by the scanner: see
// TestSQLiteScannerTextTimes.)
func TestSQLiteConversionsMatchDatabaseSQL(t *testing.T) {
	at := time.Date(2029, 12, 31, 23, 59, 58, 999999999, time.UTC)
	srcs := []any{
		int64(0), int64(1), int64(-1), int64(2), int64(127), int64(128), int64(-129), int64(255), int64(256),
		int64(65536), int64(math.MaxInt32) + 1, int64(math.MaxInt64), int64(math.MinInt64),
		0.0, 1.0, -2.0, 1.5, 0.1, 3e38, 1e300, -1e-300, math.MaxFloat64,
		"", "0", "1", "-1", "12", "300", "1.5", "1e3", "true", "false", "t", "abc", " 7",
		[]byte("7"), []byte("x"), []byte{}, []byte{0, 255},
		true, false, at,
	}
	checkConv[string](t, srcs)
	checkConv[[]byte](t, srcs)
	checkConv[bool](t, srcs)
	checkConv[int](t, srcs)
	checkConv[int8](t, srcs)
	checkConv[int16](t, srcs)
	checkConv[int32](t, srcs)
	checkConv[int64](t, srcs)
	checkConv[uint](t, srcs)
	checkConv[uint8](t, srcs)
	checkConv[uint16](t, srcs)
	checkConv[uint32](t, srcs)
	checkConv[uint64](t, srcs)
	checkConv[float32](t, srcs)
	checkConv[float64](t, srcs)
	checkConv[sql.NullString](t, srcs)
	checkConv[sql.NullInt64](t, srcs)
	var nonText []any
	for _, src := range srcs {
		switch src.(type) {
		case string, []byte:
		default:
			nonText = append(nonText, src)
		}
	}
	checkConv[time.Time](t, nonText)
}

// Named types, other composite types and fields reached through an
// embedded pointer take GORM's per-field scan; predeclared types,
// time.Time, []byte, scanners and pointers to them take a conversion.
func TestSQLiteConversionChoice(t *testing.T) {
	type named string
	for typ, want := range map[reflect.Type]bool{
		reflect.TypeFor[string]():          true,
		reflect.TypeFor[*string]():         true,
		reflect.TypeFor[uint16]():          true,
		reflect.TypeFor[time.Time]():       true,
		reflect.TypeFor[*time.Time]():      true,
		reflect.TypeFor[[]byte]():          true,
		reflect.TypeFor[sql.NullTime]():    true,
		reflect.TypeFor[*sql.NullString](): true,
		reflect.TypeFor[named]():           false,
		reflect.TypeFor[*named]():          false,
		reflect.TypeFor[[]string]():        false,
		reflect.TypeFor[map[string]int]():  false,
		reflect.TypeFor[struct{ A int }](): false,
	} {
		conv := sqliteConvFor(&schema.Field{FieldType: typ, StructField: reflect.StructField{Index: []int{0}}})
		if got := conv != nil; got != want {
			t.Errorf("%s: conversion %v, want %v", typ, got, want)
		}
	}
	type Embedded struct{ Note string }
	type behindPointer struct {
		ID int64
		*Embedded
	}
	bp, err := schema.Parse(&behindPointer{}, &sync.Map{}, schema.NamingStrategy{})
	if err != nil {
		t.Fatal(err)
	}
	if f := bp.LookUpField("note"); f == nil || sqliteConvFor(f) != nil {
		t.Errorf("string field behind an embedded pointer (%v): a conversion, want GORM's per-field scan", f)
	}
	// A pointer field gets a fresh value; NULL never reaches a conversion
	// (sqliteCell.Scan leaves the zero value).
	type row struct {
		ID int64
		P  *int16
	}
	sch, err := schema.Parse(&row{}, &sync.Map{}, schema.NamingStrategy{})
	if err != nil {
		t.Fatal(err)
	}
	var r row
	fp := sch.LookUpField("p")
	c := &sqliteCell{dst: fp.ReflectValueOf(context.Background(), reflect.ValueOf(&r).Elem()), conv: sqliteConvFor(fp)}
	if err := c.Scan(nil); err != nil || r.P != nil {
		t.Fatalf("NULL: %v, %v", r.P, err)
	}
	if err := c.Scan(int64(-5)); err != nil || r.P == nil || *r.P != -5 {
		t.Fatalf("-5: %v, %v", fmt.Sprint(r.P), err)
	}
	if err := c.Scan(int64(1 << 20)); err == nil {
		t.Fatalf("1<<20 into *int16: %v, want an error", *r.P)
	}
}
