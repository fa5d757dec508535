package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/tools/internal/bench/outboxbench"
)

// benchOutboxOptions are the flags of `claimstore-dev bench outbox`: the run's
// options, and the flags the command handles itself.
type benchOutboxOptions struct {
	run        outboxbench.Options
	variants   string
	quiet      bool
	cpuProfile string
}

func newBenchOutboxCmd() *cobra.Command {
	var o benchOutboxOptions
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Measure the outbox end to end: write, claim, publish to JetStream with ack, mark",
		Long: `bench outbox measures the transactional outbox end to end on the database of
--backend/--dsn and NATS JetStream (an embedded server unless --nats-url):
--writers writers add --messages messages in transactions of --write-batch
while --relays relays, each with --workers loops that keep up to --window
batches of --batch claimed and unmarked, claim, publish with ack and mark
them. The clock runs from the first write
to the last mark; the rate is messages per second through the whole path.

The variants (--variants) run in the same process, each on a fresh table
and stream:
  batched      the relay as shipped: each worker keeps --window batches
               claimed and unmarked, one UPDATE ... WHERE id IN (...) marks
               the acknowledged ids of the batches done
  per-message  the same relay over a store that sends one UPDATE per message
               for every mark, i.e. one round trip per message marked
  earlier      the relay and table of the previous release: a window of one
               batch and, on PostgreSQL, the claim index on status with the
               default fillfactor, so that no claim is a HOT update
and the report gives the ratios of batched to the others. After each variant the stream is read
back: every message must be in it exactly once, else the command fails.

On PostgreSQL the table is analyzed every --analyze-every while a variant
runs, as autovacuum's auto-analyze would do on a server where it is on:
without statistics the planner scans the claim index for every mark and
joins the claim's rows by nested loop, which triples the server's CPU per
message. The report gives the CPU per message of this process and of the
PostgreSQL backends serving the run, when the server is local.`,
		Example: `  claimstore-dev bench outbox --backend postgres
  claimstore-dev bench outbox --backend postgres --messages 200000 --relays 2 --workers 4 --batch 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchOutbox(cmd, o) },
	}
	f, r := cmd.Flags(), &o.run
	f.IntVar(&r.Messages, "messages", 100000, "messages per variant")
	f.IntVar(&r.Relays, "relays", 2, "relays, each with its own NATS connection")
	f.IntVar(&r.Workers, "loops", 4, "batch loops per relay (outbox.RelayConfig.Loops): batches in flight per relay")
	cli.DeprecatedAlias(f, "workers", "loops")
	f.IntVar(&r.Batch, "batch", 500, "messages claimed per batch")
	f.IntVar(&r.Window, "window", 4, "batches each worker keeps claimed and not yet marked (outbox.RelayConfig.Window; 1: claim, publish, mark, then the next claim)")
	f.IntVar(&r.Writers, "writers", 2, "concurrent writers")
	f.IntVar(&r.WriteBatch, "write-batch", 1000, "messages per write transaction")
	f.IntVar(&r.Payload, "payload", 128, "payload bytes per message")
	f.DurationVar(&r.Lease, "lease", 30*time.Second, "lease of a claimed batch")
	f.StringVar(&r.NATSURL, "nats-url", "", "external NATS server URL (default: an embedded server)")
	f.StringVar(&o.variants, "variants", outboxbench.VariantBatched+","+outboxbench.VariantPerMessage, "comma-separated variants to run")
	f.DurationVar(&r.Analyze, "analyze-every", 2*time.Second, "on postgres, ANALYZE the table this often while the variant runs (and once after --prefill's writes), as autovacuum's auto-analyze does; 0: never")
	f.IntVar(&r.Repeat, "repeat", 1, "run every variant this many times, alternating their order; report each variant's median run")
	f.BoolVar(&r.Prefill, "prefill", false, "write every message before the relays start, and time writing and relaying apart")
	f.DurationVar(&r.Timeout, "timeout", 10*time.Minute, "give up on a variant after this long")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	return cmd
}

// checkBenchOutbox checks the flags of `claimstore-dev bench outbox` and
// returns the variants to run.
func checkBenchOutbox(o benchOutboxOptions) ([]string, error) {
	r := o.run
	var c cli.FlagChecks
	cli.AtLeast(&c, "messages", r.Messages, 1)
	cli.AtLeast(&c, "relays", r.Relays, 1)
	cli.AtLeast(&c, "loops", r.Workers, 1)
	cli.AtLeast(&c, "batch", r.Batch, 1)
	cli.Between(&c, "window", r.Window, 1, outbox.MaxWindow)
	cli.AtLeast(&c, "writers", r.Writers, 1)
	cli.AtLeast(&c, "write-batch", r.WriteBatch, 1)
	cli.AtLeast(&c, "payload", r.Payload, 0)
	cli.Above(&c, "lease", r.Lease, 0)
	cli.AtLeast(&c, "analyze-every", r.Analyze, 0)
	cli.AtLeast(&c, "repeat", r.Repeat, 1)
	cli.Above(&c, "timeout", r.Timeout, 0)
	if c.Err() != nil {
		return nil, c.Err()
	}
	variants := strings.Split(o.variants, ",")
	for _, v := range variants {
		if !outboxbench.KnownVariant(v) {
			return nil, fmt.Errorf("--variants: %w: unknown variant %q", dao.ErrInvalidArgument, v)
		}
	}
	return variants, nil
}

// runBenchOutbox checks the flags, runs the benchmark on --backend and
// --dsn and prints the report.
func runBenchOutbox(cmd *cobra.Command, o benchOutboxOptions) error {
	variants, err := checkBenchOutbox(o)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	r := o.run
	r.Backend, r.DSN, r.Variants, r.Logger = cli.GlobalFlags(cmd).Backend, cli.GlobalFlags(cmd).DSN, variants, relayLogger(cmd)
	r.Progress = cmd.ErrOrStderr()
	if o.quiet {
		r.Progress = io.Discard
	}
	rep, err := outboxbench.Run(cmd.Context(), r)
	if err != nil {
		return err
	}
	return rep.WriteText(cmd.OutOrStdout())
}
