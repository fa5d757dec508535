// Command peers measures, on one PostgreSQL database and with one row
// count, claimstore's claim burn-down next to the job queue River and the
// SQL pub/sub of Watermill: claimstore's workers claim batches of pending
// rows until none is left; River's client fetches, runs (a worker that
// does nothing) and completes the same number of jobs inserted before it
// starts; one Watermill subscriber reads and acks the same number of
// messages published before it subscribes. Each timed phase reports rows
// per second, wall time, the process CPU per row and the statements sent
// per row, and checks that every row, job and message was processed
// exactly once. Everything a round creates (tables, River's schema) is
// dropped before the next, also on error or interrupt.
//
//	cd bench/peers && go run . --rows 100000 --workers 8 --batch 100 --rounds 2
//
// The module is separate from claimstore's, so the library does not
// depend on River or Watermill.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// retryEvery is the share of jobs that fail their first attempt in the
// retry phases: one in retryEvery.
const retryEvery = 10

// defaultDSN is the local test database.
const defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// systems are the systems a run measures, in order.
var systems = []string{"claimstore", "dispatch", "jobs", "river", "jobs-retry", "river-retry", "watermill", "addmany", "jobs-insert", "river-insert", "outbox-write", "log-write", "watermill-publish"}

// Report is what a run writes with --json.
type Report struct {
	Machine Machine  `json:"machine"`
	Config  Config   `json:"config"`
	Results []Result `json:"results"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	cfg := Config{}
	var only, jsonFile, riverWorkers, cpuProfile string
	fs.StringVar(&cfg.DSN, "dsn", envOr("CLAIMSTORE_POSTGRES_DSN", defaultDSN), "PostgreSQL connection URL")
	fs.IntVar(&cfg.Rows, "rows", 100000, "rows, jobs and messages per system and round")
	fs.IntVar(&cfg.Workers, "workers", 8, "claimstore's concurrent claimers")
	fs.StringVar(&riverWorkers, "river-max-workers", "", "River's MaxWorkers, comma-separated, each measured (default: --workers, and --workers × --batch, the rows claimstore has in flight)")
	fs.IntVar(&cfg.Batch, "batch", 100, "rows per claimstore claim")
	fs.IntVar(&cfg.Concurrency, "concurrency", 200, "the dispatch worker's Concurrency (handlers running at once) in the job cycle")
	fs.IntVar(&cfg.DispatchBatch, "dispatch-batch", 0, "the dispatch worker's and the jobs queue's BatchSize (0: their default)")
	fs.IntVar(&cfg.JobsWorkers, "jobs-workers", 1000, "the jobs queue's MaxWorkers (jobs at once), as River's MaxWorkers in its best configuration")
	fs.IntVar(&cfg.Pool, "pool", 16, "connections of River's pool and of the dispatch worker's")
	fs.DurationVar(&cfg.RiverFetchCooldown, "river-fetch-cooldown", time.Millisecond, "River's FetchCooldown (its default, 100ms, holds a queue to MaxWorkers jobs per 100 ms)")
	fs.IntVar(&cfg.WatermillBatch, "watermill-batch", 100, "Watermill's SubscribeBatchSize")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "rounds, each measuring every system once, interleaved")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "limit of each timed phase")
	fs.StringVar(&only, "systems", strings.Join(systems, ","), "systems to measure, comma-separated")
	fs.StringVar(&jsonFile, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("peers: --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("peers: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	for s := range strings.SplitSeq(only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(systems, s) {
			return fmt.Errorf("peers: unknown system %q (have %s)", s, strings.Join(systems, ", "))
		}
		cfg.Systems = append(cfg.Systems, s)
	}
	for s := range strings.SplitSeq(riverWorkers, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("peers: --river-max-workers: %q is not a count > 0", s)
		}
		cfg.RiverMaxWorkers = append(cfg.RiverMaxWorkers, n)
	}
	if len(cfg.RiverMaxWorkers) == 0 {
		cfg.RiverMaxWorkers = []int{cfg.Workers, cfg.Workers * cfg.Batch}
	}
	if cfg.Rows <= 0 || cfg.Workers <= 0 || cfg.Batch <= 0 || cfg.Rounds <= 0 || cfg.WatermillBatch <= 0 || cfg.Timeout <= 0 || cfg.RiverFetchCooldown <= 0 || cfg.Concurrency <= 0 || cfg.JobsWorkers <= 0 || cfg.DispatchBatch < 0 || cfg.Pool < 2 || len(cfg.Systems) == 0 {
		return fmt.Errorf("peers: --rows, --workers, --batch, --rounds, --watermill-batch, --timeout, --river-fetch-cooldown and --concurrency must be > 0, --dispatch-batch >= 0, --pool >= 2 and --systems not empty")
	}
	if cfg.Workers > 20 || cfg.Pool > 20 {
		return fmt.Errorf("peers: --workers %d, --pool %d: at most 20, to keep each pool within 20 connections of a shared server", cfg.Workers, cfg.Pool)
	}

	rep, err := measure(ctx, cfg, out)
	if rep != nil {
		printReport(out, rep)
		if jsonFile != "" {
			b, jerr := json.MarshalIndent(rep, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(jsonFile, append(b, '\n'), 0o644)
			}
			if jerr != nil {
				err = errors.Join(err, fmt.Errorf("peers: write %s: %w", jsonFile, jerr))
			}
		}
	}
	return err
}

// measure runs cfg.Rounds rounds of the selected systems, printing
// progress to progress, and returns every result, stopping at the first
// error or the first phase that did not process every row exactly once.
func measure(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	db, err := openSQL(ctx, cfg.DSN, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (start it, e.g. with docker compose up -d postgres, or pass --dsn)", err)
	}
	defer db.Close()
	m, err := currentMachine(ctx, db)
	if err != nil {
		return nil, err
	}
	rep := &Report{Machine: m, Config: cfg}
	fmt.Fprintf(progress, "machine: %d CPU cores, %s, PostgreSQL %s, load average %s\n", m.CPUs, m.GoVersion, m.Server, fmtLoad(m.LoadStart))
	var phases []func(context.Context) (Result, error)
	for _, s := range cfg.Systems {
		switch s {
		case "claimstore":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runClaimstore(ctx, cfg) })
		case "dispatch":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runDispatch(ctx, cfg) })
		case "jobs":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runJobs(ctx, cfg, 0) })
		case "jobs-retry":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runJobs(ctx, cfg, retryEvery) })
		case "jobs-insert":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runJobsInsert(ctx, cfg) })
		case "river":
			for _, n := range cfg.RiverMaxWorkers {
				phases = append(phases, func(ctx context.Context) (Result, error) { return runRiver(ctx, cfg, n, 0) })
			}
		case "river-retry":
			for _, n := range cfg.RiverMaxWorkers {
				phases = append(phases, func(ctx context.Context) (Result, error) { return runRiver(ctx, cfg, n, retryEvery) })
			}
		case "addmany":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runAddMany(ctx, cfg) })
		case "river-insert":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runRiverInsert(ctx, cfg) })
		case "outbox-write":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runOutboxWrite(ctx, cfg) })
		case "log-write":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runLogWrite(ctx, cfg) })
		case "watermill-publish":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runWatermillPublish(ctx, cfg) })
		case "watermill":
			phases = append(phases, func(ctx context.Context) (Result, error) { return runWatermill(ctx, cfg) })
		}
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, phase := range phases {
			res, err := phase(ctx)
			res.Round = round
			if err != nil {
				rep.Machine.LoadEnd = loadAverage()
				return rep, err
			}
			rep.Results = append(rep.Results, res)
			fmt.Fprintf(progress, "round %d: %s (%d workers): %d rows in %v, %.0f rows/s\n", round, res.System, res.Workers, res.Done, res.Wall.Round(time.Millisecond), res.RowsPerSec())
			if !res.Exact() {
				rep.Machine.LoadEnd = loadAverage()
				return rep, fmt.Errorf("peers: %s: %d of %d rows processed, %d duplicates, %d lost", res.System, res.Done, res.Rows, res.Duplicates, res.Lost)
			}
		}
	}
	rep.Machine.LoadEnd = loadAverage()
	return rep, nil
}

// printReport writes the machine line and one table row per result, with
// its rows/s as a ratio of claimstore's in the same round.
func printReport(out io.Writer, rep *Report) {
	fmt.Fprintf(out, "\n%s\n", rep.Machine)
	fmt.Fprintf(out, "%d rows per system and round; claimstore: batch %d; River: fetch cooldown %v; Watermill: 1 subscriber, batch %d\n\n",
		rep.Config.Rows, rep.Config.Batch, rep.Config.RiverFetchCooldown, rep.Config.WatermillBatch)
	base := map[int]float64{}
	for _, r := range rep.Results {
		if r.System == "claimstore" {
			base[r.Round] = r.RowsPerSec()
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "round\tsystem\tworkers\trows/s\tvs claimstore\twall\tCPU/row\tserver CPU/row\tstmts/row\texact\tload1 start/end\t")
	for _, r := range rep.Results {
		ratio := "-"
		if b := base[r.Round]; b > 0 {
			ratio = fmt.Sprintf("%.2fx", r.RowsPerSec()/b)
		}
		exact := "yes"
		if !r.Exact() {
			exact = fmt.Sprintf("no: %d done, %d dup, %d lost", r.Done, r.Duplicates, r.Lost)
		}
		server := "-"
		if r.ServerCPU > 0 {
			server = r.ServerCPUPerRow().Round(100 * time.Nanosecond).String()
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%.0f\t%s\t%v\t%v\t%s\t%.3f\t%s\t%.2f/%.2f\t\n", r.Round, r.System, r.Workers, r.RowsPerSec(), ratio,
			r.Wall.Round(time.Millisecond), r.CPUPerRow().Round(100*time.Nanosecond), server, r.StatementsPerRow(), exact, r.Load1Start, r.Load1End)
	}
	w.Flush()
	fmt.Fprintln(out, "\nunit of work per row:")
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if !seen[r.System] {
			seen[r.System] = true
			fmt.Fprintf(out, "  %-13s %s\n", r.System, r.Unit)
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
