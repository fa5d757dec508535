package watermill

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
)

// pgFanOut is the fan-out of a subscriber on PostgreSQL 11 or later: one
// statement claims a batch of messages from the message table and marks
// them published, reads the consumer groups of their topics, writes the
// deliveries that do not exist yet, and inserts those of the subscription's
// own group and topic already claimed by it, with its lease, returning
// them. Against the portable fan-out (claim, read groups, insert, mark,
// then claim the deliveries) it saves a row write per message in each
// table, and the deliveries and the mark commit together.
//
// Groups are read in the statement's snapshot, the one its claim sees, so
// the rule of [Subscriber.register] holds: a group committed before the
// statement gets its deliveries here, a group committed after it copies
// the messages itself (they were committed before the statement began).
//
// Sources: PostgreSQL manual, "WITH Queries (Common Table Expressions)",
// section 7.8.4 (data-modifying statements in WITH run exactly once and
// see one snapshot), "SELECT", The Locking Clause (SKIP LOCKED), and
// "INSERT", ON CONFLICT Clause; sha256() from "Binary String Functions
// and Operators" (PostgreSQL 11 and later).
type pgFanOut struct {
	db   *sql.DB
	stmt string

	mu    sync.Mutex
	known bool // ok is the server's answer
	ok    bool // the server runs the statement
}

// newPGFanOut returns the fan-out statement of t for db, or nil when db
// is not PostgreSQL or has no database/sql pool of its own (a
// transaction); such a subscriber fans out portably.
func newPGFanOut(db *gorm.DB, t Tables) *pgFanOut {
	if db.Dialector.Name() != "postgres" {
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil
	}
	q := func(name string) string {
		var b strings.Builder
		db.Dialector.QuoteTo(&b, name)
		return b.String()
	}
	return &pgFanOut{db: sqlDB, stmt: fmt.Sprintf(pgFanOutSQL, q(t.Messages), q(t.Groups), q(t.Deliveries))}
}

// pgFanOutSQL is the fan-out statement; %[1]s is the message table, %[2]s
// the groups table, %[3]s the delivery table. Parameters: $1 target
// broker, $2 the most messages to claim, $3 worker, $4 own consumer group,
// $5 own topic, $6 the most deliveries to insert claimed, $7 lease in
// microseconds, $8 max retries of a delivery, $9 the deliveries the
// worker's handler acked, as the text of a bigint array ('{}' for none).
//
// The acked deliveries are marked published as [outbox.Repository.MarkPublished]
// marks them, fenced the same way (still processing and locked by $3), so
// a batch's acks commit with the next fan-out instead of in a commit of
// their own.
//
// The claim's WHERE and ORDER BY are the outbox claim's (pending, failed
// and due, or processing with an ended lease; priority, then oldest), on
// the message table's claim index. The delivery key is [DeliveryKey]
// computed by the server. Deliveries are inserted in claim order, and the
// first $6 of the own group and topic are inserted processing, locked by
// $3 until now + $7; the rest pending, as [outbox.Repository.Add] writes
// them. ON CONFLICT skips a delivery a group's backfill wrote first.
//
// The one result row per own delivery carries the counts of messages
// claimed and of deliveries acked; when there is no own delivery, one row
// carries them with NULLs.
const pgFanOutSQL = `WITH a AS (
	UPDATE %[3]s
	SET status = 'published', published_at = now(), locked_until = NULL, last_processed_at = now()
	WHERE id = ANY($9::bigint[]) AND status = 'processing' AND locked_by = $3
	RETURNING id
), m AS (
	UPDATE %[1]s AS t
	SET status = 'published', published_at = now(), locked_until = NULL, locked_by = $3, last_processed_at = now()
	WHERE t.id IN (
		SELECT id FROM %[1]s
		WHERE target_broker = $1 AND published_at IS NULL
			AND (status = 'pending' OR (status = 'failed' AND next_retry_at <= now()) OR (status = 'processing' AND locked_until < now()))
		ORDER BY priority DESC, created_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED)
	RETURNING t.id, t.message_id, t.topic, t.type, t.payload, t.headers, t.priority, t.created_at, t.correlation_id, t.causation_id
), c AS (
	SELECT m.*, g.consumer_group,
		'd:' || left(encode(sha256(convert_to(g.consumer_group, 'UTF8') || decode('00', 'hex') || convert_to(m.topic, 'UTF8')), 'hex'), 40) AS delivery_key,
		CASE WHEN g.consumer_group = $4 AND m.topic = $5
			THEN row_number() OVER (PARTITION BY g.consumer_group = $4 AND m.topic = $5 ORDER BY m.priority DESC, m.created_at, m.id) <= $6
			ELSE false END AS own
	FROM m JOIN %[2]s AS g ON g.topic = m.topic
), ins AS (
	INSERT INTO %[3]s (message_id, topic, type, payload, headers, target_broker, partition_key, priority, status,
		retry_count, max_retries, next_retry_at, locked_by, locked_until, last_error, created_at, published_at,
		last_processed_at, correlation_id, causation_id)
	SELECT message_id, topic, type, payload, headers, delivery_key, consumer_group, priority,
		CASE WHEN own THEN 'processing' ELSE 'pending' END,
		0, $8, NULL, CASE WHEN own THEN $3 ELSE '' END,
		CASE WHEN own THEN now() + $7 * interval '1 microsecond' END, '', created_at, NULL,
		CASE WHEN own THEN now() END, correlation_id, causation_id
	FROM c
	ORDER BY priority DESC, created_at, id
	ON CONFLICT (message_id, target_broker) DO NOTHING
	RETURNING id, message_id, topic, type, payload, headers, target_broker, partition_key, priority, max_retries,
		locked_until, created_at, last_processed_at, correlation_id, causation_id, status
)
SELECT n.claimed, n.acked, i.id, i.message_id, i.topic, i.type, i.payload, i.headers, i.target_broker, i.partition_key,
	i.priority, i.max_retries, i.locked_until, i.created_at, i.last_processed_at, i.correlation_id, i.causation_id
FROM (SELECT (SELECT count(*) FROM m) AS claimed, (SELECT count(*) FROM a) AS acked) AS n
LEFT JOIN ins AS i ON i.status = 'processing'
ORDER BY i.priority DESC, i.created_at, i.id`

