package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/bench/dispatchbench"
)

// benchDispatchOptions are the flags of `claimstore-dev bench dispatch`: the
// run's options, and the flags the command handles itself.
type benchDispatchOptions struct {
	run      dispatchbench.Options
	jsonFile string
	quiet    bool
}

func newBenchDispatchCmd() *cobra.Command {
	var o benchDispatchOptions
	cmd := &cobra.Command{
		Use:   "dispatch",
		Short: "Measure the schedule dispatcher: once schedules all due at once, fired by worker processes",
		Long: `bench dispatch measures fires per second of the schedule dispatcher across
worker processes. It creates a fresh table (random name, dropped at the end
unless --keep), inserts --schedules once schedules, paused, in batches of
--load-batch, and starts --processes processes of ` + "`claimstore dispatch run`" + `
(--concurrency fires at once each, claims of up to --batch (default: half of
--concurrency), --poll-interval, --lease;
no maintenance, no health server), each writing one line per fire to a file
of its own. Then one UPDATE makes every schedule active and due at the
database's current time, and the clock runs until no schedule is active.

The report gives the machine and the server's version, the seeding time,
each process's fires, fires per second, the fire lag (claim time -
next_fire_at) at p50 and p99, and the verdict read from the processes'
files and the table: duplicates (fire lines beyond a schedule's first) and
missed (schedules without a fire line, or not fired in the table). The
handler does no work, so the figure is the dispatcher's own cost: a claim
per batch and the batched, fenced outcome writes. With every schedule due
at once, the lag is mostly the wait in the backlog.

--budget bounds the time from the UPDATE to the last fire; a run it stops is
reported as partial, its rate covering the schedules fired. --json FILE also
writes the report as JSON (schema 1, described in docs/benchmarks.md).

The backend defaults to postgres (the local server, see
CLAIMSTORE_POSTGRES_DSN); sqlite (a file in a temporary directory unless
--dsn), mysql and mariadb work too. The command exits non-zero unless
duplicates and missed are 0.`,
		Example: `  claimstore-dev bench dispatch
  claimstore-dev bench dispatch --backend sqlite --schedules 20000 --processes 2
  claimstore-dev bench dispatch --concurrency 16 --json dispatch.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchDispatch(cmd, o) },
	}
	f, r := cmd.Flags(), &o.run
	f.IntVar(&r.Schedules, "schedules", dispatchbench.DefaultSchedules, "once schedules, all due at once")
	f.IntVar(&r.Processes, "processes", dispatchbench.DefaultProcesses, "worker processes")
	f.IntVar(&r.Concurrency, "concurrency", dispatchbench.DefaultConcurrency, "fires running at once per process")
	f.IntVar(&r.Batch, "batch", 0, "most schedules one claim takes (default: --concurrency)")
	f.DurationVar(&r.PollInterval, "poll-interval", dispatchbench.DefaultPollInterval, "worker heartbeat: wait between claims when idle")
	f.DurationVar(&r.Lease, "lease", dispatchbench.DefaultLease, "lease of a claimed schedule (at least two poll intervals)")
	cli.DeprecatedAlias(f, "tick", "poll-interval")
	f.IntVar(&r.LoadBatch, "load-batch", dispatchbench.DefaultLoadBatch, "schedules per insert while seeding")
	f.DurationVar(&r.Budget, "budget", dispatchbench.DefaultBudget, "wall time the fires may take; a run it stops is reported as partial; 0: no limit")
	f.StringVar(&o.jsonFile, "json", "", "also write the report as JSON to this file")
	f.BoolVar(&r.Keep, "keep", false, "keep the table, the default SQLite file and the fire files")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

// checkBenchDispatch checks the flags of `claimstore-dev bench dispatch` and
// the backend (postgres when --backend was not given), before anything
// touches a database.
func checkBenchDispatch(cmd *cobra.Command, o *benchDispatchOptions) error {
	r := &o.run
	var c cli.FlagChecks
	cli.AtLeast(&c, "schedules", r.Schedules, 1)
	cli.AtLeast(&c, "processes", r.Processes, 1)
	cli.AtLeast(&c, "concurrency", r.Concurrency, 1)
	cli.AtLeast(&c, "batch", r.Batch, 0)
	cli.Above(&c, "poll-interval", r.PollInterval, 0)
	cli.AtLeast(&c, "lease", r.Lease, 2*r.PollInterval)
	cli.AtLeast(&c, "load-batch", r.LoadBatch, 1)
	cli.AtLeast(&c, "budget", r.Budget, 0)
	if c.Err() != nil {
		return c.Err()
	}
	r.Backend, r.DSN = strings.ToLower(cli.GlobalFlags(cmd).Backend), cli.GlobalFlags(cmd).DSN
	if f := cmd.Flags().Lookup("backend"); f == nil || !f.Changed {
		r.Backend = "postgres"
	}
	switch r.Backend {
	case "postgres", "mysql", "mariadb", "sqlite":
	case "memory":
		return fmt.Errorf("%w: --backend memory lives inside one process; the benchmark runs several", dao.ErrInvalidArgument)
	default:
		return fmt.Errorf("%w: --backend %q: want postgres, mysql, mariadb or sqlite", dao.ErrInvalidArgument, r.Backend)
	}
	return nil
}

// runBenchDispatch checks the flags, runs the benchmark and prints the
// report (and writes it as JSON with --json).
func runBenchDispatch(cmd *cobra.Command, o benchDispatchOptions) error {
	if err := checkBenchDispatch(cmd, &o); err != nil {
		return err
	}
	var jsonOut *os.File
	if o.jsonFile != "" {
		var err error
		if jsonOut, err = os.Create(o.jsonFile); err != nil {
			return fmt.Errorf("bench dispatch: --json: %w", err)
		}
		defer func() {
			if jsonOut != nil { // no report: leave no empty file behind
				jsonOut.Close()
				os.Remove(o.jsonFile)
			}
		}()
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r := o.run
	r.Command, r.Env = []string{exe}, []string{envChildCLI + "=1"}
	r.Progress, r.Logs = cmd.ErrOrStderr(), cmd.ErrOrStderr()
	if o.quiet {
		r.Progress = io.Discard
	}
	fmt.Fprintf(r.Progress, "bench dispatch: backend %s, %d schedules, %d processes (started %s)\n", r.Backend, r.Schedules, r.Processes, time.Now().Format(time.RFC3339))
	rep, err := dispatchbench.Run(cmd.Context(), r)
	if rep == nil {
		return err
	}
	if err == nil {
		if werr := rep.WriteText(cmd.OutOrStdout()); werr != nil {
			return werr
		}
		if jsonOut != nil {
			werr := rep.WriteJSON(jsonOut)
			if cerr := jsonOut.Close(); cerr != nil && werr == nil {
				werr = fmt.Errorf("bench dispatch: --json: %w", cerr)
			}
			jsonOut = nil
			if werr != nil {
				return werr
			}
		}
		return rep.Err()
	}
	return err
}
