package outboxbench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/tools/internal/bench"
)

// variant is one measured run of one variant: a fresh table and stream,
// its relays and writers.
type variant struct {
	o        Options
	name     string
	broker   *outboxenv.Broker
	tag      string
	table    string
	app      string // application_name of the run's PostgreSQL connections
	stream   string
	subject  string
	env      *outboxenv.Env
	repo     *outbox.Repository
	js       jetstream.JetStream
	updates  atomic.Int64 // UPDATE statements sent
	cleanups []func()
}

// runVariant measures variant name once, within o.Timeout.
func runVariant(ctx context.Context, o Options, broker *outboxenv.Broker, name string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tag := outboxenv.RandomHex(4)
	v := &variant{
		o: o, name: name, broker: broker, tag: tag, table: "outbox_bench_" + tag, app: "claimstore-bench-" + tag,
		stream: "CLAIMSTORE_BENCH_" + tag, subject: "claimstore.bench." + tag,
	}
	defer v.cleanup()
	if err := v.openTable(ctx); err != nil {
		return Result{}, err
	}
	if err := v.openStream(ctx); err != nil {
		return Result{}, err
	}
	rl, err := v.newRelays(ctx)
	if err != nil {
		return Result{}, err
	}
	analyze, err := v.startAnalyzer(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := v.measure(ctx, rl, analyze)
	if err != nil {
		return res, err
	}
	return res, v.check(ctx, &res)
}

// onExit adds f to the clean-ups, which run in reverse order when the
// variant's run returns.
func (v *variant) onExit(f func()) { v.cleanups = append(v.cleanups, f) }

func (v *variant) cleanup() {
	for i := len(v.cleanups) - 1; i >= 0; i-- {
		v.cleanups[i]()
	}
}

// openTable creates the variant's table (dropped at the end), on
// PostgreSQL with connections named v.app, and the repository over the
// variant's store.
func (v *variant) openTable(ctx context.Context) error {
	dsn := v.o.DSN
	if strings.EqualFold(v.o.Backend, "postgres") {
		dsn = withApplicationName(dsn, v.app)
	}
	env, err := outboxenv.Open(ctx, outboxenv.Options{
		Backend: v.o.Backend, DSN: dsn, Table: v.table, Migrate: true, TempSQLite: true, DefaultDSN: bench.DefaultDSN,
		// A loop claims and marks at once when its window holds more
		// than one batch.
		Pool: v.o.Relays*v.o.Workers*min(2, max(1, v.o.Window)) + v.o.Writers + 2,
	})
	if err != nil {
		return err
	}
	v.env = env
	v.onExit(env.Close)
	if env.DB != nil {
		v.onExit(func() { _ = env.DB.Migrator().DropTable(v.table) })
	}
	if v.name == VariantEarlier && env.DB != nil && env.DB.Dialector.Name() == "postgres" {
		if err := earlierLayout(ctx, env.DB, v.table); err != nil {
			return err
		}
	}
	wrap := wrapper(v.name, &v.updates)
	v.repo, err = outboxenv.Wrapped(env.Repo.Store(), wrap, wrap, outbox.WithLease(v.o.Lease))
	return err
}

// earlierLayout gives the empty PostgreSQL table the layout an earlier
// outbox.Migrate made: the claim index on status IN ('pending',
// 'processing', 'failed') and the default fillfactor.
func earlierLayout(ctx context.Context, db *gorm.DB, table string) error {
	claim, _ := outbox.IndexNames(db, table)
	idx, tbl := clause.Column{Name: claim}, clause.Table{Name: table}
	db = db.WithContext(ctx)
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{"DROP INDEX ?", []any{idx}},
		{"CREATE INDEX ? ON ? (target_broker, priority DESC, created_at, id) WHERE status IN ('pending', 'processing', 'failed')", []any{idx, tbl}},
		{"ALTER TABLE ? RESET (fillfactor)", []any{tbl}},
	} {
		if err := db.Exec(st.sql, st.args...).Error; err != nil {
			return fmt.Errorf("earlier table layout: %w", err)
		}
	}
	return nil
}

