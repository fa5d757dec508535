package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/internal/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

func init() { rootCmd.AddCommand(newDemoCmd()) }

// demoOptions are the flags of `claimstore demo`.
type demoOptions struct {
	messages int
	relays   int
	workers  int
	batch    int
	lease    time.Duration
	writers  int
	perTx    int
	natsURL  string
	table    string
	keep     bool
	timeout  time.Duration
	quiet    bool
}

// demoOrder is the business row the demo writes with each message.
type demoOrder struct {
	ID        int64 `gorm:"primaryKey"`
	Number    string
	Amount    int64
	CreatedAt time.Time
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the transactional outbox end to end and check the stream: nothing lost, nothing twice",
		Long: `demo shows the transactional outbox at work with nothing installed: by default
an SQLite file in a temporary directory and a NATS server with JetStream
embedded in this process (storage in a temporary directory).

It writes --messages business rows, each in one transaction with its outbox
message (--writers writers in parallel), while --relays relays run
concurrently, each with --workers batches in flight. When every message is
marked published it stops the relays and reads the stream back, then prints
the verdict: messages in the stream, distinct message ids, duplicates, lost
messages and the end-to-end throughput. It exits non-zero unless every
message is in the stream exactly once.

--backend and --dsn pick any other database (postgres, mysql, mariadb,
memory), --nats-url an external NATS server instead of the embedded one.`,
		Example: `  claimstore demo
  claimstore demo --messages 50000 --relays 4 --backend postgres
  claimstore demo --nats-url nats://127.0.0.1:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, o) },
	}
	f := cmd.Flags()
	f.IntVar(&o.messages, "messages", 10000, "business rows (and messages) to write")
	f.IntVar(&o.relays, "relays", 4, "relays running concurrently, each with its own NATS connection")
	f.IntVar(&o.workers, "workers", 2, "batches in flight per relay")
	f.IntVar(&o.batch, "batch", 100, "messages claimed per batch")
	f.DurationVar(&o.lease, "lease", 10*time.Second, "lease of a claimed batch")
	f.IntVar(&o.writers, "writers", 4, "concurrent writers of business rows")
	f.IntVar(&o.perTx, "per-tx", 1, "business rows (each with its message) per transaction")
	f.StringVar(&o.natsURL, "nats-url", "", "external NATS server URL (default: an embedded server)")
	f.StringVar(&o.table, "table", "", "message table name (default: a fresh outbox_demo_<random>)")
	f.BoolVar(&o.keep, "keep", false, "keep the tables, the stream and the temporary SQLite file")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up when the messages are not all published within this time")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

// demoLogger is the relays' logger: warnings and errors only, so that the
// progress lines stay readable, unless --log-level is debug.
func demoLogger() *slog.Logger {
	level := slog.LevelWarn
	if globalFlags.LogLevel == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
}

func runDemo(cmd *cobra.Command, o demoOptions) error {
	var c flagChecks
	atLeast(&c, "messages", o.messages, 1)
	atLeast(&c, "relays", o.relays, 1)
	atLeast(&c, "workers", o.workers, 1)
	atLeast(&c, "batch", o.batch, 1)
	above(&c, "lease", o.lease, 0)
	atLeast(&c, "writers", o.writers, 1)
	atLeast(&c, "per-tx", o.perTx, 1)
	above(&c, "timeout", o.timeout, 0)
	if c.err != nil {
		return c.err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	var progress io.Writer = cmd.ErrOrStderr()
	if o.quiet {
		progress = io.Discard
	}
	out := cmd.OutOrStdout()
	tag := outboxenv.RandomHex(4)
	if o.table == "" {
		o.table = "outbox_demo_" + tag
	}

	env, err := openOutbox(ctx, outboxenv.Options{Table: o.table, Migrate: true, TempSQLite: true, Pool: o.relays*o.workers + o.writers + 2})
	if err != nil {
		return err
	}
	defer env.Close()
	env.KeepFile = o.keep
	// SQLite takes one writer at a time: a write that finds the lock taken
	// is retried quietly, and counted in the verdict.
	var busy atomic.Int64
	if env.Repo, err = outboxenv.WithBusyRetries(env.Repo.Store(), &busy); err != nil {
		return err
	}
	orders := "demo_orders_" + tag
	if env.DB != nil {
		if err := env.DB.WithContext(ctx).Table(orders).AutoMigrate(&demoOrder{}); err != nil {
			return fmt.Errorf("create %s: %w", orders, err)
		}
		if !o.keep {
			defer func() { _ = env.DB.Migrator().DropTable(orders, o.table) }()
		}
	}

	broker, err := outboxenv.StartBroker(o.natsURL)
	if err != nil {
		return err
	}
	defer broker.Close()
	stream := "CLAIMSTORE_DEMO_" + tag
	subject := "claimstore.demo." + tag + ".orders.created"
	admin, err := outboxenv.ConnectNATS(broker.URL, "claimstore demo")
	if err != nil {
		return err
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		return err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{subject}, Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage,
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", stream, err)
	}
	if !o.keep {
		defer func() {
			dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer dcancel()
			_ = js.DeleteStream(dctx, stream)
		}()
	}
	where := broker.URL
	if broker.Embedded() {
		where += " (embedded)"
	}
	fmt.Fprintf(out, "demo: %d messages, %d writers, %d relays x %d batches of %d; backend %s, table %s; NATS %s, stream %s\n",
		o.messages, o.writers, o.relays, o.workers, o.batch, env.Backend, o.table, where, stream)
	if env.File != "" {
		switch {
		case !env.TempFile:
			fmt.Fprintf(out, "database file: %s\n", env.File)
		case o.keep:
			fmt.Fprintf(out, "database file: %s (kept after the run: --keep)\n", env.File)
		default:
			fmt.Fprintf(out, "database file: %s (removed after the run; --keep keeps it)\n", env.File)
		}
	}

	// Relays first, so they run while the writers write.
	relayCtx, stopRelays := context.WithCancel(ctx)
	var relayWG sync.WaitGroup
	defer func() { stopRelays(); relayWG.Wait() }()
	relays := make([]*outbox.Relay, o.relays)
	relayErrs := make(chan error, o.relays)
	for i := range relays {
		nc, err := outboxenv.ConnectNATS(broker.URL, fmt.Sprintf("claimstore demo relay %d", i))
		if err != nil {
			return err
		}
		defer nc.Close()
		pub, err := natspub.New(nc, natspub.Config{MaxPending: max(8192, 2*o.batch*o.workers)})
		if err != nil {
			return err
		}
		relays[i], err = outbox.NewRelay(env.Repo, pub, outbox.RelayConfig{
			WorkerID: fmt.Sprintf("demo-relay-%d-%s", i, tag), BatchSize: o.batch, Concurrency: o.workers, Lease: o.lease,
			PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, Logger: demoLogger(),
		})
		if err != nil {
			return err
		}
		relayWG.Go(func() {
			if err := relays[i].Run(relayCtx); err != nil {
				relayErrs <- err
			}
		})
	}
	stop := func() error {
		stopRelays()
		relayWG.Wait()
		select {
		case err := <-relayErrs:
			return err
		default:
			return nil
		}
	}

	start := time.Now()
	var written atomic.Int64
	writeErr := make(chan error, o.writers)
	var writeWG sync.WaitGroup
	for w := range o.writers {
		writeWG.Go(func() {
			for first := w * o.perTx; first < o.messages; first += o.writers * o.perTx {
				n := min(o.perTx, o.messages-first)
				retries, err := outboxenv.Retry(ctx, func() error { return writeOrders(ctx, env, orders, tag, subject, first, n) })
				busy.Add(retries)
				if err != nil {
					writeErr <- err
					return
				}
				written.Add(int64(n))
			}
		})
	}
	writersDone := make(chan struct{})
	go func() { writeWG.Wait(); close(writersDone) }()

	published := func() int64 {
		var n int64
		for _, r := range relays {
			n += r.Stats().Published
		}
		return n
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var writeDone time.Duration
	for done := false; !done; {
		select {
		case err := <-writeErr:
			_ = stop()
			return fmt.Errorf("write: %w", err)
		case <-ctx.Done():
			_ = stop()
			return fmt.Errorf("demo: %d of %d messages published when it gave up: %w", published(), o.messages, ctx.Err())
		case <-writersDone:
			writersDone = nil
			writeDone = time.Since(start)
		case <-tick.C:
			el := time.Since(start).Seconds()
			fmt.Fprintf(progress, "  %5.1fs  written %d/%d  published %d  (%.0f msg/s)\n", el, written.Load(), o.messages, published(), float64(published())/el)
			if writersDone == nil {
				c, err := env.Repo.Counts(ctx)
				if err != nil {
					_ = stop()
					return err
				}
				done = c[outbox.StatusPublished]+c[outbox.StatusAbandoned] == int64(o.messages)
			}
		}
	}
	elapsed := time.Since(start)
	if err := stop(); err != nil {
		return err
	}
	counts, err := env.Repo.Counts(ctx)
	if err != nil {
		return err
	}
	return demoVerdict(ctx, out, js, stream, tag, o, counts, relays, elapsed, writeDone, busy.Load())
}

// writeOrders writes n business rows, numbers first.., each with its outbox
// message, in one transaction (through the store directly on the memory
// backend, which has no transactions).
func writeOrders(ctx context.Context, env *outboxenv.Env, table, tag, subject string, first, n int) error {
	rows := make([]demoOrder, n)
	msgs := make([]*outbox.Message, n)
	for i := range n {
		num := fmt.Sprintf("order-%s-%d", tag, first+i)
		rows[i] = demoOrder{Number: num, Amount: int64(100 + (first+i)%900)}
		msgs[i] = &outbox.Message{
			MessageID: num + "-created", Topic: subject, Type: "order.created",
			Payload: fmt.Appendf(nil, `{"order":%q,"amount":%d}`, num, rows[i].Amount), CorrelationID: num,
		}
	}
	if env.DB == nil {
		return env.Repo.Add(ctx, nil, msgs...)
	}
	return env.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Table(table).Create(&rows).Error; err != nil {
			return err
		}
		return env.Repo.Add(ctx, tx, msgs...)
	})
}

// demoVerdict reads the stream back and prints the verdict; it returns an
// error unless every message is in the stream exactly once.
func demoVerdict(ctx context.Context, out io.Writer, js jetstream.JetStream, stream, tag string, o demoOptions,
	counts map[outbox.Status]int64, relays []*outbox.Relay, elapsed, writeDone time.Duration, busy int64) error {
	audit, err := natspub.Audit(ctx, js, stream)
	if err != nil {
		return err
	}
	lost := 0
	for i := range o.messages {
		if audit.IDs[fmt.Sprintf("order-%s-%d-created", tag, i)] == 0 {
			lost++
		}
	}
	fmt.Fprintf(out, "\nrelays:\n")
	for _, r := range relays {
		st := r.Stats()
		fmt.Fprintf(out, "  %-28s published %6d  failed %d  abandoned %d  lease lost %d\n", r.Config().WorkerID, st.Published, st.Failed, st.Abandoned, st.LeaseLost)
	}
	fmt.Fprintf(out, "table:  %d published, %d abandoned, %d pending, %d failed, %d processing\n",
		counts[outbox.StatusPublished], counts[outbox.StatusAbandoned], counts[outbox.StatusPending], counts[outbox.StatusFailed], counts[outbox.StatusProcessing])
	fmt.Fprintf(out, "stream: %d messages, %d distinct message ids, %d duplicates, %d lost\n",
		audit.Messages, audit.Distinct(), audit.Duplicates(), lost)
	fmt.Fprintf(out, "busy:   %d writes found the database locked by another writer and were retried\n", busy)
	fmt.Fprintf(out, "throughput: %d messages written in %v, all published in %v: %.0f msg/s end to end (write, claim, publish with ack, mark)\n",
		o.messages, writeDone.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(o.messages)/elapsed.Seconds())
	ok := lost == 0 && audit.Duplicates() == 0 && audit.Messages == uint64(o.messages) && audit.Distinct() == o.messages &&
		counts[outbox.StatusPublished] == int64(o.messages)
	if !ok {
		fmt.Fprintln(out, "verdict: FAILED")
		return errors.New("demo: the stream does not hold every message exactly once")
	}
	fmt.Fprintln(out, "verdict: OK: every message is in the stream exactly once")
	return nil
}
