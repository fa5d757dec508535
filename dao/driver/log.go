package driver

import (
	"context"
	"errors"
	"time"
)

// LogPosition is a place in one partition of an ordered message log: the
// order of a record, compared as the pair (Tx, Seq). On PostgreSQL Tx is
// the id of the transaction that wrote the record and Seq an identity;
// on SQLite Tx is 0 and Seq the row id. The zero position is before
// every record.
type LogPosition struct {
	Tx, Seq int64
}

// Less reports whether p comes before q.
func (p LogPosition) Less(q LogPosition) bool {
	return p.Tx < q.Tx || (p.Tx == q.Tx && p.Seq < q.Seq)
}

// LogRecord is one message of an ordered log.
type LogRecord struct {
	// Position is the record's order in its partition, assigned by the
	// store when the record is appended (zero before).
	Position LogPosition
	// Partition is the partition the record belongs to, in [0, N) for a
	// log of N partitions.
	Partition int
	// MessageID is the message's idempotency key, handed to the broker's
	// de-duplication (at most 191 bytes).
	MessageID string
	// Topic is where the message goes (at most 255 bytes).
	Topic string
	// Key is the ordering key the partition was chosen from (at most 191
	// bytes, may be empty).
	Key string
	// Payload is the message body.
	Payload []byte
	// Headers are the message's headers, encoded by the caller (nil for
	// none).
	Headers []byte
	// CreatedAt is when the record was written, kept to the microsecond.
	CreatedAt time.Time
}

// LogLag is how far a reader is behind in one partition.
type LogLag struct {
	// Behind is the number of records after the reader's position,
	// counted up to the limit asked for: Behind equal to the limit
	// means at least that many.
	Behind int64
	// Oldest is the creation time of the oldest of them; zero when
	// Behind is 0.
	Oldest time.Time
}

// LogCursor is where one reader is in one partition.
type LogCursor struct {
	// Reader names the reader (a relay, a consumer group).
	Reader string
	// Partition is the partition the cursor reads.
	Partition int
	// Position is the last record the reader is done with.
	Position LogPosition
	// Term is the fencing term of the reader that holds the cursor: an
	// advance must name it.
	Term int64
	// UpdatedAt is when the cursor last moved or was created.
	UpdatedAt time.Time
}

// LogRetentionReader is the reader name of the retention marks in the
// cursor table: partition p's mark is the position up to which rows were
// deleted. It is not a valid reader name.
const LogRetentionReader = ""

// LogDeadLetter is a record a reader gave up on, with the error that made
// it give up.
type LogDeadLetter struct {
	// ID is the dead letter's key, growing in insertion order.
	ID int64
	// Reader is the reader that gave up on the record.
	Reader string
	// Record is the record as it was read.
	Record LogRecord
	// LastError is the last error of the record's publication.
	LastError string
	// DeadAt is when the record was moved to the dead letters.
	DeadAt time.Time
}

// LogCommit moves a reader's cursor over the batch it is done with.
type LogCommit struct {
	// From is the cursor's position before the batch, To the position of
	// the batch's last record done with.
	From, To LogPosition
	// Dead are records of the batch to keep as dead letters, written in
	// the same transaction as the advance.
	Dead []LogDeadLetter
}

// LogNext asks for the next batch of one partition.
type LogNext struct {
	// Reader names the reader; its cursor must have been opened with
	// [LogStore.OpenCursor].
	Reader string
	// Partition is the partition to read.
	Partition int
	// Term is the reader's fencing term.
	Term int64
	// After is the position after which to read; with Commit it must be
	// Commit.To.
	After LogPosition
	// Commit, when not nil, first advances the cursor from Commit.From to
	// Commit.To in the same transaction as the read.
	Commit *LogCommit
	// Topic, when not "", reads only records of that topic.
	Topic string
	// Limit is the most records to return; >= 1.
	Limit int
}

// LogBatch is what [LogStore.Next] read.
type LogBatch struct {
	// Records are the partition's next records in log order.
	Records []LogRecord
	// HeldBack is, when fewer than Limit records were read, the number of
	// committed records after the batch that cannot be read yet because
	// a transaction with a smaller id is still running (PostgreSQL; 0
	// elsewhere), and OldestHeld the creation time of the oldest of them.
	HeldBack   int64
	OldestHeld time.Time
}

// Errors of an ordered log.
var (
	// ErrCursorBehind: the reader's cursor points before rows that
	// retention already deleted; records were lost to this reader.
	ErrCursorBehind = errors.New("log cursor behind the oldest kept record")
	// ErrLogRewound: the database's transaction counter is below the
	// reader's cursor (a restored dump, a new cluster), so the reader
	// would never see a new record: it stops and says so rather than
	// wait in silence.
	ErrLogRewound = errors.New("log transaction counter below the reader's cursor")
	// ErrCursorFenced: the cursor is held by a later term, or was moved by
	// another reader; the caller no longer holds the partition.
	ErrCursorFenced = errors.New("log cursor fenced by another reader")
)

// LogStore keeps an ordered message log: an append-only message table
// written once per message, read per partition in commit order by readers
// that each keep a cursor, advanced once per batch. Implementations must
// be safe for concurrent use. sqlstore.NewLog implements it on PostgreSQL
// and SQLite.
type LogStore interface {
	// Append writes recs (their Position is ignored) inside tx, the
	// caller's open transaction (a *gorm.DB for the SQL store), or in a
	// transaction of its own when tx is nil. Errors wrap
	// [ErrInvalidArgument] for a record whose fields are out of range, or
	// the backend's failure.
	Append(ctx context.Context, tx any, recs []LogRecord) error

	// OpenCursor creates reader's cursor on partition part, if it does
	// not exist, at the partition's retention mark (so a new reader reads
	// every record kept), then fences it with term: it fails with
	// [ErrCursorFenced] when a later term holds the cursor. It returns
	// the cursor, or [ErrCursorBehind] when retention deleted records the
	// cursor has not read.
	OpenCursor(ctx context.Context, reader string, part int, term int64) (LogCursor, error)

	// Next commits req.Commit, if any, and reads the next batch, in one
	// transaction. A commit whose cursor is not at Commit.From in
	// req.Term fails with [ErrCursorFenced] and nothing is read.
	// [ErrLogRewound] reports a transaction counter below req.After.
	Next(ctx context.Context, req LogNext) (LogBatch, error)

	// Cursors lists every reader's cursor, and the retention marks under
	// [LogRetentionReader].
	Cursors(ctx context.Context) ([]LogCursor, error)

	// DeadLetters lists up to limit dead letters with an ID above
	// afterID, in ID order.
	DeadLetters(ctx context.Context, afterID int64, limit int) ([]LogDeadLetter, error)

	// Lag returns how far a reader at position after is behind in
	// partition part: the records after it, counted up to limit (>= 1),
	// held-back ones included, and the creation time of the oldest. A
	// limit below 1 or a negative part returns an error wrapping
	// dao.ErrInvalidArgument; otherwise errors come from the database.
	Lag(ctx context.Context, part int, after LogPosition, limit int) (LogLag, error)

	// Trim deletes up to limit records of partition part at or before
	// upTo, oldest first, and moves the partition's retention mark to the
	// last one deleted. It returns how many it deleted.
	Trim(ctx context.Context, part int, upTo LogPosition, limit int) (int64, error)
}
