package sqlstore_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao/driver"
)

// TestPostgresLogAppendByArrays appends the same records, with NULL and
// empty payloads and headers, through pgx (one INSERT by arrays) and
// through a driver that refuses arrays (in a transaction: the refused
// array leaves it usable and the rows go by VALUES), and reads back the
// same records in the same order from both logs.
func TestPostgresLogAppendByArrays(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	recs := []driver.LogRecord{
		{Partition: 0, MessageID: "m-1", Topic: "orders", Key: "k-1", Payload: []byte(`{"a":1}`), Headers: []byte(`{"h":"v"}`), CreatedAt: created},
		{Partition: 0, MessageID: "m-2", Topic: "orders", Key: "", Payload: nil, Headers: nil, CreatedAt: created.Add(time.Microsecond)},
		{Partition: 0, MessageID: "m-3", Topic: "refunds", Key: "k-é", Payload: []byte{}, Headers: []byte(`{}`), CreatedAt: created},
	}
	read := func(l *sqlstore.Log) []driver.LogRecord {
		t.Helper()
		if _, err := l.OpenCursor(ctx, "check", 0, 1); err != nil {
			t.Fatal(err)
		}
		batch, err := nextN(t, l, driver.LogNext{Reader: "check", Partition: 0, Term: 1, Limit: 10}, len(recs))
		if err != nil {
			t.Fatal(err)
		}
		out := batch.Records
		for i := range out {
			out[i].Position = driver.LogPosition{}
		}
		return out
	}
	var fast, strictLog statementLog
	fastDB := openArrays(t, &fast, false, time.Now())
	l := sqlstoretest.Log(t, fastDB)
	fast.inserts()
	if err := l.Append(ctx, nil, recs); err != nil {
		t.Fatal(err)
	}
	if arrays, other := fast.inserts(); arrays != 1 || other != 0 {
		t.Errorf("pgx: %d array INSERTs and %d others, want 1 and 0", arrays, other)
	}
	byArrays := read(l)

	strictDB := openArrays(t, &strictLog, true, time.Now())
	ls, err := sqlstore.NewLog(strictDB, l.Tables().Log+"_v")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tb := ls.Tables()
		for _, name := range []string{tb.Log, tb.Cursors, tb.Dead} {
			if err := fastDB.Exec("DROP TABLE IF EXISTS " + quote(fastDB, name)).Error; err != nil {
				t.Error(err)
			}
		}
	})
	if err := ls.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second append no longer tries arrays
		strictLog.inserts()
		if err := strictDB.Transaction(func(tx *gorm.DB) error { return ls.Append(ctx, tx, recs[:1]) }); err != nil {
			t.Fatal(err)
		}
		if arrays, other := strictLog.inserts(); arrays != 0 || other != 1 {
			t.Errorf("driver refusing arrays: %d array INSERTs and %d others, want 0 and 1", arrays, other)
		}
	}
	if err := ls.Append(ctx, nil, recs[1:]); err != nil {
		t.Fatal(err)
	}
	byValues := read(ls)
	byValues = append(byValues[:1], byValues[2:]...) // the second append's copy of m-1
	if !reflect.DeepEqual(byArrays, byValues) {
		t.Errorf("by arrays:\n%s\nby values:\n%s", dump(byArrays), dump(byValues))
	}
	if byArrays[1].Payload != nil || byArrays[1].Headers != nil || byArrays[2].Payload == nil || len(byArrays[2].Payload) != 0 {
		t.Errorf("NULL and empty payloads not kept apart: %s", dump(byArrays))
	}
	if len(byArrays) != 3 || byArrays[0].MessageID != "m-1" || !byArrays[0].CreatedAt.Equal(created) || byArrays[2].Key != "k-é" {
		t.Errorf("read back %s", dump(byArrays))
	}
}

func dump(recs []driver.LogRecord) string {
	s := ""
	for _, r := range recs {
		s += fmt.Sprintf("  %+v payload-nil=%v headers=%q\n", r, r.Payload == nil, r.Headers)
	}
	return s
}
