package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Log is the SQL [driver.LogStore]: an ordered message log in three
// tables (see dialects.LogTablesOf: the message table, its _cursors and
// its _dead), on PostgreSQL and SQLite. Create it with [NewLog] and its
// tables with [Log.Migrate]. It is safe for concurrent use.
//
// On PostgreSQL a record's position is the writing transaction's id and
// an identity, and a read returns only records of transactions below the
// oldest running one, so a transaction that commits late is never
// skipped: it holds back the records written after it until it ends (see
// [driver.LogBatch.HeldBack]). On SQLite, which runs one writer at a
// time, the position is the row id. MySQL and MariaDB are refused: an
// AUTO_INCREMENT value follows insertion, not commit, and no statement
// can read the oldest running transaction, so a reader could skip a row
// that commits late.
type Log struct {
	db      *sql.DB
	r       dialects.Renderer
	dialect dialects.Name
	t       dialects.LogTables
	// noArrays is set when the driver refused an array as a bound value
	// (database/sql's "converting argument": a driver other than pgx's):
	// every later append binds one value per row and column.
	noArrays atomic.Bool
}

// appendChunk bounds the rows of one INSERT: 7 values each stay under
// every driver's limit of bound values. arrayAppendChunk bounds the rows
// of one array append (seven bound arrays, whatever the rows).
const (
	appendChunk      = 1000
	arrayAppendChunk = 10000
)

// NewLog returns the log store over the tables of base (see
// dialects.LogTablesOf; a dotted name is schema-qualified) on db's
// connection pool. Errors wrap [dao.ErrInvalidArgument] for a nil db, a
// db bound to a transaction, an empty or too long base (over 100 bytes)
// or a database that does not offer the log (MySQL, MariaDB, SQL
// Server); a failed detection query is mapped like every database error.
func NewLog(db *gorm.DB, base string) (*Log, error) {
	if db == nil {
		return nil, fmt.Errorf("claimstore: log: %w: nil *gorm.DB", dao.ErrInvalidArgument)
	}
	if base == "" || len(base) > 100 {
		return nil, fmt.Errorf("claimstore: log: %w: table name of %d bytes (1 to 100)", dao.ErrInvalidArgument, len(base))
	}
	sqlDB, name, err := ownPool(db, "log", "pass the transaction to Append")
	if err != nil {
		return nil, err
	}
	if !dialects.LogOffered(name) {
		return nil, fmt.Errorf("claimstore: log: %w: the ordered log is not offered on %s (no position that follows commit order)", dao.ErrInvalidArgument, name)
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		return nil, fmt.Errorf("claimstore: log: %w", err)
	}
	return &Log{db: sqlDB, r: r, dialect: name, t: dialects.LogTablesOf(base)}, nil
}

// As sets target, a **sql.DB, to the log's connection pool and reports
// true; it reports false, and leaves target alone, for any other target.
// The outbox's log readers use it to watch the pool's idle connections.
func (l *Log) As(target any) bool {
	if p, ok := target.(**sql.DB); ok && p != nil {
		*p = l.db
		return true
	}
	return false
}

// Tables returns the names of the log's three tables.
func (l *Log) Tables() dialects.LogTables { return l.t }

// Dialect returns the database's dialect.
func (l *Log) Dialect() dialects.Name { return l.dialect }

// Migrate creates the log's tables if they do not exist
// (dialects.Renderer.LogCreate). Several servers may migrate at once.
// Errors are mapped database errors.
func (l *Log) Migrate(ctx context.Context) error {
	sts, err := l.r.LogCreate(l.t)
	if err != nil {
		return fmt.Errorf("claimstore: log: migrate: %w", err)
	}
	for _, st := range sts {
		if _, err := l.db.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			// The loser of two concurrent CREATE TABLE IF NOT EXISTS on
			// PostgreSQL gets a unique violation on pg_type; run again.
			if _, err2 := l.db.ExecContext(ctx, st.SQL, st.Args...); err2 != nil {
				return fmt.Errorf("claimstore: log: migrate %s: %w", l.t.Log, mapCtxError(ctx, err))
			}
		}
	}
	return nil
}

