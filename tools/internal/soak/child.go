//go:build linux

package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// Roles of the child processes.
const (
	RoleProducer = "producer"
	RoleWorker   = "worker"
	RoleRelay    = "relay"
	// RoleSubscriber is a Watermill subscriber process, run by the
	// subscriber command (Options.SubscriberCommand), not by RunChild.
	RoleSubscriber = "subscriber"
)

// ChildConfig is what the orchestrator hands its children, as config.json
// in the run's directory.
type ChildConfig struct {
	Backend string `json:"backend"`
	// DSNs is the data source name of each slot: its own MariaDB user or
	// PostgreSQL application_name, so that a fault can terminate the
	// connections of one process.
	DSNs map[string]string `json:"dsns"`
	// Roles is the role of each slot.
	Roles  map[string]string `json:"roles"`
	Tables Tables            `json:"tables"`
	// NATSURLs are the client URLs of the cluster, comma-separated;
	// Subject the stream's subject.
	NATSURLs string `json:"nats_urls"`
	Subject  string `json:"subject"`
	// Rate is the orders per second of each producer, PerTx the orders
	// per transaction.
	Rate  int `json:"rate"`
	PerTx int `json:"per_tx"`
	// Lease is the lease of the jobs and schedules; LeaderTTL the
	// election's.
	Lease     time.Duration `json:"lease"`
	LeaderTTL time.Duration `json:"leader_ttl"`
	// Dir holds the histories.
	Dir string `json:"dir"`
	// WMTopic is the Watermill topic of the orders' messages, WMGroup the
	// subscribers' consumer group, WMAdminDSN the orchestrator's data
	// source name, with which the subscriber command migrates; all empty
	// in a run without subscribers.
	WMTopic    string `json:"wm_topic,omitempty"`
	WMGroup    string `json:"wm_group,omitempty"`
	WMAdminDSN string `json:"wm_admin_dsn,omitempty"`
}

// wmTargetBroker is the target broker of the Watermill messages: the
// watermill module's DefaultTargetBroker, which its subscribers fan out.
const wmTargetBroker = "watermill"

// relayPolicy is the outbox retry policy of the soak: retries that outlast
// every fault many times over, so no message is abandoned.
var relayPolicy = outbox.RetryPolicy{BaseDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: 2 * time.Second, Jitter: 0.2, MaxRetries: 100}

// relayConfig is the relays' configuration (WorkerID apart).
func relayConfig() outbox.RelayConfig {
	return outbox.RelayConfig{BatchSize: 100, Loops: 2, Lease: 5 * time.Second, WriteTimeout: 5 * time.Second,
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, DrainTimeout: 3 * time.Second}
}

// ReadChildConfig reads config.json of the run directory dir.
func ReadChildConfig(dir string) (*ChildConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("soak: child config: %w", err)
	}
	var c ChildConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("soak: child config: %w", err)
	}
	return &c, nil
}

// historyPath is the history file of incarnation inc of slot.
func historyPath(dir, slot string, inc int) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%d.jsonl", slot, inc))
}

// child is one child process's state.
type child struct {
	cfg  *ChildConfig
	slot string
	proc string
	h    *History
	db   *gorm.DB
	log  *slog.Logger
}

