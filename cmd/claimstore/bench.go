package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/bench"
)

func init() { rootCmd.AddCommand(newBenchCmd()) }

// benchOptions are the flags of `claimstore bench`.
type benchOptions struct {
	rows       int64
	workers    int
	batch      int
	loadBatch  int
	repeat     int
	baseline   bool
	portable   bool
	keep       bool
	quiet      bool
	cpuProfile string
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Store.Claim: burn down a fresh table with concurrent claimers",
		Long: `bench creates a fresh table (random name, dropped at the end unless --keep),
loads --rows pending rows in batched inserts and burns it down with --workers
goroutines, each calling Store.Claim with limit --batch until no row is left.
Every claimed id is accounted for: a row claimed twice (duplicate) or never
(lost) makes the command exit non-zero.

It prints wall time, claim calls and rows per second, p50/p99 claim latency
and database round trips per claim, counted exactly by a driver hook.

--baseline adds, in the same run, on fresh tables of the same shape and size:
the raw driver executing the same SQL the library runs (pgx for PostgreSQL,
database/sql for the others) and the naive SELECT followed by one guarded
UPDATE per row, and prints the ratio of the library to the raw driver.

Backends: sqlite (default: a file in a temporary directory), postgres, mysql,
mariadb (default: the local servers, see CLAIMSTORE_POSTGRES_DSN and
CLAIMSTORE_MYSQL_DSN) and memory.`,
		Example: `  claimstore bench
  claimstore bench --backend postgres --rows 200000 --workers 8 --batch 100 --baseline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	f := cmd.Flags()
	f.Int64Var(&o.rows, "rows", 100000, "rows to load and claim")
	f.IntVar(&o.workers, "workers", 8, "concurrent claimers")
	f.IntVar(&o.batch, "batch", 100, "claim limit per call")
	f.IntVar(&o.repeat, "repeat", 1, "measure every variant this many times, rotating their order; report the median run")
	f.IntVar(&o.loadBatch, "load-batch", bench.DefaultLoadBatch, "rows per insert statement while loading")
	f.BoolVar(&o.baseline, "baseline", false, "also measure the raw driver and the naive loop on fresh tables")
	f.BoolVar(&o.portable, "portable", false, "with --baseline on postgres, also measure the library with its fast path off")
	f.BoolVar(&o.keep, "keep", false, "keep the tables (and the default SQLite file) instead of dropping them")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	return cmd
}

func runBench(cmd *cobra.Command, o benchOptions) error {
	var c flagChecks
	atLeast(&c, "rows", o.rows, 1)
	atLeast(&c, "workers", o.workers, 1)
	atLeast(&c, "batch", o.batch, 1)
	atLeast(&c, "repeat", o.repeat, 1)
	atLeast(&c, "load-batch", o.loadBatch, 1)
	if c.err != nil {
		return c.err
	}
	var progress io.Writer = cmd.ErrOrStderr()
	if o.quiet {
		progress = nil
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep, err := bench.Run(cmd.Context(), bench.Config{
		Backend: globalFlags.Backend, DSN: globalFlags.DSN,
		Rows: o.rows, Workers: o.workers, Batch: o.batch, LoadBatch: o.loadBatch, Repeat: o.repeat,
		Baseline: o.baseline, Portable: o.portable, Keep: o.keep, Progress: progress,
	})
	if rep != nil {
		if werr := rep.WriteText(cmd.OutOrStdout()); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	return rep.Err()
}

// startCPUProfile starts a CPU profile of this process written to the
// file at path, and returns the function that stops it and closes the
// file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