// execer is what both *sql.DB, *sql.Tx and GORM's connection pools
// offer.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Append implements [driver.LogStore.Append], inside tx (a *gorm.DB in
// an open transaction) when it is not nil. On PostgreSQL through pgx it
// sends one INSERT per 10,000 records that binds one array per column
// (dialects.Renderer.LogAppendArrays); elsewhere, or when the driver
// refuses arrays (then for good), one multi-row INSERT per 1,000 records.
// Errors wrap [dao.ErrInvalidArgument] for a tx that is not a *gorm.DB or
// a record out of range (see [CheckLogRecord]); nothing is sent then.
func (l *Log) Append(ctx context.Context, tx any, recs []driver.LogRecord) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := CheckLogRecord(&recs[i]); err != nil {
			return fmt.Errorf("claimstore: log append: %w", err)
		}
	}
	var ex execer = l.db
	if tx != nil {
		g, ok := tx.(*gorm.DB)
		if !ok || g == nil {
			return fmt.Errorf("claimstore: log append: %w: tx is a %T, not a *gorm.DB", dao.ErrInvalidArgument, tx)
		}
		pool := connPool(g)
		e, ok := pool.(execer)
		if !ok {
			return fmt.Errorf("claimstore: log append: %w: the transaction's pool %T cannot run statements", dao.ErrInvalidArgument, pool)
		}
		ex = e
	}
	for start := 0; start < len(recs); {
		n, err := l.appendFirst(ctx, ex, recs[start:])
		if err != nil {
			return fmt.Errorf("claimstore: log append: %w", err)
		}
		start += n
	}
	return nil
}

// appendFirst writes the first records of recs in one INSERT, by arrays
// when the dialect and the driver allow, and returns how many it wrote.
// A refused array is caught by database/sql before anything is sent, so
// the transaction, if any, is untouched and the rows go by VALUES.
func (l *Log) appendFirst(ctx context.Context, ex execer, recs []driver.LogRecord) (int, error) {
	if !l.noArrays.Load() {
		chunk := recs[:min(arrayAppendChunk, len(recs))]
		st, ok, err := l.r.LogAppendArrays(l.t, chunk)
		if err != nil {
			return 0, err
		}
		if ok {
			_, err := ex.ExecContext(ctx, st.SQL, st.Args...)
			if err == nil {
				return len(chunk), nil
			}
			if !isArgConversion(err) {
				return 0, mapCtxError(ctx, err)
			}
			l.noArrays.Store(true)
		}
	}
	chunk := recs[:min(appendChunk, len(recs))]
	st, err := l.r.LogAppend(l.t, chunk)
	if err != nil {
		return 0, err
	}
	if _, err := ex.ExecContext(ctx, st.SQL, st.Args...); err != nil {
		return 0, mapCtxError(ctx, err)
	}
	return len(chunk), nil
}

// CheckLogRecord returns an error wrapping [dao.ErrInvalidArgument] when
// rec's partition is negative or over 2^31-1 (INTEGER), its message id or topic is empty, or a
// field is over its column's size (message id and key 191 bytes, topic
// 255).
func CheckLogRecord(rec *driver.LogRecord) error {
	switch {
	case rec.Partition < 0 || rec.Partition > math.MaxInt32:
		return fmt.Errorf("%w: partition %d (0 to %d, the partition column is INTEGER)", dao.ErrInvalidArgument, rec.Partition, math.MaxInt32)
	case rec.MessageID == "" || len(rec.MessageID) > 191:
		return fmt.Errorf("%w: message id of %d bytes (1 to 191)", dao.ErrInvalidArgument, len(rec.MessageID))
	case rec.Topic == "" || len(rec.Topic) > 255:
		return fmt.Errorf("%w: message %q: topic of %d bytes (1 to 255)", dao.ErrInvalidArgument, rec.MessageID, len(rec.Topic))
	case len(rec.Key) > 191:
		return fmt.Errorf("%w: message %q: key of %d bytes (at most 191)", dao.ErrInvalidArgument, rec.MessageID, len(rec.Key))
	}
	return nil
}

