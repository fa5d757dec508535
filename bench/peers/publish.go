package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// Publish phases: publishWriters goroutines, each writing publishBatch
// messages per call, cfg.Rows messages in all.
const (
	publishWriters = 2
	publishBatch   = 1000
)

// writeInParallel splits 1..rows into calls of publishBatch sequence
// numbers, runs them on publishWriters goroutines with write, and returns
// the first error.
func writeInParallel(rows int, write func(first, n int) error) error {
	next := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range publishWriters {
		wg.Go(func() {
			for first := range next {
				if err := write(first, min(publishBatch, rows-first+1)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for first := 1; first <= rows; first += publishBatch {
		next <- first
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// runOutboxWrite times outbox.Repository.Add writing cfg.Rows messages
// into a fresh message table, publishBatch per transaction, from
// publishWriters goroutines, then counts them. The table is dropped before
// it returns.
func runOutboxWrite(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "outbox-write", Unit: "message written by outbox.Repository.Add in a transaction", Rows: cfg.Rows, Workers: publishWriters}
	var c counter
	db, closeDB, err := openGorm(ctx, cfg.DSN, publishWriters+1, &c)
	if err != nil {
		return res, err
	}
	defer closeDB()
	name := "peers_outbox_" + suffix()
	defer dropTable(ctx, db, name, &err)
	if err := outbox.Migrate(ctx, db, name); err != nil {
		return res, fmt.Errorf("peers: outbox-write: %w", err)
	}
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(name))
	if err != nil {
		return res, fmt.Errorf("peers: outbox-write: %w", err)
	}
	repo, err := outbox.New(store)
	if err != nil {
		return res, fmt.Errorf("peers: outbox-write: %w", err)
	}
	before := c.n.Load()
	timer := startTimer()
	err = writeInParallel(cfg.Rows, func(first, n int) error {
		msgs := make([]*outbox.Message, n)
		for i := range msgs {
			seq := strconv.Itoa(first + i)
			msgs[i] = &outbox.Message{MessageID: seq, Topic: "peers", Payload: []byte(`{"seq":` + seq + `}`)}
		}
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return repo.Add(ctx, tx, msgs...) })
	})
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	if err != nil {
		return res, fmt.Errorf("peers: outbox-write: %w", err)
	}
	stored, err := store.Count(ctx, dao.Criteria{})
	if err != nil {
		return res, fmt.Errorf("peers: outbox-write: count: %w", err)
	}
	res.Done, res.Lost = int(stored), cfg.Rows-int(stored)
	return res, nil
}

// logPartitions is the partition count of the log-write phase's log.
const logPartitions = 16

// runLogWrite times outbox.Log.Write (the outbox's log mode) writing
// cfg.Rows messages, each with one of 100 partition keys, into a fresh
// log (sqlstore.NewLog, 16 partitions), publishBatch per transaction,
// from publishWriters goroutines, then counts them. The log's tables are
// dropped before it returns.
func runLogWrite(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "log-write", Unit: "message written by outbox.Log.Write (log mode) in a transaction", Rows: cfg.Rows, Workers: publishWriters}
	var c counter
	db, closeDB, err := openGorm(ctx, cfg.DSN, publishWriters+1, &c)
	if err != nil {
		return res, err
	}
	defer closeDB()
	name := "peers_log_" + suffix()
	store, err := sqlstore.NewLog(db, name)
	if err != nil {
		return res, fmt.Errorf("peers: log-write: %w", err)
	}
	t := store.Tables()
	for _, table := range []string{t.Log, t.Cursors, t.Dead} {
		defer dropTable(ctx, db, table, &err)
	}
	if err := store.Migrate(ctx); err != nil {
		return res, fmt.Errorf("peers: log-write: %w", err)
	}
	lg, err := outbox.NewLog(store, logPartitions)
	if err != nil {
		return res, fmt.Errorf("peers: log-write: %w", err)
	}
	before := c.n.Load()
	timer := startTimer()
	err = writeInParallel(cfg.Rows, func(first, n int) error {
		msgs := make([]*outbox.Message, n)
		for i := range msgs {
			seq := strconv.Itoa(first + i)
			msgs[i] = &outbox.Message{MessageID: seq, Topic: "peers", PartitionKey: "order-" + strconv.Itoa((first+i)%100),
				Payload: []byte(`{"seq":` + seq + `}`)}
		}
		return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return lg.Write(ctx, tx, msgs...) })
	})
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	if err != nil {
		return res, fmt.Errorf("peers: log-write: %w", err)
	}
	var stored int64
	if err := db.WithContext(ctx).Table(t.Log).Count(&stored).Error; err != nil {
		return res, fmt.Errorf("peers: log-write: count: %w", err)
	}
	res.Done, res.Lost = int(stored), cfg.Rows-int(stored)
	return res, nil
}

// runWatermillPublish times Watermill-sql's publisher (PostgreSQL schema
// adapter) writing cfg.Rows messages to a fresh topic, publishBatch per
// Publish call (one INSERT), from publishWriters goroutines, then counts
// them. The topic's table is dropped before it returns.
func runWatermillPublish(ctx context.Context, cfg Config) (res Result, err error) {
	res = Result{System: "watermill-publish", Unit: "message written by Watermill-sql's Publish", Rows: cfg.Rows, Workers: publishWriters}
	var c counter
	db, err := openSQL(ctx, cfg.DSN, publishWriters+1, &c)
	if err != nil {
		return res, err
	}
	defer db.Close()
	topic := "peers_" + suffix()
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if _, derr := db.ExecContext(cctx, "DROP TABLE IF EXISTS "+pgx.Identifier{"watermill_" + topic}.Sanitize()); derr != nil {
			err = errors.Join(err, fmt.Errorf("peers: drop watermill_%s: %w", topic, derr))
		}
	}()
	pub, err := wsql.NewPublisher(db, wsql.PublisherConfig{SchemaAdapter: wsql.DefaultPostgreSQLSchema{}, AutoInitializeSchema: true}, watermill.NopLogger{})
	if err != nil {
		return res, fmt.Errorf("peers: watermill-publish: publisher: %w", err)
	}
	defer pub.Close()
	// The first Publish creates the topic's table: publish one message
	// (not counted) before the clock starts.
	if err := pub.Publish(topic, message.NewMessage("0", message.Payload(`{}`))); err != nil {
		return res, fmt.Errorf("peers: watermill-publish: %w", err)
	}
	before := c.n.Load()
	timer := startTimer()
	err = writeInParallel(cfg.Rows, func(first, n int) error {
		msgs := make([]*message.Message, n)
		for i := range msgs {
			seq := strconv.Itoa(first + i)
			msgs[i] = message.NewMessage(seq, message.Payload(`{"seq":`+seq+`}`))
		}
		return pub.Publish(topic, msgs...)
	})
	timer.stop(&res)
	res.Statements = c.n.Load() - before
	if err != nil {
		return res, fmt.Errorf("peers: watermill-publish: %w", err)
	}
	var stored int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+pgx.Identifier{"watermill_" + topic}.Sanitize()).Scan(&stored); err != nil {
		return res, fmt.Errorf("peers: watermill-publish: count: %w", err)
	}
	stored-- // the message that created the table
	res.Done, res.Lost = stored, cfg.Rows-stored
	return res, nil
}
