package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

func logRecs(part int, prefix string, n int) []driver.LogRecord {
	out := make([]driver.LogRecord, n)
	for i := range out {
		out[i] = driver.LogRecord{Partition: part, MessageID: fmt.Sprintf("%s-%d", prefix, i), Topic: "t", Key: "k",
			Payload: []byte(prefix), Headers: []byte(`{"h":"v"}`), CreatedAt: time.Now()}
	}
	return out
}

func logIDs(recs []driver.LogRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.MessageID
	}
	return out
}

// TestLogStore appends in and out of a caller's transaction, reads a
// partition in order after a cursor, commits batches with the fenced
// advance, refuses a stale term, writes dead letters, trims behind a
// cursor and fails a reader behind the retention mark.
func TestLogStore(t *testing.T) {
	for _, b := range []testdb.Backend{{Name: "sqlite", Open: testdb.SQLite}, {Name: "postgres", Open: testdb.Postgres}} {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			l := sqlstoretest.Log(t, db)
			ctx := context.Background()
			// A rolled-back transaction leaves nothing; a committed one
			// writes its records.
			err := db.Transaction(func(tx *gorm.DB) error {
				if err := l.Append(ctx, tx, logRecs(1, "rolled", 2)); err != nil {
					return err
				}
				return errors.New("roll back")
			})
			if err == nil {
				t.Fatal("transaction did not fail")
			}
			if err := db.Transaction(func(tx *gorm.DB) error { return l.Append(ctx, tx, logRecs(1, "a", 3)) }); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(ctx, nil, logRecs(1, "b", 2)); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(ctx, nil, logRecs(2, "other", 1)); err != nil {
				t.Fatal(err)
			}
			cur, err := l.OpenCursor(ctx, "relay", 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Position != (driver.LogPosition{}) || cur.Term != 1 {
				t.Fatalf("new cursor = %+v, want the zero position in term 1", cur)
			}
			batch, err := nextN(t, l, driver.LogNext{Reader: "relay", Partition: 1, Term: 1, Limit: 4}, 4)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(logIDs(batch.Records)); got != "[a-0 a-1 a-2 b-0]" {
				t.Fatalf("first batch = %s", got)
			}
			r0 := batch.Records[0]
			if string(r0.Payload) != "a" || string(r0.Headers) != `{"h":"v"}` || r0.Topic != "t" || r0.Partition != 1 {
				t.Fatalf("record = %+v", r0)
			}
			end := batch.Records[3].Position
			// A later term fences the cursor: the old term's commit fails.
			if _, err := l.OpenCursor(ctx, "relay", 1, 2); err != nil {
				t.Fatal(err)
			}
			_, err = l.Next(ctx, driver.LogNext{Reader: "relay", Partition: 1, Term: 1, After: end,
				Commit: &driver.LogCommit{To: end}, Limit: 4})
			if !errors.Is(err, driver.ErrCursorFenced) {
				t.Fatalf("commit in a fenced term: err = %v, want ErrCursorFenced", err)
			}
			if _, err := l.OpenCursor(ctx, "relay", 1, 1); !errors.Is(err, driver.ErrCursorFenced) {
				t.Fatalf("open in an older term: err = %v, want ErrCursorFenced", err)
			}
			// The new term commits the batch with a dead letter and reads on.
			dead := driver.LogDeadLetter{Record: batch.Records[1], LastError: "refused"}
			batch, err = nextN(t, l, driver.LogNext{Reader: "relay", Partition: 1, Term: 2, After: end,
				Commit: &driver.LogCommit{To: end, Dead: []driver.LogDeadLetter{dead}}, Limit: 4}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(logIDs(batch.Records)); got != "[b-1]" {
				t.Fatalf("second batch = %s", got)
			}
			// A second commit from the same start is refused: no double advance.
			_, err = l.Next(ctx, driver.LogNext{Reader: "relay", Partition: 1, Term: 2, After: end,
				Commit: &driver.LogCommit{To: end}, Limit: 4})
			if !errors.Is(err, driver.ErrCursorFenced) {
				t.Fatalf("repeated commit: err = %v, want ErrCursorFenced", err)
			}
			dl, err := l.DeadLetters(ctx, 0, 10)
			if err != nil || len(dl) != 1 || dl[0].Record.MessageID != "a-1" || dl[0].LastError != "refused" || dl[0].Reader != "relay" {
				t.Fatalf("dead letters = %+v, %v", dl, err)
			}
			// Retention: trim up to the cursor in batches of 2.
			var trimmed int64
			for {
				n, err := l.Trim(ctx, 1, end, 2)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				trimmed += n
			}
			if trimmed != 4 {
				t.Fatalf("trimmed %d rows, want 4", trimmed)
			}
			// A new reader starts at the retention mark and reads what is kept.
			if _, err := l.OpenCursor(ctx, "late", 1, 1); err != nil {
				t.Fatal(err)
			}
			cs, err := l.Cursors(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]driver.LogPosition{}
			for _, c := range cs {
				got[fmt.Sprintf("%s/%d", c.Reader, c.Partition)] = c.Position
			}
			if got["/1"] != end || got["late/1"] != end || got["relay/1"] != end {
				t.Fatalf("cursors = %v, want the mark, late and relay at %v", got, end)
			}
			batch, err = nextN(t, l, driver.LogNext{Reader: "late", Partition: 1, Term: 1, After: end, Limit: 10}, 1)
			if err != nil || fmt.Sprint(logIDs(batch.Records)) != "[b-1]" {
				t.Fatalf("late reader's batch = %v, %v", logIDs(batch.Records), err)
			}
			// A reader whose cursor is before the mark fails loudly.
			if err := db.Exec("UPDATE "+quote(db, l.Tables().Cursors)+" SET tx = 0, seq = 0 WHERE reader = ?", "late").Error; err != nil {
				t.Fatal(err)
			}
			if _, err := l.OpenCursor(ctx, "late", 1, 2); !errors.Is(err, driver.ErrCursorBehind) {
				t.Fatalf("open behind retention: err = %v, want ErrCursorBehind", err)
			}
			// Bad input is refused before anything is sent.
			bad := logRecs(1, "x", 1)
			bad[0].Topic = ""
			if err := l.Append(ctx, nil, bad); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Fatalf("append with no topic: err = %v", err)
			}
			if err := l.Append(ctx, "not a tx", logRecs(1, "x", 1)); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Fatalf("append with a bad tx: err = %v", err)
			}
		})
	}
}

