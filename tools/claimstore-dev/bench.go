package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/bench"
)

// benchOptions are the flags of `claimstore-dev bench`.
type benchOptions struct {
	rows       int64
	workers    int
	batch      int
	loadBatch  int
	repeat     int
	variants   string
	budget     time.Duration
	baseline   bool
	portable   bool
	keep       bool
	quiet      bool
	cpuProfile string
	jsonFile   string
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

It starts with the machine (CPU cores, OS/architecture, Go version) and the
server's version, then prints wall time, claim calls and rows per second,
p50/p99 claim latency and database round trips per claim, counted exactly by
a driver hook.

--variants selects what to measure, comma-separated, each on a fresh table
of the same shape and size, in this order:

  library   Store.Claim on the library's default path
  raw       the raw driver running the same SQL the library runs: pgx on
            postgres, database/sql elsewhere; the others' ratios are to it
  raw-sql   the same SQL through database/sql (on postgres: pgx's stdlib;
            elsewhere the same variant as raw)
  portable  the library with its fast path off (postgres and sqlite,
            whose default is the fast path)
  naive     a hand-written SELECT, then one guarded UPDATE per row
  fast      the library with its opt-in fast path on (mysql, mariadb)
  raw-fast  the opt-in fast path's statements through database/sql

A variant the backend lacks is left out with a note. --budget bounds every
run of a variant: when it has passed, no new claim starts, and a variant
with rows left is reported as partial, its rates covering the rows it
claimed (the naive variant needs minutes for 200,000 rows on PostgreSQL).

--baseline is short for --variants library,raw,raw-sql,naive,fast,raw-fast
(each where the backend has it) and --portable adds portable; with
--variants they add to its list.

--json FILE also writes the report as JSON (schema 1, described in
docs/benchmarks.md): machine, parameters, and per variant rows/s, wall
time, round trips and CPU per claim, duplicates, lost, the ratio to raw and
whether it is partial, for comparing runs across commits.

Backends: sqlite (default: a file in a temporary directory), postgres, mysql,
mariadb (default: the local servers, see CLAIMSTORE_POSTGRES_DSN and
CLAIMSTORE_MYSQL_DSN) and memory.`,
		Example: `  claimstore-dev bench
  claimstore-dev bench --backend postgres --rows 200000 --workers 8 --batch 100 --variants library,raw,naive --budget 60s
  claimstore-dev bench --backend mariadb --variants library,fast,raw-fast --json bench.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	f := cmd.Flags()
	f.Int64Var(&o.rows, "rows", 100000, "rows to load and claim")
	f.IntVar(&o.workers, "workers", 8, "concurrent claimers")
	f.IntVar(&o.batch, "batch", 100, "claim limit per call")
	f.IntVar(&o.repeat, "repeat", 1, "measure every variant this many times, rotating their order; report the median run")
	f.IntVar(&o.loadBatch, "load-batch", bench.DefaultLoadBatch, "rows per insert statement while loading")
	f.StringVar(&o.variants, "variants", strings.Join(bench.DefaultVariants(), ","), "comma-separated variants to measure: "+strings.Join(bench.VariantNames(), ", "))
	f.DurationVar(&o.budget, "budget", 60*time.Second, "wall time each run of a variant may take; a variant it stops is reported as partial; 0: no limit")
	f.BoolVar(&o.baseline, "baseline", false, "short for --variants library,raw,raw-sql,naive,fast,raw-fast (those the backend has)")
	f.BoolVar(&o.portable, "portable", false, "add the portable variant: the library with its fast path off (postgres, sqlite)")
	f.StringVar(&o.jsonFile, "json", "", "also write the report as JSON to this file")
	f.BoolVar(&o.keep, "keep", false, "keep the tables (and the default SQLite file) instead of dropping them")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	return cmd
}

func runBench(cmd *cobra.Command, o benchOptions) error {
	var c cli.FlagChecks
	cli.AtLeast(&c, "rows", o.rows, 1)
	cli.AtLeast(&c, "workers", o.workers, 1)
	cli.AtLeast(&c, "batch", o.batch, 1)
	cli.AtLeast(&c, "repeat", o.repeat, 1)
	cli.AtLeast(&c, "load-batch", o.loadBatch, 1)
	cli.AtLeast(&c, "budget", o.budget, 0)
	var variants []string
	if f := cmd.Flags().Lookup("variants"); !o.baseline || f.Changed {
		var err error
		if variants, err = bench.ParseVariants(o.variants); err != nil {
			c.Fail("variants", "%v", strings.TrimPrefix(err.Error(), dao.ErrInvalidArgument.Error()+": "))
		}
	}
	if c.Err() != nil {
		return c.Err()
	}
	var jsonOut *os.File
	if o.jsonFile != "" {
		var err error
		if jsonOut, err = os.Create(o.jsonFile); err != nil {
			return fmt.Errorf("bench: --json: %w", err)
		}
		defer func() {
			if jsonOut != nil { // no report: leave no empty file behind
				jsonOut.Close()
				os.Remove(o.jsonFile)
			}
		}()
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
		Backend: cli.GlobalFlags(cmd).Backend, DSN: cli.GlobalFlags(cmd).DSN,
		Rows: o.rows, Workers: o.workers, Batch: o.batch, LoadBatch: o.loadBatch, Repeat: o.repeat,
		Variants: variants, Baseline: o.baseline, Portable: o.portable, Budget: o.budget,
		Keep: o.keep, Progress: progress,
	})
	if rep != nil {
		if werr := rep.WriteText(cmd.OutOrStdout()); werr != nil && err == nil {
			err = werr
		}
		if jsonOut != nil {
			werr := writeJSONReport(jsonOut, rep)
			jsonOut = nil
			if werr != nil && err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		return err
	}
	return rep.Err()
}

// writeJSONReport writes rep as JSON to f and closes f.
func writeJSONReport(f *os.File, rep *bench.Report) error {
	err := rep.WriteJSON(f)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("bench: --json: %w", cerr)
	}
	return err
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
