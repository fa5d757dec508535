//go:build linux

package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/soak"
)

func newSoakCmd() *cobra.Command {
	var o soak.Options
	var quiet bool
	var subCmd string
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run producers, workers and relays as OS processes through seeded faults, then check every event of their histories",
		Long: `soak runs a mixed load across OS processes on PostgreSQL or MariaDB
(--backend postgres, mysql or mariadb) for --duration, while a fault schedule
drawn from --seed kills and freezes them:

  producers  write business rows, each with its outbox message and its job,
             in one transaction (--producers, --rate orders/s each);
  workers    run a dispatch worker over the jobs, a schedule worker over
             once and every-second cron schedules, and a leader election
             whose leader runs the maintenance and writes a row fenced by
             its term (--workers);
  relays     publish the outbox to an R3 stream of a three-node JetStream
             cluster of nats-server processes on 127.0.0.1 ports
             --nats-port to --nats-port+2 (routes +2000, monitoring +4000)
             (--relays);
  subscribers  (with --subscriber-command) consume the Watermill message each
             producer writes for every order in the same transaction, as one
             consumer group of the watermill module's Subscriber
             (--subscribers); the command is claimstore-soaksub, built from
             the watermill module (make soak builds bin/claimstore-soaksub).

Every 2 to 8 s one fault: SIGKILL of a process (restarted), SIGSTOP then
SIGCONT, its database connections terminated (pg_terminate_backend, or KILL
CONNECTION of the MariaDB user made for it), or a NATS node killed and
restarted. Every process appends its events to a JSON-lines history of its
own. After the load the producers stop, the backlog drains, the processes
stop, and the checker reads the histories, the tables and the stream:
every job done exactly once, by the owner of its last claim, and handled
again only after the lease of a holder that was killed or frozen; every
committed transaction whole; every message in the stream exactly once;
terms only increasing and no fenced write of an older term landed after a
newer one; every Watermill message fanned out, acked by the consumer group
and handed to a handler at least once; no row left claimed. It prints the faults, the throughput, the
longest recovery (from a fault until everything written before it is done
and published) and the verdict, and exits non-zero on any violation with
the seed that replays the schedule. The run's tables, database users,
stream and nats-server processes are removed at the end; its directory of
histories and logs is kept when the run fails (or with --keep).`,
		Example: `  claimstore-dev soak --backend postgres
  claimstore-dev soak --backend mariadb --duration 2m
  claimstore-dev soak --backend postgres --duration 2m --seed 42
  claimstore-dev soak --backend postgres --duration 2m --subscriber-command bin/claimstore-soaksub`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c cli.FlagChecks
			cli.AtLeast(&c, "duration", o.Duration, 20*time.Second)
			cli.AtLeast(&c, "producers", o.Producers, 1)
			cli.AtLeast(&c, "workers", o.Workers, 1)
			cli.AtLeast(&c, "relays", o.Relays, 1)
			cli.Between(&c, "subscribers", o.Subscribers, 1, 20)
			cli.Between(&c, "rate", o.Rate, 1, 10000)
			cli.Between(&c, "nats-port", o.ClientPort, 1024, 65535-4002)
			cli.AtLeast(&c, "drain-timeout", o.DrainTimeout, time.Second)
			if c.Err() != nil {
				return c.Err()
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			o.ClusterPort, o.MonitorPort = o.ClientPort+2000, o.ClientPort+4000
			o.Backend, o.DSN = cli.GlobalFlags(cmd).Backend, cli.GlobalFlags(cmd).DSN
			o.Command, o.Env = []string{exe}, []string{envChildCLI + "=1"}
			if subCmd != "" {
				path, err := exec.LookPath(subCmd)
				if err != nil {
					return fmt.Errorf("--subscriber-command: %w (build it with make soak, or: cd watermill && go build -o ../bin/claimstore-soaksub ./internal/soaksub)", err)
				}
				if path, err = filepath.Abs(path); err != nil {
					return err
				}
				o.SubscriberCommand = []string{path}
			}
			o.Progress = cmd.ErrOrStderr()
			if quiet {
				o.Progress = io.Discard
			}
			return soak.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", soak.DefaultDuration, "length of the load and of the fault schedule (at least 20s)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the fault schedule (0: a random one, printed)")
	f.IntVar(&o.Producers, "producers", 2, "producer processes")
	f.IntVar(&o.Workers, "workers", 3, "worker processes")
	f.IntVar(&o.Relays, "relays", 2, "relay processes")
	f.IntVar(&o.Subscribers, "subscribers", 2, "Watermill subscriber processes (with --subscriber-command)")
	f.StringVar(&subCmd, "subscriber-command", "", "the Watermill subscriber binary (claimstore-soaksub); none: no Watermill load")
	f.IntVar(&o.Rate, "rate", soak.DefaultRate, "orders per second of each producer, 5 to a transaction")
	f.StringVar(&o.NATSServer, "nats-server", "/usr/sbin/nats-server", "nats-server binary of the cluster")
	f.IntVar(&o.ClientPort, "nats-port", soak.DefaultClientPort, "client port of the first NATS node")
	f.DurationVar(&o.DrainTimeout, "drain-timeout", soak.DefaultDrainTimeout, "longest wait after the load for the backlog to drain")
	f.BoolVar(&o.Keep, "keep", false, "keep the directory of histories and logs after a run that passed")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	cmd.AddCommand(newSoakChildCmd())
	return cmd
}

// newSoakChildCmd is the command each process of a soak runs; the soak
// starts it, users do not.
func newSoakChildCmd() *cobra.Command {
	var dir, slot string
	var inc int
	cmd := &cobra.Command{
		Use:    "child",
		Short:  "One process of a soak run (started by claimstore-dev soak)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c cli.FlagChecks
			cli.AtLeast(&c, "inc", inc, 1)
			if c.Err() != nil {
				return c.Err()
			}
			if dir == "" || slot == "" {
				return fmt.Errorf("%w: --dir and --slot are required", dao.ErrInvalidArgument)
			}
			return soak.RunChild(cmd.Context(), dir, slot, inc, slog.Default())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "the run's directory")
	f.StringVar(&slot, "slot", "", "the process's slot (p1, w2, r1, ...)")
	f.IntVar(&inc, "inc", 1, "the slot's incarnation")
	return cmd
}