// TestLogLag counts the records behind a position, up to a limit, with
// the oldest one's time, per partition; on PostgreSQL the committed
// records held back behind an open transaction count, its own do not.
func TestLogLag(t *testing.T) {
	for _, b := range []testdb.Backend{{Name: "sqlite", Open: testdb.SQLite}, {Name: "postgres", Open: testdb.Postgres}} {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			l := sqlstoretest.Log(t, db)
			ctx := context.Background()
			recs := logRecs(0, "a", 5)
			t0 := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
			for i := range recs {
				recs[i].CreatedAt = t0.Add(time.Duration(i) * time.Second)
			}
			if err := l.Append(ctx, nil, recs); err != nil {
				t.Fatal(err)
			}
			lag, err := l.Lag(ctx, 0, driver.LogPosition{}, 100)
			if err != nil || lag.Behind != 5 || !lag.Oldest.Equal(t0) {
				t.Fatalf("from the start: %+v, %v; want 5 behind, oldest %v", lag, err, t0)
			}
			if lag, err = l.Lag(ctx, 0, driver.LogPosition{}, 3); err != nil || lag.Behind != 3 {
				t.Fatalf("limit 3: %+v, %v; want 3 behind", lag, err)
			}
			if _, err := l.OpenCursor(ctx, "r", 0, 1); err != nil {
				t.Fatal(err)
			}
			batch, err := nextN(t, l, driver.LogNext{Reader: "r", Partition: 0, Term: 1, Limit: 2}, 2)
			if err != nil {
				t.Fatal(err)
			}
			at := batch.Records[1].Position
			if lag, err = l.Lag(ctx, 0, at, 100); err != nil || lag.Behind != 3 || !lag.Oldest.Equal(t0.Add(2*time.Second)) {
				t.Fatalf("after two: %+v, %v; want 3 behind, oldest %v", lag, err, t0.Add(2*time.Second))
			}
			if lag, err = l.Lag(ctx, 1, driver.LogPosition{}, 100); err != nil || lag.Behind != 0 || !lag.Oldest.IsZero() {
				t.Fatalf("an empty partition: %+v, %v; want nothing behind", lag, err)
			}
			if _, err := l.Lag(ctx, 0, at, 0); !errors.Is(err, dao.ErrInvalidArgument) {
				t.Fatalf("limit 0: err = %v, want ErrInvalidArgument", err)
			}
			if b.Name != "postgres" {
				return
			}
			long := db.Begin()
			defer long.Rollback()
			if err := l.Append(ctx, long, logRecs(0, "open", 1)); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(ctx, nil, logRecs(0, "held", 2)); err != nil {
				t.Fatal(err)
			}
			if lag, err = l.Lag(ctx, 0, at, 100); err != nil || lag.Behind != 5 {
				t.Fatalf("with two records held back: %+v, %v; want 5 behind", lag, err)
			}
		})
	}
}