// RunChild runs incarnation inc of slot of the run in directory dir until
// ctx ends, then drains and returns. Its events go to the slot's history
// file of that incarnation; its logs to logger.
func RunChild(ctx context.Context, dir, slot string, inc int, logger *slog.Logger) error {
	cfg, err := ReadChildConfig(dir)
	if err != nil {
		return err
	}
	role, dsn := cfg.Roles[slot], cfg.DSNs[slot]
	if role == "" || dsn == "" {
		return fmt.Errorf("soak: %w: no slot %q in the run's configuration", dao.ErrInvalidArgument, slot)
	}
	c := &child{cfg: cfg, slot: slot, proc: fmt.Sprintf("%s.%d", slot, inc), log: logger}
	if c.h, err = CreateHistory(historyPath(dir, slot, inc), c.proc); err != nil {
		return err
	}
	defer c.h.Close()
	c.h.Add(Event{Kind: EvStart, Pid: os.Getpid()})
	// The connection may be refused while a fault runs: keep trying.
	for {
		c.db, err = sqlstore.Open(ctx, cfg.Backend, dsn)
		if err == nil || ctx.Err() != nil {
			break
		}
		logger.Warn("open database", "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	sqlDB, err := c.db.DB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(6)
	sqlDB.SetMaxIdleConns(6)
	var n int64
	var stats map[string]int64
	switch role {
	case RoleProducer:
		n, err = c.produce(ctx)
	case RoleWorker:
		n, stats, err = c.work(ctx)
	case RoleRelay:
		n, stats, err = c.relay(ctx)
	default:
		err = fmt.Errorf("soak: %w: role %q", dao.ErrInvalidArgument, role)
	}
	e := Event{Kind: EvStop, N: n, Stats: stats}
	if err != nil {
		e.Err = err.Error()
	}
	c.h.Add(e)
	return err
}

// produce writes orders at the configured rate, each with its message and
// its job, PerTx to a transaction, until ctx ends. It returns the orders
// whose transaction committed.
func (c *child) produce(ctx context.Context) (int64, error) {
	t := c.cfg.Tables
	store, err := sqlstore.New[outbox.Message](c.db, sqlstore.WithTable(t.Outbox))
	if err != nil {
		return 0, err
	}
	repo, err := outbox.New(store, outbox.WithRetryPolicy(relayPolicy))
	if err != nil {
		return 0, err
	}
	// The Watermill message of each order, as watermill.Publisher writes
	// it (an outbox row for the target broker "watermill"), in the same
	// transaction.
	var wm *outbox.Repository
	if t.WM != "" {
		wstore, err := sqlstore.New[outbox.Message](c.db, sqlstore.WithTable(t.WM))
		if err != nil {
			return 0, err
		}
		if wm, err = outbox.New(wstore); err != nil {
			return 0, err
		}
	}
	qstore, err := sqlstore.New[jobs.Row](c.db, sqlstore.WithTable(t.QJobs))
	if err != nil {
		return 0, err
	}
	qc, err := jobs.NewClient(jobs.Config{Store: qstore, WorkerID: c.proc, Logger: c.log})
	if err != nil {
		return 0, err
	}
	every := time.Second * time.Duration(c.cfg.PerTx) / time.Duration(max(1, c.cfg.Rate))
	tick := time.NewTicker(every)
	defer tick.Stop()
	var committed int64
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return committed, nil
		case <-tick.C:
		}
		numbers := make([]string, c.cfg.PerTx)
		for i := range numbers {
			numbers[i] = fmt.Sprintf("%s-%d", c.proc, seq*c.cfg.PerTx+i)
		}
		c.h.Add(Event{Kind: EvBegin, Orders: numbers})
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := c.db.WithContext(wctx).Transaction(func(tx *gorm.DB) error {
			orders := make([]Order, len(numbers))
			rows := make([]Job, len(numbers))
			msgs := make([]*outbox.Message, len(numbers))
			for i, num := range numbers {
				orders[i] = Order{Number: num, Amount: int64(100 + rand.IntN(900))}
				rows[i] = Job{Key: num, Status: JobQueued}
				msgs[i] = &outbox.Message{MessageID: num, Topic: c.cfg.Subject, Type: "order.created",
					Payload: fmt.Appendf(nil, `{"order":%q,"amount":%d}`, num, orders[i].Amount), CorrelationID: num}
			}
			if err := tx.Table(t.Orders).Create(&orders).Error; err != nil {
				return err
			}
			if err := tx.Table(t.Jobs).Create(&rows).Error; err != nil {
				return err
			}
			params := make([]jobs.InsertParams, len(numbers), len(numbers)+1)
			for i, num := range numbers {
				params[i] = jobs.InsertParams{Args: OrderJob{Order: num}}
				if limitedFor(num) {
					params = append(params, jobs.InsertParams{Args: LimitedJob{Order: num}, Opts: &jobs.InsertOpts{Queue: LimitedQueue}})
				}
			}
			if _, err := qc.InsertManyTx(wctx, tx, params); err != nil {
				return err
			}
			if wm != nil {
				wms := make([]*outbox.Message, len(numbers))
				for i, num := range numbers {
					wms[i] = &outbox.Message{MessageID: num, Topic: c.cfg.WMTopic, TargetBroker: wmTargetBroker, Payload: msgs[i].Payload}
				}
				if err := wm.Add(wctx, tx, wms...); err != nil {
					return err
				}
			}
			return repo.Add(wctx, tx, msgs...)
		})
		cancel()
		if err != nil {
			c.h.Add(Event{Kind: EvAbort, Orders: numbers, Err: err.Error()})
			continue
		}
		committed += int64(len(numbers))
		c.h.Add(Event{Kind: EvCommit, Orders: numbers})
	}
}