func nowUS() int64 { return time.Now().UnixMicro() }

// OpenCursor implements [driver.LogStore.OpenCursor] in one transaction:
// the cursor is created at the partition's retention mark unless it
// exists, fenced with term, and read back with the mark.
func (l *Log) OpenCursor(ctx context.Context, reader string, part int, term int64) (cur driver.LogCursor, err error) {
	get, err := l.r.LogGetCursors(l.t, reader, part)
	if err != nil {
		return driver.LogCursor{}, fmt.Errorf("claimstore: log open cursor: %w", err)
	}
	wrap := func(err error) error {
		return fmt.Errorf("claimstore: log open cursor %q/%d: %w", reader, part, err)
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return driver.LogCursor{}, wrap(mapCtxError(ctx, err))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	mine, mark, found, err := l.cursors(ctx, tx, get)
	if err != nil {
		return driver.LogCursor{}, wrap(mapCtxError(ctx, err))
	}
	if !found {
		st, err := l.r.LogOpenCursor(l.t, reader, part, mark, nowUS())
		if err != nil {
			return driver.LogCursor{}, wrap(err)
		}
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return driver.LogCursor{}, wrap(mapCtxError(ctx, err))
		}
	}
	fence, err := l.r.LogFence(l.t, reader, part, term)
	if err != nil {
		return driver.LogCursor{}, wrap(err)
	}
	res, err := tx.ExecContext(ctx, fence.SQL, fence.Args...)
	if err != nil {
		return driver.LogCursor{}, wrap(mapCtxError(ctx, err))
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return driver.LogCursor{}, wrap(fmt.Errorf("%w: term %d is below the cursor's (%v)", driver.ErrCursorFenced, term, err))
	}
	if mine, mark, found, err = l.cursors(ctx, tx, get); err != nil || !found {
		return driver.LogCursor{}, wrap(cmp.Or(mapCtxError(ctx, err), error(dao.ErrNotFound)))
	}
	if mine.Position.Less(mark) {
		return driver.LogCursor{}, wrap(fmt.Errorf("%w: cursor at %v, records deleted up to %v", driver.ErrCursorBehind, mine.Position, mark))
	}
	if err := tx.Commit(); err != nil {
		return driver.LogCursor{}, wrap(mapCtxError(ctx, err))
	}
	mine.Partition = part
	return mine, nil
}

// cursors reads a reader's cursor and its partition's retention mark.
func (l *Log) cursors(ctx context.Context, tx *sql.Tx, get dialects.Statement) (mine driver.LogCursor, mark driver.LogPosition, found bool, err error) {
	rows, err := tx.QueryContext(ctx, get.SQL, get.Args...)
	if err != nil {
		return mine, mark, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var c driver.LogCursor
		if err := rows.Scan(&c.Reader, &c.Position.Tx, &c.Position.Seq, &c.Term); err != nil {
			return mine, mark, false, err
		}
		if c.Reader == driver.LogRetentionReader {
			mark = c.Position
		} else {
			mine, found = c, true
		}
	}
	return mine, mark, found, rows.Err()
}

