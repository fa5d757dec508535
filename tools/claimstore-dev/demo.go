package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/demo"
)

// demoOptions are the flags of `claimstore-dev demo`: the run's options, and
// whether progress lines are shown.
type demoOptions struct {
	run   demo.Options
	quiet bool
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
		Example: `  claimstore-dev demo
  claimstore-dev demo --messages 50000 --relays 4 --backend postgres
  claimstore-dev demo --nats-url nats://127.0.0.1:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, o) },
	}
	f, r := cmd.Flags(), &o.run
	f.IntVar(&r.Messages, "messages", 10000, "business rows (and messages) to write")
	f.IntVar(&r.Relays, "relays", 4, "relays running concurrently, each with its own NATS connection")
	f.IntVar(&r.Workers, "loops", 2, "batch loops per relay (outbox.RelayConfig.Loops): batches in flight per relay")
	cli.DeprecatedAlias(f, "workers", "loops")
	f.IntVar(&r.Batch, "batch", 100, "messages claimed per batch")
	f.DurationVar(&r.Lease, "lease", 10*time.Second, "lease of a claimed batch")
	f.IntVar(&r.Writers, "writers", 4, "concurrent writers of business rows")
	f.IntVar(&r.PerTx, "per-tx", 1, "business rows (each with its message) per transaction")
	f.StringVar(&r.NATSURL, "nats-url", "", "external NATS server URL (default: an embedded server)")
	f.StringVar(&r.Table, "table", "", "message table name (default: a fresh outbox_demo_<random>)")
	f.BoolVar(&r.Keep, "keep", false, "keep the tables, the stream and the temporary SQLite file")
	f.DurationVar(&r.Timeout, "timeout", 5*time.Minute, "give up when the messages are not all published within this time")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

// relayLogger is the logger of the relays the demo and the outbox
// benchmark run: warnings and errors only, so that the progress lines
// stay readable, unless --log-level is debug.
func relayLogger(cmd *cobra.Command) *slog.Logger {
	level := slog.LevelWarn
	if cli.GlobalFlags(cmd).LogLevel == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
}

// runDemo checks the flags and runs the demo on --backend and --dsn.
func runDemo(cmd *cobra.Command, o demoOptions) error {
	r := o.run
	var c cli.FlagChecks
	cli.AtLeast(&c, "messages", r.Messages, 1)
	cli.AtLeast(&c, "relays", r.Relays, 1)
	cli.AtLeast(&c, "loops", r.Workers, 1)
	cli.AtLeast(&c, "batch", r.Batch, 1)
	cli.Above(&c, "lease", r.Lease, 0)
	cli.AtLeast(&c, "writers", r.Writers, 1)
	cli.AtLeast(&c, "per-tx", r.PerTx, 1)
	cli.Above(&c, "timeout", r.Timeout, 0)
	if c.Err() != nil {
		return c.Err()
	}
	r.Backend, r.DSN, r.Logger = cli.GlobalFlags(cmd).Backend, cli.GlobalFlags(cmd).DSN, relayLogger(cmd)
	r.Progress = cmd.ErrOrStderr()
	if o.quiet {
		r.Progress = io.Discard
	}
	return demo.Run(cmd.Context(), cmd.OutOrStdout(), r)
}