// work runs the job worker, the schedule worker with leader-only
// maintenance, and the election with its fenced writer, until ctx ends.
// It returns the jobs this process handled.
func (c *child) work(ctx context.Context) (int64, map[string]int64, error) {
	t := c.cfg.Tables
	jstore, err := sqlstore.New[Job](c.db, sqlstore.WithTable(t.Jobs))
	if err != nil {
		return 0, nil, err
	}
	scheds, err := sqlstore.New[dispatch.Schedule](c.db, sqlstore.WithTable(t.Schedules))
	if err != nil {
		return 0, nil, err
	}
	fence, err := sqlstore.New[Fence](c.db, sqlstore.WithTable(t.Fence))
	if err != nil {
		return 0, nil, err
	}
	leases, err := sqlstore.NewLeases(c.db, t.Leaders)
	if err != nil {
		return 0, nil, err
	}
	elector, err := coord.NewElector(leases, coord.ElectorConfig{
		Name: "soak-maintenance", ID: c.proc, Lease: c.cfg.LeaderTTL, Logger: c.log,
		OnElected: func(ctx context.Context, l coord.Leader) {
			c.h.Add(Event{Kind: EvElected, Term: l.Term()})
			c.fencedWrites(ctx, l, fence)
		},
		OnDeposed: func(l coord.Leader) { c.h.Add(Event{Kind: EvDeposed, Term: l.Term()}) },
	})
	if err != nil {
		return 0, nil, err
	}
	rescuer, err := dispatch.ScheduleRescuer(scheds, dispatch.RescueConfig[dispatch.Schedule]{After: 4 * c.cfg.Lease, Logger: c.log})
	if err != nil {
		return 0, nil, err
	}
	jw, err := dispatch.New(dispatch.Config[Job]{
		Store: jstore, KeyField: "id", Key: func(j *Job) any { return j.ID },
		Due:      func(time.Time) dao.Criteria { return dao.Eq("status", JobQueued) },
		OrderBy:  []dao.Order{dao.Asc("id")},
		Handler:  c.handle,
		WorkerID: c.proc, Concurrency: 8, PollInterval: 100 * time.Millisecond, Lease: c.cfg.Lease,
		DrainTimeout: 2 * time.Second, WriteTimeout: 5 * time.Second, Logger: c.log,
	})
	if err != nil {
		return 0, nil, err
	}
	sw, err := dispatch.NewScheduleWorker(scheds, c.fire, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		WorkerID: c.proc + "-s", Concurrency: 4, PollInterval: 100 * time.Millisecond, Lease: c.cfg.Lease,
		DrainTimeout: 2 * time.Second, WriteTimeout: 5 * time.Second, Logger: c.log,
		Maintenance: &dispatch.Maintenance{Every: time.Second, Leader: dispatch.ElectorGate(elector), Tasks: []dispatch.Task{rescuer.Task()}},
	})
	if err != nil {
		return 0, nil, err
	}
	qstore, err := sqlstore.New[jobs.Row](c.db, sqlstore.WithTable(t.QJobs))
	if err != nil {
		return 0, nil, err
	}
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[OrderJob](c.runQueueJob)); err != nil {
		return 0, nil, err
	}
	if err := jobs.AddWorker(ws, jobs.WorkFunc[LimitedJob](c.runLimitedJob)); err != nil {
		return 0, nil, err
	}
	if err := jobs.AddWorker(ws, jobs.WorkFunc[TaskJob](c.runTask)); err != nil {
		return 0, nil, err
	}
	queues := map[string]jobs.QueueConfig{
		jobs.DefaultQueue: {MaxWorkers: 8},
		// More workers than the limit: the global limit, not this
		// process's, is what holds when one process could take them all.
		LimitedQueue: {MaxWorkers: LimitedMax + 1, Limit: &jobs.Limit{Max: LimitedMax}},
	}
	qc, err := jobs.NewClient(jobs.Config{Store: qstore, Workers: ws, Queues: queues,
		WorkerID: c.proc + "-q", Lease: c.cfg.Lease, PollInterval: 100 * time.Millisecond, DrainTimeout: 2 * time.Second, Leases: leases, Logger: c.log})
	if err != nil {
		return 0, nil, err
	}
	errs := make(chan error, 4)
	go func() { errs <- elector.Run(ctx) }()
	go func() { errs <- jw.Run(ctx) }()
	go func() { errs <- sw.Run(ctx) }()
	go func() { errs <- qc.Run(ctx) }()
	var first error
	for range 4 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	js, ss, qs := jw.Stats(), sw.Stats(), qc.Stats()
	return js.Completed, map[string]int64{
		"jobs_lease_lost": js.LeaseLost, "jobs_write_errors": js.WriteErrors, "jobs_released": js.Released,
		"fires_lease_lost": ss.LeaseLost, "fires_write_errors": ss.WriteErrors,
		"qjobs_completed": qs.Completed, "qjobs_retried": qs.Retried, "qjobs_discarded": qs.Discarded,
	}, first
}

