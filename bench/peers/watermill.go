package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
)

// watermillPoolConns is the size of each of Watermill's two pools
// (publisher and subscriber).
const watermillPoolConns = 4

// runWatermill publishes cfg.Rows messages to a fresh topic (PostgreSQL
// schema adapter, 1000 messages per INSERT), then times one subscriber
// of one consumer group (PostgreSQL offsets adapter) from Subscribe until
// the last message is acked. The topic's tables are dropped before it
// returns.
func runWatermill(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "watermill-sql", Unit: "message read, acked, offset stored", Rows: cfg.Rows, Workers: 1}
	pubDB, err := openSQL(ctx, cfg.DSN, watermillPoolConns, nil)
	if err != nil {
		return res, err
	}
	defer pubDB.Close()
	var c counter
	subDB, err := openSQL(ctx, cfg.DSN, watermillPoolConns, &c)
	if err != nil {
		return res, err
	}
	defer subDB.Close()

	topic := "peers_" + suffix()
	schema := wsql.DefaultPostgreSQLSchema{SubscribeBatchSize: cfg.WatermillBatch}
	offsets := wsql.DefaultPostgreSQLOffsetsAdapter{}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		for _, table := range []string{"watermill_" + topic, "watermill_offsets_" + topic} {
			if _, derr := pubDB.ExecContext(cctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); derr != nil {
				err = errors.Join(err, fmt.Errorf("peers: drop %s: %w", table, derr))
			}
		}
	}()
	logger := watermill.NopLogger{}

	setup := startTimer()
	pub, err := wsql.NewPublisher(pubDB, wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, logger)
	if err != nil {
		return res, fmt.Errorf("peers: watermill: publisher: %w", err)
	}
	defer pub.Close()
	const publishBatch = 1000
	for first := 1; first <= cfg.Rows; first += publishBatch {
		n := min(publishBatch, cfg.Rows-first+1)
		msgs := make([]*message.Message, n)
		for i := range msgs {
			seq := strconv.Itoa(first + i)
			msgs[i] = message.NewMessage(seq, message.Payload(`{"seq":`+seq+`}`))
		}
		if err := pub.Publish(topic, msgs...); err != nil {
			return res, fmt.Errorf("peers: watermill: publish: %w", err)
		}
	}
	if _, err := pubDB.ExecContext(ctx, "ANALYZE "+pgx.Identifier{"watermill_" + topic}.Sanitize()); err != nil {
		return res, fmt.Errorf("peers: watermill: analyze: %w", err)
	}
	sub, err := wsql.NewSubscriber(subDB, wsql.SubscriberConfig{
		ConsumerGroup:    "peers",
		SchemaAdapter:    schema,
		OffsetsAdapter:   offsets,
		InitializeSchema: true,
		PollInterval:     100 * time.Millisecond,
	}, logger)
	if err != nil {
		return res, fmt.Errorf("peers: watermill: subscriber: %w", err)
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(topic); err != nil {
		return res, fmt.Errorf("peers: watermill: initialize: %w", err)
	}
	setup.stop(&res)
	res.Setup = res.Wall

	t := newTally(cfg.Rows)
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	before := c.n.Load()
	timer := startTimer()
	ch, err := sub.Subscribe(tctx, topic)
	if err != nil {
		return res, fmt.Errorf("peers: watermill: subscribe: %w", err)
	}
	acked, bad := 0, 0
	for acked < cfg.Rows && err == nil {
		select {
		case msg, ok := <-ch:
			if !ok {
				err = fmt.Errorf("peers: watermill: subscription closed after %d of %d messages", acked, cfg.Rows)
				continue
			}
			if seq, perr := strconv.ParseInt(msg.UUID, 10, 64); perr != nil || !t.mark(seq) {
				bad++
			}
			msg.Ack()
			acked++
		case <-tctx.Done():
			err = fmt.Errorf("peers: watermill: %d of %d messages acked: %w", acked, cfg.Rows, tctx.Err())
		}
	}
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	if cerr := sub.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("peers: watermill: close: %w", cerr))
	}
	res.Done, res.Duplicates, res.Lost = t.count()
	if err != nil {
		return res, err
	}
	if bad > 0 {
		return res, fmt.Errorf("peers: watermill: %d messages with an unknown id", bad)
	}
	// A message delivered again after the count was reached would be a
	// duplicate: the stored offset must be the last message's.
	var last, maxOffset int64
	if err := pubDB.QueryRowContext(ctx, "SELECT offset_acked FROM "+pgx.Identifier{"watermill_offsets_" + topic}.Sanitize()+" WHERE consumer_group = 'peers'").Scan(&last); err != nil {
		return res, fmt.Errorf("peers: watermill: offset: %w", err)
	}
	if err := pubDB.QueryRowContext(ctx, `SELECT max("offset") FROM `+pgx.Identifier{"watermill_" + topic}.Sanitize()).Scan(&maxOffset); err != nil {
		return res, fmt.Errorf("peers: watermill: offset: %w", err)
	}
	if last != maxOffset {
		return res, fmt.Errorf("peers: watermill: offset acked %d, last message %d", last, maxOffset)
	}
	return res, nil
}