// nextN calls Next until it returns want records: another transaction of
// the server may hold records back for a moment (PostgreSQL). A commit
// is sent once.
func nextN(t *testing.T, l *sqlstore.Log, req driver.LogNext, want int) (driver.LogBatch, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		batch, err := l.Next(context.Background(), req)
		if err != nil || len(batch.Records) >= want || time.Now().After(deadline) {
			return batch, err
		}
		req.Commit = nil
		time.Sleep(20 * time.Millisecond)
	}
}

func quote(db *gorm.DB, name string) string {
	return db.Statement.Quote(name)
}

// TestLogHeldBack checks, on PostgreSQL, that a transaction still open
// holds back the records committed after it, which a read returns in
// transaction order once it commits: a late commit is never skipped.
func TestLogHeldBack(t *testing.T) {
	db := testdb.Postgres(t)
	l := sqlstoretest.Log(t, db)
	ctx := context.Background()
	if _, err := l.OpenCursor(ctx, "r", 0, 1); err != nil {
		t.Fatal(err)
	}
	long := db.Begin()
	if err := l.Append(ctx, long, logRecs(0, "early", 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, nil, logRecs(0, "late", 2)); err != nil {
		t.Fatal(err)
	}
	batch, err := l.Next(ctx, driver.LogNext{Reader: "r", Partition: 0, Term: 1, Limit: 10})
	if err != nil {
		long.Rollback()
		t.Fatal(err)
	}
	if len(batch.Records) != 0 || batch.HeldBack != 2 || batch.OldestHeld.IsZero() {
		long.Rollback()
		t.Fatalf("with an open transaction: batch %v, held back %d (oldest %v); want nothing read, 2 held back",
			logIDs(batch.Records), batch.HeldBack, batch.OldestHeld)
	}
	if err := long.Commit().Error; err != nil {
		t.Fatal(err)
	}
	batch, err = nextN(t, l, driver.LogNext{Reader: "r", Partition: 0, Term: 1, Limit: 10}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(logIDs(batch.Records)); got != "[early-0 late-0 late-1]" || batch.HeldBack != 0 {
		t.Fatalf("after the commit: %s, held back %d", got, batch.HeldBack)
	}
}

// TestLogRewound checks, on PostgreSQL, that a cursor ahead of the
// transaction counter (as after restoring a dump into a new cluster)
// makes the read fail with ErrLogRewound instead of returning nothing
// for ever.
func TestLogRewound(t *testing.T) {
	db := testdb.Postgres(t)
	l := sqlstoretest.Log(t, db)
	ctx := context.Background()
	if _, err := l.OpenCursor(ctx, "r", 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, nil, logRecs(0, "new", 1)); err != nil {
		t.Fatal(err)
	}
	ahead := driver.LogPosition{Tx: 1 << 40, Seq: 1}
	_, err := l.Next(ctx, driver.LogNext{Reader: "r", Partition: 0, Term: 1, After: ahead, Limit: 10})
	if !errors.Is(err, driver.ErrLogRewound) {
		t.Fatalf("cursor ahead of the counter: err = %v, want ErrLogRewound", err)
	}
}

// TestLogNotOffered checks that MySQL/MariaDB refuse the log.
func TestLogNotOffered(t *testing.T) {
	db := testdb.MySQL(t)
	if _, err := sqlstore.NewLog(db, "claimstore_log_x"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("NewLog on MySQL/MariaDB: err = %v, want ErrInvalidArgument", err)
	}
}