// runQueueJob is the work of an order's queue job: it records the attempt
// in the history, works a few milliseconds and, for one order in 20,
// fails its first attempt.
func (c *child) runQueueJob(ctx context.Context, j *jobs.Job[OrderJob]) error {
	e := Event{Kind: EvQJob, Key: j.Args.Order, N: int64(j.Attempt), Owner: j.LeaseOwner}
	fail := j.Attempt == 1 && plannedFailure(j.Args.Order)
	if fail {
		e.Err = errPlanned
	}
	c.h.Add(e)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(time.Duration(2+rand.IntN(18)) * time.Millisecond):
	}
	if fail {
		return errors.New(errPlanned)
	}
	return nil
}

// handle runs one job: it records the claim in the history, works a few
// milliseconds and marks the job done by its lease owner.
func (c *child) handle(ctx context.Context, job *dispatch.Job[Job]) dao.Set {
	e := Event{Kind: EvHandle, Key: job.Row.Key, Owner: job.Owner, ClaimedAt: job.ClaimedAt}
	if job.Row.LeaseUntil != nil {
		e.LeaseUntil = *job.Row.LeaseUntil
	}
	c.h.Add(e)
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Duration(2+rand.IntN(18)) * time.Millisecond):
	}
	return dao.Set{"status": JobDone, "done_by": job.Owner, "done_at": job.Now()}
}

// fire records one schedule fire in the history.
func (c *child) fire(_ context.Context, f dispatch.Fire) error {
	s := f.Schedule
	e := Event{Kind: EvFire, Key: s.Key, Owner: s.LeaseOwner, Due: s.NextFireAt, ClaimedAt: s.NextFireAt.Add(f.Lag),
		Cron: s.Kind == dispatch.KindCron}
	if s.LeaseUntil != nil {
		e.LeaseUntil = *s.LeaseUntil
	}
	c.h.Add(e)
	return nil
}

// fencedWrites writes the fence row every 100 ms while l leads: one
// coord.FencedUpdate and, when it changed the row, a FenceLog row, in one
// transaction.
func (c *child) fencedWrites(ctx context.Context, l coord.Leader, fence *dao.Table[Fence]) {
	t := c.cfg.Tables
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var rows int64
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.db.WithContext(wctx).Transaction(func(tx *gorm.DB) error {
			n, err := coord.FencedUpdate(wctx, fence.WithTx(tx), l, "term", dao.Eq("id", int64(1)), dao.Set{"writer": c.proc})
			if err != nil || n == 0 {
				return err
			}
			rows = n
			return tx.Table(t.FenceLog).Create(&FenceLog{Term: l.Term(), Writer: c.proc}).Error
		})
		cancel()
		e := Event{Kind: EvFenced, Term: l.Term(), N: rows}
		// A write the database refused (a newer term holds the row) is
		// coord.ErrFenced and recorded as refused: no error, no row. A
		// write refused locally (the leadership ended before it was sent)
		// is ErrNotLeader and recorded as such.
		switch {
		case errors.Is(err, coord.ErrNotLeader):
			e = Event{Kind: EvLocal, Term: l.Term()}
		case err != nil && !errors.Is(err, coord.ErrFenced):
			e.Err, e.N = err.Error(), 0
		}
		c.h.Add(e)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// relay publishes the outbox to the stream until ctx ends and returns the
// messages it marked published.
func (c *child) relay(ctx context.Context) (int64, map[string]int64, error) {
	store, err := sqlstore.New[outbox.Message](c.db, sqlstore.WithTable(c.cfg.Tables.Outbox))
	if err != nil {
		return 0, nil, err
	}
	repo, err := outbox.New(store, outbox.WithRetryPolicy(relayPolicy))
	if err != nil {
		return 0, nil, err
	}
	nc, err := outboxenv.ConnectNATS(c.cfg.NATSURLs, "claimstore soak "+c.proc)
	if err != nil {
		return 0, nil, err
	}
	defer nc.Close()
	rc := relayConfig()
	rc.WorkerID, rc.Logger = c.proc, c.log
	pub, err := natspub.New(nc, natspub.Config{MaxPending: 8192, AckTimeout: 5 * time.Second})
	if err != nil {
		return 0, nil, err
	}
	relay, err := outbox.NewRelay(repo, pub, rc)
	if err != nil {
		return 0, nil, err
	}
	err = relay.Run(ctx)
	st := relay.Stats()
	return st.Published, map[string]int64{"relay_lease_lost": st.LeaseLost, "relay_mark_errors": st.MarkErrors,
		"relay_failed": st.Failed, "relay_released": st.Released}, err
}