// openStream creates the variant's stream (deleted at the end).
func (v *variant) openStream(ctx context.Context) error {
	admin, err := outboxenv.ConnectNATS(v.broker.URL, "claimstore bench outbox")
	if err != nil {
		return err
	}
	v.onExit(admin.Close)
	if v.js, err = jetstream.New(admin); err != nil {
		return err
	}
	drop, err := outboxenv.CreateStream(ctx, v.js, v.stream, v.subject, outboxenv.DuplicateWindow(v.relayConfig(0)))
	if err != nil {
		return err
	}
	v.onExit(drop)
	return nil
}

// startAnalyzer, on PostgreSQL with o.Analyze > 0, analyzes the table
// every o.Analyze until the variant ends, on a connection of its own
// outside the run's backends, as autovacuum runs in a process of its own.
// It returns the function that analyzes the table once; elsewhere that
// does nothing.
func (v *variant) startAnalyzer(ctx context.Context) (func(), error) {
	if v.env.DB == nil || v.env.DB.Dialector.Name() != "postgres" || v.o.Analyze <= 0 {
		return func() {}, nil
	}
	adb, err := sqlstore.Open(ctx, "postgres", withApplicationName(v.o.DSN, "claimstore-bench-analyze"))
	if err != nil {
		return nil, err
	}
	if sqlDB, err := adb.DB(); err == nil {
		sqlDB.SetMaxOpenConns(1)
		v.onExit(func() { _ = sqlDB.Close() })
	}
	analyze := func() { _ = adb.WithContext(ctx).Exec("ANALYZE ?", clause.Table{Name: v.table}).Error }
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	v.onExit(func() { stop(); wg.Wait() })
	wg.Go(func() {
		t := time.NewTicker(v.o.Analyze)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
				analyze()
			}
		}
	})
	return analyze, nil
}

// measure runs the writers and the relays (after the writers with
// o.Prefill) until every message is published, and returns the timings,
// the CPU figures and the UPDATE count.
func (v *variant) measure(ctx context.Context, rl *relays, analyze func()) (Result, error) {
	res := Result{Variant: v.name, Messages: v.o.Messages}
	if !v.o.Prefill {
		rl.start()
	}
	meter := cpuMeter{db: v.env.DB, app: v.app}
	meter.start(ctx)
	relayMeter := cpuMeter{db: v.env.DB, app: v.app}
	start := time.Now()
	w := v.startWriters(ctx)
	if err := v.wait(ctx, w, rl, analyze, &relayMeter, start, &res); err != nil {
		return res, err
	}
	res.Total = time.Since(start)
	res.RelayTime = res.Total - res.WriteTime
	meter.stop(ctx, &res)
	if v.o.Prefill {
		var rr Result
		relayMeter.stop(ctx, &rr)
		res.RelayClientCPU, res.RelayServerCPU, res.RelayCPUKnown = rr.ClientCPU, rr.ServerCPU, rr.CPUKnown
	}
	rl.stop()
	res.Updates = v.updates.Load()
	v.hotUpdates(ctx, &res)
	return res, nil
}