// usable reports whether the server runs the statement: PostgreSQL 11 or
// later (sha256), and not CockroachDB, which speaks the protocol with
// other functions. The answer is asked once and kept; an error asking is
// returned, and the next call asks again.
func (f *pgFanOut) usable(ctx context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known {
		return f.ok, nil
	}
	var num int
	var version string
	err := f.db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int, version()`).Scan(&num, &version)
	if err != nil {
		return false, fmt.Errorf("read the server version: %w", sqlstore.MapError(err))
	}
	f.known, f.ok = true, num >= 110000 && !strings.Contains(version, "CockroachDB")
	return f.ok, nil
}

// fanOutRun is what one run of the fan-out statement did.
type fanOutRun struct {
	claimed int              // messages claimed and marked
	acked   int              // acked deliveries marked published
	mine    []outbox.Message // deliveries inserted claimed by the worker, in claim order
}

// run marks the deliveries acked by worker published, claims up to limit
// messages of broker, fans them out, and returns what it did, with the
// deliveries of group on topic it inserted claimed by worker (at most own,
// each with the lease).
func (f *pgFanOut) run(ctx context.Context, broker string, limit int, worker, group, topic string, own int, lease time.Duration, maxRetries int, acked []int64) (fanOutRun, error) {
	var ids strings.Builder
	ids.WriteByte('{')
	for i, id := range acked {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(strconv.FormatInt(id, 10))
	}
	ids.WriteByte('}')
	var r fanOutRun
	rows, err := f.db.QueryContext(ctx, f.stmt, broker, limit, worker, group, topic, own, lease.Microseconds(), maxRetries, ids.String())
	if err != nil {
		return r, sqlstore.MapError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, priority, maxRetries            sql.NullInt64
			msgID, topic, typ, key, part        sql.NullString
			corr, cause                         sql.NullString
			payload                             []byte
			headers                             outbox.Headers
			lockedUntil, created, lastProcessed sql.NullTime
		)
		err := rows.Scan(&r.claimed, &r.acked, &id, &msgID, &topic, &typ, &payload, &headers, &key, &part,
			&priority, &maxRetries, &lockedUntil, &created, &lastProcessed, &corr, &cause)
		if err != nil {
			return r, sqlstore.MapError(err)
		}
		if !id.Valid {
			continue
		}
		m := outbox.Message{
			ID:            id.Int64,
			MessageID:     msgID.String,
			Topic:         topic.String,
			Type:          typ.String,
			Payload:       payload,
			Headers:       headers,
			TargetBroker:  key.String,
			PartitionKey:  part.String,
			Priority:      int(priority.Int64),
			Status:        outbox.StatusProcessing,
			MaxRetries:    int(maxRetries.Int64),
			LockedBy:      worker,
			CreatedAt:     created.Time.UTC(),
			CorrelationID: corr.String,
			CausationID:   cause.String,
		}
		if lockedUntil.Valid {
			t := lockedUntil.Time.UTC()
			m.LockedUntil = &t
		}
		if lastProcessed.Valid {
			t := lastProcessed.Time.UTC()
			m.LastProcessedAt = &t
		}
		r.mine = append(r.mine, m)
	}
	if err := rows.Err(); err != nil {
		return r, sqlstore.MapError(err)
	}
	return r, nil
}