// Next implements [driver.LogStore.Next]: with a commit, one transaction
// runs the fenced advance (a compare-and-set on the cursor's position and
// term), the dead letters' inserts and the read; without, the read runs
// alone. When the batch is short, PostgreSQL also counts what the oldest
// running transaction holds back and checks the transaction counter
// against req.After ([driver.ErrLogRewound]).
func (l *Log) Next(ctx context.Context, req driver.LogNext) (batch driver.LogBatch, err error) {
	wrap := func(err error) error {
		return fmt.Errorf("claimstore: log next %q/%d: %w", req.Reader, req.Partition, err)
	}
	if req.Commit != nil && req.Commit.To != req.After {
		return batch, wrap(fmt.Errorf("%w: After %v is not the commit's end %v", dao.ErrInvalidArgument, req.After, req.Commit.To))
	}
	read, err := l.r.LogRead(l.t, req.Partition, req.After, req.Topic, req.Limit)
	if err != nil {
		return batch, wrap(err)
	}
	if err := driver.CheckLeaseID("log reader", req.Reader); err != nil {
		return batch, wrap(err)
	}
	var q interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	} = l.db
	var tx *sql.Tx
	if req.Commit != nil {
		if tx, err = l.db.BeginTx(ctx, nil); err != nil {
			return batch, wrap(mapCtxError(ctx, err))
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		if err := l.commit(ctx, tx, req); err != nil {
			return batch, wrap(err)
		}
		q = tx
	}
	rows, err := q.QueryContext(ctx, read.SQL, read.Args...)
	if err != nil {
		return batch, wrap(mapCtxError(ctx, err))
	}
	batch.Records, err = scanLogRecords(rows)
	if err != nil {
		return batch, wrap(mapCtxError(ctx, err))
	}
	if len(batch.Records) < req.Limit {
		hb, ok, err := l.r.LogHeldBack(l.t, req.Partition, req.After, req.Topic)
		if err != nil {
			return batch, wrap(err)
		}
		if ok {
			var oldest, horizon int64
			if err := q.QueryRowContext(ctx, hb.SQL, hb.Args...).Scan(&batch.HeldBack, &oldest, &horizon); err != nil {
				return batch, wrap(mapCtxError(ctx, err))
			}
			if oldest > 0 {
				batch.OldestHeld = time.UnixMicro(oldest).UTC()
			}
			if horizon <= req.After.Tx {
				// Every transaction at or below the cursor ended before
				// the cursor moved there, so the horizon can only be
				// above it, unless the counter went back.
				return driver.LogBatch{}, wrap(fmt.Errorf("%w: oldest running transaction %d, cursor at transaction %d", driver.ErrLogRewound, horizon, req.After.Tx))
			}
		}
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			return driver.LogBatch{}, wrap(mapCtxError(ctx, err))
		}
	}
	return batch, nil
}