// hotUpdates reads, on PostgreSQL, the table's row updates and HOT updates
// from pg_stat_user_tables into res. A backend reports its counts when its
// transaction ends, at most once a second while it is busy, and when it
// exits: the run's idle connections are closed first, and the counts read
// until they stop growing.
func (v *variant) hotUpdates(ctx context.Context, res *Result) {
	if v.env.DB == nil || v.env.DB.Dialector.Name() != "postgres" {
		return
	}
	if sqlDB, err := v.env.DB.DB(); err == nil {
		// The run's pool keeps as many idle as it may open (outboxenv), or
		// sqlstore.Open's idle connections when it has no limit.
		keep := cmp.Or(sqlDB.Stats().MaxOpenConnections, sqlstore.OpenIdleConns)
		sqlDB.SetMaxIdleConns(0) // the backends exit and report their counts
		defer sqlDB.SetMaxIdleConns(keep)
	}
	var last [2]int64
	for range 20 {
		var row struct{ Upd, Hot int64 }
		err := v.env.DB.WithContext(ctx).Raw("SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = ?", v.table).Scan(&row).Error
		if err != nil {
			return
		}
		if row.Upd == last[0] && row.Hot == last[1] && row.Upd > 0 {
			break
		}
		last = [2]int64{row.Upd, row.Hot}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	res.RowUpdates, res.HOTUpdates, res.HOTKnown = last[0], last[1], true
}

// startWriters starts o.Writers writers that together add o.Messages
// messages, o.WriteBatch per transaction (on the memory backend, which
// has no transactions, through the repository directly).
func (v *variant) startWriters(ctx context.Context) *outboxenv.Writers {
	payload := []byte(strings.Repeat("x", v.o.Payload))
	return outboxenv.StartWriters(ctx, v.o.Writers, v.o.WriteBatch, v.o.Messages, func(ctx context.Context, first, n int) error {
		ms := make([]*outbox.Message, n)
		for i := range ms {
			ms[i] = &outbox.Message{MessageID: fmt.Sprintf("m-%d", first+i), Topic: v.subject, Type: "bench", Payload: payload}
		}
		_, err := outboxenv.Retry(ctx, func() error {
			for _, m := range ms { // a failed attempt may have filled ids in
				m.ID = 0
			}
			if v.env.DB == nil {
				return v.repo.Add(ctx, nil, ms...)
			}
			return v.env.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return v.repo.Add(ctx, tx, ms...) })
		})
		return err
	})
}

// wait waits until every message is published, a write fails or ctx
// ends, printing a progress line every second. When the writers are done
// it sets res.WriteTime and, with o.Prefill, analyzes the table, takes
// relayMeter's first reading and starts the relays.
func (v *variant) wait(ctx context.Context, w *outboxenv.Writers, rl *relays, analyze func(), relayMeter *cpuMeter, start time.Time, res *Result) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	writersDone := w.Done
	lastReport := start
	for {
		select {
		case err := <-w.Errs:
			return fmt.Errorf("write: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d published: %w", rl.published(), v.o.Messages, ctx.Err())
		case <-writersDone:
			writersDone = nil
			res.WriteTime = time.Since(start)
			if v.o.Prefill {
				analyze()
				relayMeter.start(ctx)
				rl.start()
			}
		case <-tick.C:
		}
		n := rl.published()
		if time.Since(lastReport) >= time.Second {
			lastReport = time.Now()
			var err error
			if n, err = v.progress(ctx, w, n, start, writersDone == nil); err != nil {
				return err
			}
		}
		if n >= int64(v.o.Messages) {
			return nil
		}
	}
}

// progress prints a progress line with n, the relays' total of published
// messages, and returns n, or the table's count of published messages when
// the writers are done (written) and n falls short: after a failed mark
// the relays' totals undercount, and the table is the reference.
func (v *variant) progress(ctx context.Context, w *outboxenv.Writers, n int64, start time.Time, written bool) (int64, error) {
	el := time.Since(start).Seconds()
	fmt.Fprintf(v.o.Progress, "  %5.1fs  written %d  published %d  (%.0f msg/s)\n", el, w.Written.Load(), n, float64(n)/el)
	if !written || n >= int64(v.o.Messages) {
		return n, nil
	}
	c, err := v.repo.Counts(ctx)
	if err != nil {
		return n, err
	}
	return c[outbox.StatusPublished], nil
}

// check fails unless the table has every message published and the
// stream holds every message exactly once; it records the stream's
// figures in res.
func (v *variant) check(ctx context.Context, res *Result) error {
	c, err := v.repo.Counts(ctx)
	if err != nil {
		return err
	}
	if c[outbox.StatusPublished] != int64(v.o.Messages) {
		return fmt.Errorf("table counts %v, want %d published", c, v.o.Messages)
	}
	audit, err := natspub.Audit(ctx, v.js, v.stream)
	if err != nil {
		return err
	}
	res.InStream, res.Distinct, res.Duplicates = audit.Messages, audit.Distinct(), audit.Duplicates()
	if audit.Messages != uint64(v.o.Messages) || audit.Distinct() != v.o.Messages || audit.Duplicates() != 0 {
		return errors.New("the stream does not hold every message exactly once")
	}
	return nil
}
