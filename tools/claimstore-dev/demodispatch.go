package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/demo"
)

// The demo command is created in demo.go, whose init runs before this
// file's (files are initialized in name order).
// envChildCLI makes a test binary of this package run the command line
// instead of its tests (see TestMain); the dispatch demo sets it for its
// worker processes, where it is harmless in the claimstore binary.
const envChildCLI = "CLAIMSTORE_CLI_CHILD"

func newDemoDispatchCmd() *cobra.Command {
	var o demo.DispatchOptions
	var quiet bool
	cmd := &cobra.Command{
		Use:   "dispatch",
		Short: "Fire once and cron schedules from three worker processes through a SIGKILL and a SIGTERM, and check every fire",
		Long: `dispatch runs the schedule dispatcher end to end with nothing installed: by
default an SQLite file in a temporary directory (--backend postgres, mysql or
mariadb for a server).

It writes --once once schedules due evenly over the run and --cron cron
schedules firing every second, and starts --processes worker processes
(claimstore dispatch run) that fail --fail-rate of the fires on purpose. At
30 % of --duration the first process is killed with SIGKILL, at 50 % the
second is sent SIGTERM and drains. At the end the cron schedules are paused
and the demo waits for the once schedules, then prints the verdict: due
occurrences, fires, duplicates, missed occurrences, failures by ladder step,
leases released by the drain, and the fire lag p50/p99. It exits non-zero
unless nothing was fired twice and nothing missed.`,
		Example: `  claimstore-dev demo dispatch
  claimstore-dev demo dispatch --backend postgres --once 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c cli.FlagChecks
			cli.AtLeast(&c, "once", o.Once, 1)
			cli.AtLeast(&c, "cron", o.Cron, 1)
			cli.AtLeast(&c, "duration", o.Duration, 5*time.Second)
			cli.Between(&c, "fail-rate", o.FailRate, 0, 0.5)
			cli.AtLeast(&c, "processes", o.Processes, 3)
			if c.Err() != nil {
				return c.Err()
			}
			if cli.GlobalFlags(cmd).Backend == "memory" {
				return fmt.Errorf("%w: --backend memory lives inside one process; the demo runs several", dao.ErrInvalidArgument)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			o.Backend, o.DSN = cli.GlobalFlags(cmd).Backend, cli.GlobalFlags(cmd).DSN
			o.Command, o.Env = []string{exe}, []string{envChildCLI + "=1"}
			o.Progress, o.Logs = cmd.ErrOrStderr(), cmd.ErrOrStderr()
			if quiet {
				o.Progress = io.Discard
			}
			return demo.RunDispatch(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Once, "once", 2000, "once schedules, due evenly over the run")
	f.IntVar(&o.Cron, "cron", 50, "cron schedules firing every second")
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "how long the cron schedules fire (at least 5s)")
	f.Float64Var(&o.FailRate, "fail-rate", 0.05, "fraction of fires failed on purpose, 0..0.5")
	f.IntVar(&o.Processes, "processes", 3, "worker processes (at least 3)")
	f.BoolVar(&o.Keep, "keep", false, "keep the table and the temporary SQLite file")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}
