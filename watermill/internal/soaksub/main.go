// Command claimstore-soaksub is the Watermill subscriber of claimstore's
// chaos soak (claimstore-dev soak --subscriber-command): the soak's
// producers write a Watermill message of every order into the run's
// message table, in the order's transaction, and the processes this
// command runs consume them as one consumer group, through the soak's
// SIGKILLs, SIGSTOPs and terminated database connections. It lives in the
// watermill module, which the library does not depend on; the Makefile
// builds it (bin/claimstore-soaksub) for `make soak`.
//
//	claimstore-soaksub migrate --dir DIR
//	claimstore-soaksub child --dir DIR --slot s1 --inc 1
//
// migrate creates the run's message, delivery and group tables
// (watermill.Migrate) and registers the consumer group; child runs one
// subscriber process of slot until SIGTERM or SIGINT. Both read the run's
// config.json in DIR; child appends its events (start, one wm-handle per
// message handed to its handler, stop) to DIR/<slot>.<inc>.jsonl in the
// soak's history format, one write(2) per line.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/mysql"
	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/watermill"
)

// config is the part of the soak's config.json this command reads.
type config struct {
	Backend string            `json:"backend"`
	DSNs    map[string]string `json:"dsns"`
	Roles   map[string]string `json:"roles"`
	Tables  struct {
		WM string `json:"WM"`
	} `json:"Tables"`
	Topic string `json:"wm_topic"`
	Group string `json:"wm_group"`
	Admin string `json:"wm_admin_dsn"`
}

// subscriptions is the number of subscriptions of the topic each
// process runs.
const subscriptions = 2

// event is one line of a soak history (the fields this command writes).
type event struct {
	T     time.Time        `json:"t"`
	Proc  string           `json:"proc"`
	Kind  string           `json:"kind"`
	Pid   int              `json:"pid,omitempty"`
	Key   string           `json:"key,omitempty"`
	Owner string           `json:"owner,omitempty"`
	N     int64            `json:"n,omitempty"`
	Err   string           `json:"err,omitempty"`
	Stats map[string]int64 `json:"stats,omitempty"`
}

// history appends events to a file opened with O_APPEND, one write per
// line, so a line written survives the process's SIGKILL.
type history struct {
	mu   sync.Mutex
	f    *os.File
	proc string
}

func (h *history) add(e event) {
	e.T, e.Proc = time.Now(), h.proc
	b, _ := json.Marshal(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	_, _ = h.f.Write(append(b, '\n'))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: claimstore-soaksub migrate|child --dir DIR [--slot SLOT --inc N]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "", "the soak run's directory (holds config.json)")
	slot := fs.String("slot", "", "the slot this process runs (child)")
	inc := fs.Int("inc", 1, "the incarnation of the slot (child)")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var err error
	switch os.Args[1] {
	case "migrate":
		err = migrate(ctx, *dir)
	case "child":
		err = child(ctx, *dir, *slot, *inc, log)
	default:
		err = fmt.Errorf("unknown command %q: want migrate or child", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "claimstore-soaksub:", err)
		os.Exit(1)
	}
}

func readConfig(dir string) (*config, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	if c.Tables.WM == "" || c.Topic == "" {
		return nil, errors.New("config.json names no Watermill table or topic: the soak was started without --subscriber-command")
	}
	return &c, nil
}

// wmLease is the subscribers' lease: long enough for a fan-out step of
// 100 messages on MariaDB on a loaded machine (the portable claim takes
// 1 + N round trips), short enough that a killed or frozen subscriber's
// deliveries come back within seconds, like the relays' 5 s.
const wmLease = 5 * time.Second

// subscriberConfig is the subscribers' configuration (WorkerID apart), with
// retries that outlast every fault.
func subscriberConfig(c *config, log *slog.Logger) watermill.SubscriberConfig {
	return watermill.SubscriberConfig{Table: c.Tables.WM, ConsumerGroup: c.Group, BatchSize: 50, FanOutBatchSize: 100,
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, Lease: wmLease, WriteTimeout: 5 * time.Second,
		RetryPolicy: &outbox.RetryPolicy{BaseDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: 2 * time.Second, Jitter: 0.2, MaxRetries: 100},
		Logger:      log}
}

// migrate creates the tables with the orchestrator's account and
// registers the consumer group on the topic.
func migrate(ctx context.Context, dir string) error {
	c, err := readConfig(dir)
	if err != nil {
		return err
	}
	db, err := sqlstore.Open(ctx, c.Backend, c.Admin)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	if err := watermill.Migrate(ctx, db, c.Tables.WM); err != nil {
		return err
	}
	sub, err := watermill.NewSubscriber(db, subscriberConfig(c, slog.Default()))
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.SubscribeInitialize(c.Topic)
}

// child runs one subscriber of the consumer group until ctx ends: each
// message is recorded in the history, worked on for up to 2 ms and
// acked.
func child(ctx context.Context, dir, slot string, inc int, log *slog.Logger) error {
	c, err := readConfig(dir)
	if err != nil {
		return err
	}
	dsn := c.DSNs[slot]
	if dsn == "" || c.Roles[slot] != "subscriber" {
		return fmt.Errorf("no subscriber slot %q in the run's configuration", slot)
	}
	proc := fmt.Sprintf("%s.%d", slot, inc)
	f, err := os.OpenFile(filepath.Join(dir, proc+".jsonl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	h := &history{f: f, proc: proc}
	h.add(event{Kind: "start", Pid: os.Getpid()})
	// The connection may be refused while a fault runs: keep trying.
	var db *gorm.DB
	for {
		db, err = sqlstore.Open(ctx, c.Backend, dsn)
		if err == nil || ctx.Err() != nil {
			break
		}
		log.Warn("open database", "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
		sqlDB.SetMaxOpenConns(4)
	}
	cfg := subscriberConfig(c, log)
	cfg.WorkerID = proc
	sub, err := watermill.NewSubscriber(db, cfg)
	if err != nil {
		return err
	}
	// Two subscriptions per process, each handing its messages to the
	// handler one at a time, as a Watermill router with two handlers of
	// one topic would.
	var handled atomic.Int64
	var wg sync.WaitGroup
	for range subscriptions {
		var msgs <-chan *message.Message
		for {
			msgs, err = sub.Subscribe(ctx, c.Topic)
			if err == nil || ctx.Err() != nil {
				break
			}
			log.Warn("subscribe", "err", err)
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			break
		}
		wg.Go(func() {
			for m := range msgs {
				h.add(event{Kind: "wm-handle", Key: m.UUID, Owner: proc})
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				m.Ack()
				handled.Add(1)
			}
		})
	}
	wg.Wait()
	_ = sub.Close()
	e := event{Kind: "stop", N: handled.Load(), Stats: map[string]int64{"wm_handled": handled.Load()}}
	if err != nil && ctx.Err() == nil {
		e.Err = err.Error()
	}
	h.add(e)
	return nil
}
