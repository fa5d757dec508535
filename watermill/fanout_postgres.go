package watermill

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/outbox"
)

// pgFanOut is the fan-out of a subscriber on PostgreSQL 11 or later: one
// statement, rendered by [dialects.Renderer.FanOut] from the outbox's
// columns, claim criteria and order, claims a batch of messages from the
// message table and marks them published, reads the consumer groups of
// their topics, writes the deliveries that do not exist yet, and inserts
// those of the subscription's own group and topic already claimed by it,
// with its lease, returning them. Against the portable fan-out (claim,
// read groups, insert, mark, then claim the deliveries) it saves a row
// write per message in each table, and the deliveries and the mark commit
// together.
//
// Groups are read in the statement's snapshot, the one its claim sees, so
// the rule of [Subscriber.register] holds: a group committed before the
// statement gets its deliveries here, a group committed after it copies
// the messages itself (they were committed before the statement began).
type pgFanOut struct {
	db     *sql.DB
	r      dialects.Renderer
	tables Tables

	mu    sync.Mutex
	known bool // ok is the server's answer
	ok    bool // the server runs the statement
}

// newPGFanOut returns the fan-out of t for db, or nil when db is not
// PostgreSQL or has no database/sql pool of its own (a transaction); such
// a subscriber fans out portably.
func newPGFanOut(db *gorm.DB, t Tables) *pgFanOut {
	if db.Dialector.Name() != "postgres" {
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil
	}
	r, err := dialects.NewRenderer(dialects.Postgres)
	if err != nil {
		return nil
	}
	return &pgFanOut{db: sqlDB, r: r, tables: t}
}

// fanOutReturned are the delivery columns the fan-out returns for the
// subscription's own deliveries, in the order run scans them.
var fanOutReturned = []string{
	outbox.ColID, outbox.ColMessageID, outbox.ColTopic, outbox.ColType, outbox.ColPayload, outbox.ColHeaders,
	outbox.ColTargetBroker, outbox.ColPartitionKey, outbox.ColPriority, outbox.ColMaxRetries, outbox.ColLockedUntil,
	outbox.ColCreatedAt, outbox.ColLastProcessedAt, outbox.ColCorrelationID, outbox.ColCausationID,
}

// deliveryColumns returns the source of every column of a delivery (all of
// [outbox.Columns] but the key): a copy of the message's own columns; the
// delivery key ([DeliveryKey]) as target broker and the group as
// partition key; pending, unlocked and with maxRetries, as
// [outbox.Repository.Add] writes a delivery, or, for the worker's own
// deliveries, processing, locked by worker until lease from the database's
// clock. A column it does not know is an error: a new outbox column needs
// its source here.
func deliveryColumns(worker string, lease time.Duration, maxRetries int) ([]dialects.FanOutColumn, error) {
	now := driver.CurrentTime{Form: driver.TimeValue}
	var cols []dialects.FanOutColumn
	for _, name := range outbox.Columns() {
		c := dialects.FanOutColumn{Name: name, From: dialects.FromValue}
		switch name {
		case outbox.ColID:
			continue
		case outbox.ColMessageID, outbox.ColTopic, outbox.ColType, outbox.ColPayload, outbox.ColHeaders,
			outbox.ColPriority, outbox.ColCreatedAt, outbox.ColCorrelationID, outbox.ColCausationID:
			c.From = dialects.FromMessage
		case outbox.ColTargetBroker:
			c.From = dialects.FromDeliveryKey
		case outbox.ColPartitionKey:
			c.From = dialects.FromGroup
		case outbox.ColStatus:
			c.Value, c.Own = string(outbox.StatusPending), string(outbox.StatusProcessing)
		case outbox.ColRetryCount:
			c.Value = int64(0)
		case outbox.ColMaxRetries:
			c.Value = int64(maxRetries)
		case outbox.ColNextRetryAt, outbox.ColPublishedAt:
		case outbox.ColLockedBy:
			c.Value, c.Own = "", worker
		case outbox.ColLockedUntil:
			c.Own = dialects.Later{After: lease}
		case outbox.ColLastError:
			c.Value = ""
		case outbox.ColLastProcessedAt:
			c.Own = now
		default:
			return nil, fmt.Errorf("watermill: fan-out: no source for the outbox column %q", name)
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// statement renders the fan-out: the deliveries acked by worker are
// marked published as [outbox.Repository.MarkPublished] marks them,
// fenced the same way (still processing and locked by worker), so a
// batch's acks commit with the next fan-out instead of in a commit of
// their own; up to limit messages of broker that [outbox.ClaimCriteria]
// allows at the database's clock are claimed in [outbox.ClaimOrder],
// marked published by worker, and copied to every group of their topic;
// the first own copies of group on topic are inserted claimed by worker
// for lease.
func (f *pgFanOut) statement(broker string, limit int, worker, group, topic string, own int, lease time.Duration, maxRetries int, acked []int64) (dialects.Statement, error) {
	cols, err := deliveryColumns(worker, lease, maxRetries)
	if err != nil {
		return dialects.Statement{}, err
	}
	now := driver.CurrentTime{Form: driver.TimeValue}
	mark := outbox.PublishedSet(now)
	mark[outbox.ColLockedBy] = worker
	return f.r.FanOut(dialects.FanOut{
		Messages:    dialects.Table{Name: f.tables.Messages, PrimaryKey: outbox.ColID},
		Deliveries:  dialects.Table{Name: f.tables.Deliveries, PrimaryKey: outbox.ColID},
		Groups:      f.tables.Groups,
		GroupColumn: colConsumerGroup,
		TopicColumn: colTopic,
		Claim:       dao.Query{Where: outbox.ClaimCriteria(broker, now), OrderBy: outbox.ClaimOrder(), Limit: limit},
		Mark:        mark,
		Acked:       acked,
		AckWhere:    outbox.HeldBy(worker),
		AckSet:      outbox.PublishedSet(now),
		OwnGroup:    group,
		OwnTopic:    topic,
		OwnLimit:    own,
		OwnMarker:   outbox.ColStatus,
		Columns:     cols,
		DeliveryKey: dialects.DeliveryKey{Prefix: deliveryKeyPrefix, Digits: deliveryKeyDigits},
		Conflict:    []string{outbox.ColMessageID, outbox.ColTargetBroker},
		Returning:   fanOutReturned,
	})
}

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
	var r fanOutRun
	st, err := f.statement(broker, limit, worker, group, topic, own, lease, maxRetries, acked)
	if err != nil {
		return r, err
	}
	rows, err := f.db.QueryContext(ctx, st.SQL, st.Args...)
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
