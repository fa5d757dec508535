package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/tools/internal/bench"
)

// Options describe one demo run. The counts must be >= 1 and the
// durations > 0; the command checks them before calling [Run].
type Options struct {
	// Backend and DSN name the database, as [outboxenv.Options] says;
	// without a DSN, SQLite uses a file in a temporary directory.
	Backend, DSN string
	// Messages is the number of business rows, each with its message.
	Messages int
	// Relays run concurrently, each with its own NATS connection and
	// Workers batches of Batch messages in flight; Lease is the lease of
	// a claimed batch.
	Relays, Workers, Batch int
	Lease                  time.Duration
	// Writers write concurrently, PerTx rows (each with its message) per
	// transaction.
	Writers, PerTx int
	// NATSURL is an external NATS server; empty starts an embedded one.
	NATSURL string
	// Table is the message table; empty: a fresh outbox_demo_<random>.
	Table string
	// Keep keeps the tables, the stream and a temporary SQLite file.
	Keep bool
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Progress receives a progress line every half second; nil: none.
	Progress io.Writer
	// Logger receives the relays' logs; nil: slog.Default().
	Logger *slog.Logger
}

// run is the state of one demo run.
type run struct {
	o        Options
	out      io.Writer
	tag      string
	orders   string // the business table
	stream   string
	subject  string
	env      *outboxenv.Env
	broker   *outboxenv.Broker
	js       jetstream.JetStream
	busy     atomic.Int64 // writes retried on a busy database
	cleanups []func()
}

// Run runs the demo that o describes and writes the header and the verdict
// to out. It returns an error when the set-up fails (database, table,
// NATS, stream), a write fails, the messages are not all published within
// o.Timeout, or the stream does not hold every message exactly once.
func Run(ctx context.Context, out io.Writer, o Options) error {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r := &run{o: o, out: out, tag: outboxenv.RandomHex(4)}
	defer r.cleanup()
	if r.o.Table == "" {
		r.o.Table = "outbox_demo_" + r.tag
	}
	if err := r.openTables(ctx); err != nil {
		return err
	}
	if err := r.openStream(ctx); err != nil {
		return err
	}
	r.writeHeader()
	// Relays first, so they run while the writers write.
	rl, err := r.startRelays(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	w := r.startWriters(ctx)
	writeDone, err := r.wait(ctx, w, rl, start)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if err := rl.stop(); err != nil {
		return err
	}
	return r.verdict(ctx, rl, elapsed, writeDone)
}

// onExit adds f to the clean-ups, which run in reverse order when Run
// returns.
func (r *run) onExit(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *run) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// openTables opens the message table with busy retries on its claims and
// marks, and creates the business table.
func (r *run) openTables(ctx context.Context) error {
	env, err := outboxenv.Open(ctx, outboxenv.Options{
		Backend: r.o.Backend, DSN: r.o.DSN, Table: r.o.Table, Migrate: true, TempSQLite: true, DefaultDSN: bench.DefaultDSN,
		Pool: r.o.Relays*r.o.Workers + r.o.Writers + 2,
	})
	if err != nil {
		return err
	}
	r.env = env
	r.onExit(env.Close)
	env.KeepFile = r.o.Keep
	// SQLite takes one writer at a time: a write that finds the lock taken
	// is retried quietly, and counted in the verdict.
	if env.Repo, err = outboxenv.WithBusyRetries(env.Repo.Store(), &r.busy); err != nil {
		return err
	}
	r.orders = "demo_orders_" + r.tag
	if env.DB == nil {
		return nil
	}
	if err := env.DB.WithContext(ctx).Table(r.orders).AutoMigrate(&order{}); err != nil {
		return fmt.Errorf("create %s: %w", r.orders, err)
	}
	if !r.o.Keep {
		r.onExit(func() { _ = env.DB.Migrator().DropTable(r.orders, r.o.Table) })
	}
	return nil
}

// openStream starts or connects to the NATS server and creates the stream.
func (r *run) openStream(ctx context.Context) error {
	broker, err := outboxenv.StartBroker(r.o.NATSURL)
	if err != nil {
		return err
	}
	r.broker = broker
	r.onExit(broker.Close)
	r.stream = "CLAIMSTORE_DEMO_" + r.tag
	r.subject = "claimstore.demo." + r.tag + ".orders.created"
	admin, err := outboxenv.ConnectNATS(broker.URL, "claimstore demo")
	if err != nil {
		return err
	}
	r.onExit(admin.Close)
	if r.js, err = jetstream.New(admin); err != nil {
		return err
	}
	drop, err := outboxenv.CreateStream(ctx, r.js, r.stream, r.subject, outboxenv.DuplicateWindow(r.relayConfig(0)))
	if err != nil {
		return err
	}
	if !r.o.Keep {
		r.onExit(drop)
	}
	return nil
}

// writeHeader prints what the run does, and where.
func (r *run) writeHeader() {
	where := r.broker.URL
	if r.broker.Embedded() {
		where += " (embedded)"
	}
	o, env := r.o, r.env
	fmt.Fprintf(r.out, "demo: %d messages, %d writers, %d relays x %d batches of %d; backend %s, table %s; NATS %s, stream %s\n",
		o.Messages, o.Writers, o.Relays, o.Workers, o.Batch, env.Backend, o.Table, where, r.stream)
	switch {
	case env.File == "":
	case !env.TempFile:
		fmt.Fprintf(r.out, "database file: %s\n", env.File)
	case o.Keep:
		fmt.Fprintf(r.out, "database file: %s (kept after the run: --keep)\n", env.File)
	default:
		fmt.Fprintf(r.out, "database file: %s (removed after the run; --keep keeps it)\n", env.File)
	}
}
