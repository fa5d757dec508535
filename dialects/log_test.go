package dialects

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
)

// logGoldenCases are the log statements of every dialect, with
// representative and refused arguments; the dialects that do not offer
// the log record their refusal.
var logGoldenCases = func() []struct {
	name   string
	render func(Renderer) ([]Statement, error)
} {
	t := LogTablesOf("outbox_log")
	odd := LogTablesOf("app.lo\"`]g")
	at := driver.LogPosition{Tx: 7001, Seq: 42}
	to := driver.LogPosition{Tx: 7003, Seq: 57}
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	rec := driver.LogRecord{Position: at, Partition: 3, MessageID: "m-1", Topic: "orders", Key: "order-9",
		Payload: []byte("{}"), Headers: []byte(`{"a":"b"}`), CreatedAt: created}
	one := func(f func(Renderer) (Statement, error)) func(Renderer) ([]Statement, error) {
		return func(r Renderer) ([]Statement, error) {
			st, err := f(r)
			if err != nil {
				return nil, err
			}
			return []Statement{st}, nil
		}
	}
	return []struct {
		name   string
		render func(Renderer) ([]Statement, error)
	}{
		{"create", func(r Renderer) ([]Statement, error) { return r.LogCreate(t) }},
		{"create/qualified-odd-table", func(r Renderer) ([]Statement, error) { return r.LogCreate(odd) }},
		{"append", one(func(r Renderer) (Statement, error) {
			rec2 := rec
			rec2.MessageID, rec2.Headers, rec2.Payload = "m-2", nil, nil
			return r.LogAppend(t, []driver.LogRecord{rec, rec2})
		})},
		{"append-arrays", one(func(r Renderer) (Statement, error) {
			rec2 := rec
			rec2.MessageID, rec2.Headers, rec2.Payload = "m-2", nil, nil
			st, ok, err := r.LogAppendArrays(t, []driver.LogRecord{rec, rec2})
			if err == nil && !ok {
				return Statement{SQL: "(no array append)"}, nil
			}
			return st, err
		})},
		{"read", one(func(r Renderer) (Statement, error) { return r.LogRead(t, 3, at, "", 500) })},
		{"read/topic", one(func(r Renderer) (Statement, error) { return r.LogRead(t, 3, at, "orders", 500) })},
		{"held-back", one(func(r Renderer) (Statement, error) {
			st, ok, err := r.LogHeldBack(t, 3, at, "")
			if err == nil && !ok {
				return Statement{SQL: "(nothing is held back)"}, nil
			}
			return st, err
		})},
		{"lag", one(func(r Renderer) (Statement, error) { return r.LogLag(t, 3, at, 10000) })},
		{"refused/lag-zero-limit", one(func(r Renderer) (Statement, error) { return r.LogLag(t, 3, at, 0) })},
		{"open-cursor", one(func(r Renderer) (Statement, error) { return r.LogOpenCursor(t, "relay", 3, at, 1700000000000000) })},
		{"fence", one(func(r Renderer) (Statement, error) { return r.LogFence(t, "relay", 3, 9) })},
		{"get-cursors", one(func(r Renderer) (Statement, error) { return r.LogGetCursors(t, "relay", 3) })},
		{"advance", one(func(r Renderer) (Statement, error) { return r.LogAdvance(t, "relay", 3, 9, at, to, 1700000000000000) })},
		{"dead", one(func(r Renderer) (Statement, error) { return r.LogDead(t, "relay", rec, "refused", 1700000000000000) })},
		{"list-cursors", one(func(r Renderer) (Statement, error) { return r.LogListCursors(t) })},
		{"list-dead", one(func(r Renderer) (Statement, error) { return r.LogListDead(t, 10, 100) })},
		{"trim", one(func(r Renderer) (Statement, error) { return r.LogTrim(t, 3, to, 1000) })},
		{"mark", one(func(r Renderer) (Statement, error) { return r.LogMark(t, 3, to, 1700000000000000) })},
		{"refused/empty-table", func(r Renderer) ([]Statement, error) { return r.LogCreate(LogTables{Log: "x"}) }},
		{"refused/no-records", one(func(r Renderer) (Statement, error) { return r.LogAppend(t, nil) })},
		{"refused/array-append-partition-out-of-range", one(func(r Renderer) (Statement, error) {
			big := rec
			big.Partition = 1 << 31
			st, ok, err := r.LogAppendArrays(t, []driver.LogRecord{big})
			if err == nil && !ok {
				return Statement{SQL: "(no array append)"}, nil
			}
			return st, err
		})},
		{"refused/zero-limit", one(func(r Renderer) (Statement, error) { return r.LogRead(t, 3, at, "", 0) })},
		{"refused/negative-partition", one(func(r Renderer) (Statement, error) { return r.LogTrim(t, -1, to, 10) })},
		{"refused/empty-reader", one(func(r Renderer) (Statement, error) { return r.LogFence(t, "", 3, 1) })},
		{"refused/reader-too-long", one(func(r Renderer) (Statement, error) {
			return r.LogAdvance(t, strings.Repeat("r", 192), 3, 1, at, to, 0)
		})},
	}
}()

// TestGoldenLog compares the log statements of every dialect with
// testdata/<dialect>/log.golden; -update rewrites the files.
func TestGoldenLog(t *testing.T) {
	for _, n := range All() {
		path := filepath.Join("testdata", string(n), "log.golden")
		t.Run(string(n), func(t *testing.T) {
			r := mustRenderer(t, n)
			var b strings.Builder
			fmt.Fprintf(&b, "-- offered: %v\n\n", LogOffered(n))
			for _, c := range logGoldenCases {
				fmt.Fprintf(&b, "-- %s\n", c.name)
				sts, err := c.render(r)
				if err != nil {
					if !errors.Is(err, dao.ErrInvalidArgument) {
						t.Errorf("%s: error %v does not wrap ErrInvalidArgument", c.name, err)
					}
					fmt.Fprintf(&b, "-- error: %v\n\n", err)
					continue
				}
				for _, st := range sts {
					fmt.Fprintf(&b, "%s\n-- args: %s\n", st.SQL, formatArgs(st.Args))
				}
				b.WriteString("\n")
			}
			checkGolden(t, path, b.String())
		})
	}
}

// TestLogOffered checks which dialects offer the log: PostgreSQL and
// SQLite, not MySQL or MariaDB (no commit-ordered position).
func TestLogOffered(t *testing.T) {
	for _, n := range All() {
		want := n == Postgres || n == SQLite
		if LogOffered(n) != want {
			t.Errorf("LogOffered(%s) = %v, want %v", n, !want, want)
		}
	}
	var r Renderer
	if _, err := r.LogListCursors(LogTablesOf("x")); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("zero Renderer: err = %v, want ErrInvalidArgument", err)
	}
}