// commit runs req.Commit's advance and dead letters in tx.
func (l *Log) commit(ctx context.Context, tx *sql.Tx, req driver.LogNext) error {
	c := req.Commit
	now := nowUS()
	adv, err := l.r.LogAdvance(l.t, req.Reader, req.Partition, req.Term, c.From, c.To, now)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, adv.SQL, adv.Args...)
	if err != nil {
		return mapCtxError(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return mapError(err)
	}
	if n != 1 {
		return fmt.Errorf("%w: the cursor is not at %v in term %d", driver.ErrCursorFenced, c.From, req.Term)
	}
	for _, d := range c.Dead {
		st, err := l.r.LogDead(l.t, req.Reader, d.Record, truncate(d.LastError, 2000), now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return mapCtxError(ctx, err)
		}
	}
	return nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// scanLogRecords reads the columns of dialects.Renderer.LogRead.
func scanLogRecords(rows *sql.Rows) ([]driver.LogRecord, error) {
	defer rows.Close()
	var out []driver.LogRecord
	for rows.Next() {
		var (
			rec     driver.LogRecord
			part    int64
			headers sql.NullString
			created int64
		)
		if err := rows.Scan(&part, &rec.Position.Tx, &rec.Position.Seq, &rec.MessageID, &rec.Topic, &rec.Key, &rec.Payload, &headers, &created); err != nil {
			return nil, err
		}
		rec.Partition = int(part)
		if headers.Valid {
			rec.Headers = []byte(headers.String)
		}
		rec.CreatedAt = time.UnixMicro(created).UTC()
		out = append(out, rec)
	}
	return out, rows.Err()
}

// Cursors implements [driver.LogStore.Cursors] with one SELECT.
func (l *Log) Cursors(ctx context.Context) ([]driver.LogCursor, error) {
	st, err := l.r.LogListCursors(l.t)
	if err != nil {
		return nil, fmt.Errorf("claimstore: log cursors: %w", err)
	}
	return listRows(ctx, l.db, st, "log cursors", func(rows *sql.Rows) (c driver.LogCursor, err error) {
		var part, updated int64
		err = rows.Scan(&c.Reader, &part, &c.Position.Tx, &c.Position.Seq, &c.Term, &updated)
		c.Partition, c.UpdatedAt = int(part), time.UnixMicro(updated).UTC()
		return c, err
	})
}

// Lag implements [driver.LogStore.Lag] with one SELECT, which reads at
// most limit entries of the log's key.
func (l *Log) Lag(ctx context.Context, part int, after driver.LogPosition, limit int) (driver.LogLag, error) {
	var lag driver.LogLag
	st, err := l.r.LogLag(l.t, part, after, limit)
	if err != nil {
		return lag, fmt.Errorf("claimstore: log lag: %w", err)
	}
	var oldest int64
	if err := l.db.QueryRowContext(ctx, st.SQL, st.Args...).Scan(&lag.Behind, &oldest); err != nil {
		return lag, fmt.Errorf("claimstore: log lag: %w", mapCtxError(ctx, err))
	}
	if lag.Behind > 0 {
		lag.Oldest = time.UnixMicro(oldest).UTC()
	}
	return lag, nil
}

// DeadLetters implements [driver.LogStore.DeadLetters] with one SELECT.
func (l *Log) DeadLetters(ctx context.Context, afterID int64, limit int) ([]driver.LogDeadLetter, error) {
	st, err := l.r.LogListDead(l.t, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("claimstore: log dead letters: %w", err)
	}
	return listRows(ctx, l.db, st, "log dead letters", func(rows *sql.Rows) (d driver.LogDeadLetter, err error) {
		var (
			part          int64
			headers       sql.NullString
			created, dead int64
		)
		rec := &d.Record
		err = rows.Scan(&d.ID, &d.Reader, &part, &rec.Position.Tx, &rec.Position.Seq, &rec.MessageID, &rec.Topic, &rec.Key,
			&rec.Payload, &headers, &created, &d.LastError, &dead)
		rec.Partition = int(part)
		if headers.Valid {
			rec.Headers = []byte(headers.String)
		}
		rec.CreatedAt, d.DeadAt = time.UnixMicro(created).UTC(), time.UnixMicro(dead).UTC()
		return d, err
	})
}

// listRows runs the SELECT st on db and returns one value per row, made by
// scan. Errors are wrapped with what: the query's and the rows' errors
// mapped with mapCtxError (a context's end says so), a scan's with
// mapError.
func listRows[T any](ctx context.Context, db *sql.DB, st dialects.Statement, what string, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, fmt.Errorf("claimstore: %s: %w", what, mapCtxError(ctx, err))
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("claimstore: %s: %w", what, mapError(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claimstore: %s: %w", what, mapCtxError(ctx, err))
	}
	return out, nil
}

// Trim implements [driver.LogStore.Trim]: one bounded DELETE … RETURNING
// and the move of the retention mark, in one transaction.
func (l *Log) Trim(ctx context.Context, part int, upTo driver.LogPosition, limit int) (n int64, err error) {
	st, err := l.r.LogTrim(l.t, part, upTo, limit)
	if err != nil {
		return 0, fmt.Errorf("claimstore: log trim: %w", err)
	}
	wrap := func(err error) error { return fmt.Errorf("claimstore: log trim partition %d: %w", part, err) }
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, wrap(mapCtxError(ctx, err))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, wrap(mapCtxError(ctx, err))
	}
	var last driver.LogPosition
	for rows.Next() {
		var p driver.LogPosition
		if err := rows.Scan(&p.Tx, &p.Seq); err != nil {
			rows.Close()
			return 0, wrap(mapError(err))
		}
		if last.Less(p) {
			last = p
		}
		n++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, wrap(mapCtxError(ctx, err))
	}
	if n > 0 {
		mark, err := l.r.LogMark(l.t, part, last, nowUS())
		if err != nil {
			return 0, wrap(err)
		}
		if _, err := tx.ExecContext(ctx, mark.SQL, mark.Args...); err != nil {
			return 0, wrap(mapCtxError(ctx, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, wrap(mapCtxError(ctx, err))
	}
	return n, nil
}

var _ driver.LogStore = (*Log)(nil)
