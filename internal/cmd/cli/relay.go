package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// relayOptions are the flags of `claimstore relay`.
type relayOptions struct {
	table           string
	natsURL         string
	broker          string
	workerID        string
	batch           int
	loops           int
	window          int
	lease           time.Duration
	pollInterval    time.Duration
	maxPollInterval time.Duration
	drainTimeout    time.Duration
	retry           outbox.RetryPolicy
	migrate         bool
	stream          string
	subjects        string
	report          time.Duration
}

func newRelayCmd(g *Globals) *cobra.Command {
	o := relayOptions{retry: outbox.DefaultRetryPolicy()}
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Relay outbox messages to NATS JetStream until interrupted",
		Long: `relay runs an outbox relay: it claims batches of messages from the table
given by --backend, --dsn and --table, publishes them to NATS JetStream with
their message id as Nats-Msg-Id, and marks them published or failed. Run as
many relays as you like, on one server or many: claims never overlap, marks
are fenced, and the batch of a relay that dies is taken over when its lease
expires. SIGINT or SIGTERM stops claiming, lets in-flight batches finish for
--shutdown-timeout and releases the rest.

Each message is published on its topic as the subject, which must belong to a
JetStream stream; --stream with --subjects creates or updates one at start,
with a duplicate window of at least the relay's retry horizon (the longest
time a message may be published again, from the --retry-*, --lease,
--max-poll and --window settings), so that a repeat is stored once. The
relay warns about any stream it stores into whose window is shorter.`,
		Example: `  claimstore relay --backend postgres --nats-url nats://127.0.0.1:4222 --loops 4 --batch 200
  claimstore relay --backend sqlite --dsn app.db --stream ORDERS --subjects 'orders.>'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRelayCmd(cmd, *g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.table, "table", outbox.DefaultTable, "message table name")
	f.StringVar(&o.natsURL, "nats-url", "", "NATS server URL (default $"+envNATSURL+", else "+nats.DefaultURL+")")
	f.StringVar(&o.broker, "broker", "", "target broker: relay only the messages whose target_broker equals this")
	f.StringVar(&o.workerID, "worker-id", "", "worker id recorded in locked_by (default host-pid-random)")
	f.IntVar(&o.batch, "batch", outbox.DefaultBatchSize, "messages claimed per batch")
	f.IntVar(&o.loops, "loops", 1, "batch loops, each claiming, publishing and marking batches of its own")
	DeprecatedAlias(f, "workers", "loops")
	f.IntVar(&o.window, "window", outbox.DefaultWindow, "batches each loop keeps claimed and not yet marked, publishing while it claims the next (1: claim, publish, mark, then the next claim)")
	f.DurationVar(&o.lease, "lease", outbox.DefaultLease, "how long a claimed batch stays locked to this relay")
	f.DurationVar(&o.pollInterval, "poll-interval", outbox.DefaultPollInterval, "wait after a short batch, and first wait when idle")
	DeprecatedAlias(f, "poll", "poll-interval")
	f.DurationVar(&o.maxPollInterval, "max-poll-interval", outbox.DefaultMaxPollInterval, "longest idle wait (the wait doubles while idle)")
	DeprecatedAlias(f, "max-poll", "max-poll-interval")
	f.DurationVar(&o.drainTimeout, "drain-timeout", outbox.DefaultDrainTimeout, "how long in-flight batches may finish after a stop signal")
	DeprecatedAlias(f, "shutdown-timeout", "drain-timeout")
	f.DurationVar(&o.retry.BaseDelay, "retry-base", o.retry.BaseDelay, "delay before the first retry of a failed message")
	f.Float64Var(&o.retry.Multiplier, "retry-multiplier", o.retry.Multiplier, "growth of the retry delay per failure")
	f.DurationVar(&o.retry.MaxDelay, "retry-max", o.retry.MaxDelay, "cap of the retry delay")
	f.Float64Var(&o.retry.Jitter, "retry-jitter", o.retry.Jitter, "largest random fraction taken off each retry delay, 0..1")
	f.BoolVar(&o.migrate, "migrate", true, "create the message table and its indexes when missing")
	f.StringVar(&o.stream, "stream", "", "create or update this JetStream stream at start (with --subjects)")
	f.StringVar(&o.subjects, "subjects", "", "comma-separated subjects of --stream")
	f.DurationVar(&o.report, "report", 10*time.Second, "log the relay's totals this often (0: never)")
	return cmd
}

// checkRelay checks the flags of `claimstore relay`, g its shared ones.
func checkRelay(g Globals, o relayOptions) error {
	if strings.EqualFold(g.Backend, "memory") {
		return fmt.Errorf("%w: the memory backend lives only inside one process; use --backend postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument)
	}
	if (o.stream == "") != (o.subjects == "") {
		return fmt.Errorf("%w: --stream and --subjects go together", dao.ErrInvalidArgument)
	}
	var c FlagChecks
	AtLeast(&c, "batch", o.batch, 1)
	AtLeast(&c, "loops", o.loops, 1)
	Between(&c, "window", o.window, 1, outbox.MaxWindow)
	Above(&c, "lease", o.lease, 0)
	Above(&c, "poll-interval", o.pollInterval, 0)
	AtLeast(&c, "max-poll-interval", o.maxPollInterval, max(o.pollInterval, 1))
	AtLeast(&c, "drain-timeout", o.drainTimeout, 0)
	Above(&c, "retry-base", o.retry.BaseDelay, 0)
	AtLeast(&c, "retry-multiplier", o.retry.Multiplier, 1)
	AtLeast(&c, "retry-max", o.retry.MaxDelay, max(o.retry.BaseDelay, 1))
	Between(&c, "retry-jitter", o.retry.Jitter, 0, 1)
	AtLeast(&c, "report", o.report, 0)
	return c.err
}

// runRelayCmd checks the flags, connects to NATS, opens the message table
// of --backend and --dsn (g) and runs the relay until ctx ends.
func runRelayCmd(cmd *cobra.Command, g Globals, o relayOptions) error {
	if err := checkRelay(g, o); err != nil {
		return err
	}
	if o.natsURL == "" {
		o.natsURL = defaultNATSURL()
	}
	ctx := cmd.Context()
	// The broker first: a relay that cannot publish has no business
	// creating tables.
	nc, err := outboxenv.ConnectNATS(o.natsURL, "claimstore relay")
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := outbox.RelayConfig{
		WorkerID: o.workerID, TargetBroker: o.broker, BatchSize: o.batch, Loops: o.loops, Window: o.window, Lease: o.lease,
		PollInterval: o.pollInterval, MaxPollInterval: o.maxPollInterval, DrainTimeout: o.drainTimeout,
	}
	// The longest a message can be published again after its first
	// publish: every stream the relay stores into should remember its id
	// that long (the publisher warns at a stream's first ack otherwise).
	horizon := outbox.RetryHorizon(o.retry, cfg)
	pub, err := natspub.New(nc, natspub.Config{MaxPending: max(8192, 2*o.batch*o.loops*o.window), MinDuplicateWindow: horizon})
	if err != nil {
		return err
	}
	if err := ensureStream(ctx, pub, o, horizon); err != nil {
		return err
	}
	env, err := openOutbox(ctx, g, outboxenv.Options{
		Table: o.table, Migrate: o.migrate, Pool: o.loops + 2,
		Repository: []outbox.Option{outbox.WithRetryPolicy(o.retry), outbox.WithLease(o.lease)},
	})
	if err != nil {
		return err
	}
	defer env.Close()
	if !o.migrate {
		if err := checkTable(ctx, env); err != nil {
			err.fix = "drop --migrate=false to create it"
			return err
		}
	}
	relay, err := outbox.NewRelay(env.Repo, pub, cfg)
	if err != nil {
		return err
	}
	if o.report > 0 {
		go logTotals(ctx, relay, o.report)
	}
	return relay.Run(ctx)
}

// ensureStream creates or updates the stream --stream with --subjects, if
// given, with a duplicate window of at least horizon (a longer window of
// an existing stream is kept, and so are its other settings). A stream
// whose MaxAge is shorter than horizon cannot keep ids longer than its
// messages: its window is MaxAge, and the relay says so at WARN.
func ensureStream(ctx context.Context, pub *natspub.Publisher, o relayOptions, horizon time.Duration) error {
	if o.stream == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	js := pub.JetStream()
	sc := jetstream.StreamConfig{Name: o.stream}
	switch st, err := js.Stream(ctx, o.stream); {
	case err == nil:
		sc = st.CachedInfo().Config
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("stream %s: %w", o.stream, err)
	}
	sc.Subjects = strings.Split(o.subjects, ",")
	sc.Duplicates = max(sc.Duplicates, horizon)
	if sc.MaxAge > 0 && sc.Duplicates > sc.MaxAge {
		sc.Duplicates = sc.MaxAge // JetStream refuses a window longer than MaxAge
	}
	if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("stream %s: %w", o.stream, err)
	}
	switch _, err := pub.CheckStream(ctx, o.stream); {
	case errors.Is(err, natspub.ErrShortWindow):
		slog.Warn("duplicate window shorter than the retry horizon", "stream", o.stream, "max_age", sc.MaxAge, "err", err)
	case err != nil:
		slog.Warn("duplicate window not checked", "stream", o.stream, "err", err)
	}
	return nil
}

// logTotals logs the relay's totals at INFO every period until ctx ends.
func logTotals(ctx context.Context, relay *outbox.Relay, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st := relay.Stats()
			slog.Info("relay totals", "published", st.Published, "failed", st.Failed, "abandoned", st.Abandoned,
				"lease_lost", st.LeaseLost, "mark_errors", st.MarkErrors)
		}
	}
}
