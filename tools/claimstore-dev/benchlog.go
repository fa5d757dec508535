package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/bench"
	"github.com/claimstore/claimstore/tools/internal/bench/logbench"
)

func newBenchLogCmd() *cobra.Command {
	var o logbench.Options
	var (
		quiet      bool
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Measure the outbox's log mode against JetStream's own publish ceiling",
		Long: `bench log measures, in one run on --backend/--dsn (postgres or sqlite; the
local test server or a temporary file without --dsn) and NATS JetStream (an embedded server unless
--nats-url):
  ceiling  JetStream's asynchronous publish of --messages messages with a
           message id, from one connection, no database: what a relay could
           reach at best
  write    outbox.Log.Write of --messages messages (--keys partition keys
           over --partitions partitions), --writers writers, --write-batch
           per transaction, each key written by one writer in order
  relay    --relays LogRelays publishing the log to JetStream with
           outbox/natspub, batches of --batch, from their start to the last
           message stored
After each relay phase the stream is read back: every message must be in
it once and each key's messages in order, else the command fails. The
report gives each phase's median over --repeat runs and the ratio of the
relay to the ceiling.`,
		Example: `  claimstore-dev bench log --backend postgres
  claimstore-dev bench log --backend postgres --messages 200000 --relays 2 --repeat 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c cli.FlagChecks
			for _, f := range []struct {
				name string
				v    int
			}{{"messages", o.Messages}, {"keys", o.Keys}, {"partitions", o.Partitions}, {"writers", o.Writers},
				{"write-batch", o.WriteBatch}, {"relays", o.Relays}, {"batch", o.Batch}, {"repeat", o.Repeat}} {
				cli.AtLeast(&c, f.name, f.v, 1)
			}
			cli.AtLeast(&c, "payload", o.Payload, 0)
			cli.Above(&c, "timeout", o.Timeout, 0)
			if c.Err() != nil {
				return c.Err()
			}
			o.Backend = strings.ToLower(cli.GlobalFlags(cmd).Backend)
			if o.Backend != "postgres" && o.Backend != "sqlite" {
				return fmt.Errorf("%w: --backend %q: the outbox log is on postgres or sqlite", dao.ErrInvalidArgument, o.Backend)
			}
			d, cleanup, err := bench.CommandDSN(o.Backend, cli.GlobalFlags(cmd).DSN)
			if err != nil {
				return err
			}
			defer func() { _ = cleanup() }()
			o.DSN = d
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			o.Progress = cmd.ErrOrStderr()
			if quiet {
				o.Progress = io.Discard
			}
			rep, err := logbench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			rep.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Messages, "messages", 100000, "messages per phase")
	f.IntVar(&o.Payload, "payload", 128, "payload bytes per message")
	f.IntVar(&o.Keys, "keys", 1000, "partition keys")
	f.IntVar(&o.Partitions, "partitions", 16, "partitions of the log")
	f.IntVar(&o.Writers, "writers", 2, "concurrent writers")
	f.IntVar(&o.WriteBatch, "write-batch", 1000, "messages per write transaction")
	f.IntVar(&o.Relays, "relays", 2, "LogRelays, each with its own NATS connection")
	f.IntVar(&o.Batch, "batch", 500, "records a relay reads at once")
	f.IntVar(&o.Repeat, "repeat", 1, "runs of every phase; the report gives the medians")
	f.StringVar(&o.NATSURL, "nats-url", "", "external NATS server URL (default: an embedded server)")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "limit of each phase")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (NATS embedded server included) to this file (go tool pprof)")
	return cmd
}
