package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
)

// Config describes one benchmark run.
type Config struct {
	// Backend is "sqlite", "postgres", "mysql", "mariadb" or "memory".
	Backend string
	// DSN is the data source name; empty selects [DefaultDSN].
	DSN string
	// Rows is the number of rows loaded into each table (>= 1).
	Rows int64
	// Workers is the number of concurrent claimers (>= 1).
	Workers int
	// Batch is the claim limit of every call (>= 1).
	Batch int
	// Variants names the variants to measure, each on a fresh table of
	// the same shape and size (see [VariantNames]); empty selects
	// [DefaultVariants] unless Baseline is set. A name the backend has no
	// variant for is left out with a note in the report.
	Variants []string
	// Baseline adds [BaselineVariants]: the raw-driver, naive and opt-in
	// fast-path variants the backend has.
	Baseline bool
	// Portable adds [SelectPortable]: the library with its fast path
	// switched off (dao.StrategyPortable), on backends whose default is
	// the fast path: what the fast path buys.
	Portable bool
	// Budget, when > 0, is the wall time each run of a variant may take
	// (see [BurnConfig.Budget]); a variant it stops is reported as
	// partial. Zero means no budget.
	Budget time.Duration
	// Keep keeps the tables (and a default SQLite file) instead of
	// dropping them at the end.
	Keep bool
	// LoadBatch is the number of rows per insert while loading;
	// DefaultLoadBatch when <= 0.
	LoadBatch int
	// Progress receives a progress line every ProgressEvery (default 1 s)
	// of each burn, and a line per loaded table; nil disables them.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Repeat is the number of times each variant is measured (default 1);
	// see [Run].
	Repeat int
	// Stall is passed to [BurnConfig.Stall].
	Stall time.Duration
}

func (c Config) check() error {
	switch {
	case c.Rows < 1:
		return fmt.Errorf("bench: %w: rows must be >= 1, got %d", dao.ErrInvalidArgument, c.Rows)
	case c.Workers < 1:
		return fmt.Errorf("bench: %w: workers must be >= 1, got %d", dao.ErrInvalidArgument, c.Workers)
	case c.Batch < 1:
		return fmt.Errorf("bench: %w: batch must be >= 1, got %d", dao.ErrInvalidArgument, c.Batch)
	case c.Budget < 0:
		return fmt.Errorf("bench: %w: budget must be >= 0, got %v", dao.ErrInvalidArgument, c.Budget)
	}
	for _, n := range c.Variants {
		if !slices.Contains(VariantNames(), n) {
			return fmt.Errorf("bench: %w: unknown variant %q (valid: %s)", dao.ErrInvalidArgument, n, strings.Join(VariantNames(), ", "))
		}
	}
	return nil
}

// newReport returns the report of a run of c on backend, before any
// variant ran.
func (c Config) newReport(backend string) *Report {
	return &Report{
		Machine: CurrentMachine(), Started: time.Now(), Backend: backend,
		Rows: c.Rows, Workers: c.Workers, Batch: c.Batch, Repeat: max(c.Repeat, 1), Budget: c.Budget,
		Selected: c.selection().list(),
	}
}

// Run loads and burns down one table per selected variant and run, one
// after the other, and returns the report, its variants in the order of
// [VariantNames] (see [Config.Variants]). Each run of a variant stops at
// cfg.Budget, if any, and is then reported as partial. It returns an error
// wrapping [dao.ErrInvalidArgument] for a bad configuration (before it
// opens any database) and the first load, burn or clean-up error otherwise;
// accounting failures (duplicates, lost rows) are in the report, see
// [Report.Err]. With cfg.Repeat > 1 every variant is measured that many
// times, round by round, the order of the variants rotated by one each
// round; the report gives each variant's median run and the range.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case "memory":
		return runMemory(ctx, cfg)
	case "sqlite", "postgres", "mysql", "mariadb":
		return runSQL(ctx, cfg)
	}
	return nil, fmt.Errorf("bench: %w: unknown backend %q (want sqlite, postgres, mysql, mariadb or memory)", dao.ErrInvalidArgument, cfg.Backend)
}

// runMemory measures the in-memory store. It has no driver, so neither a
// raw baseline nor a round-trip count.
func runMemory(ctx context.Context, cfg Config) (*Report, error) {
	rep := cfg.newReport("memory")
	sel := cfg.selection()
	if len(sel.list()) > 1 || !sel.has(SelectLibrary) {
		rep.Notes = append(rep.Notes, "memory has no driver: only the library is measured, with no raw baseline and no round-trip count")
	}
	if !sel.has(SelectLibrary) {
		return rep, fmt.Errorf("bench: %w: memory measures only the %s variant, and it is not selected", dao.ErrInvalidArgument, SelectLibrary)
	}
	lib := spec{v: Variant{Name: VariantLibrary}, run: func(ctx context.Context, progress io.Writer) (Variant, BurnResult, error) {
		v := Variant{Name: VariantLibrary}
		store, err := memstore.New[Job]()
		if err != nil {
			return v, BurnResult{}, fmt.Errorf("bench: %w", err)
		}
		if err := Load(ctx, cfg.Rows, cfg.LoadBatch, StoreInserter(store)); err != nil {
			return v, BurnResult{}, err
		}
		caps := store.Capabilities()
		v.Path = pathOf(caps) + " under one mutex"
		v.Promised = caps.ClaimRoundTrips.String() + " (in-process calls, not counted)"
		res, err := Burn(ctx, BurnConfig{
			Label: VariantLibrary, Rows: cfg.Rows, Workers: cfg.Workers, Batch: cfg.Batch,
			Claim:     StoreClaimFunc(store),
			Pending:   StorePending(store),
			Remaining: StoreRemaining(store),
			Progress:  progress, ProgressEvery: cfg.ProgressEvery, Stall: cfg.Stall, Budget: cfg.Budget,
		})
		return v, res, err
	}}
	return rep, runSpecs(ctx, cfg, rep, []spec{lib})
}

// spec is one variant a run measures: its description and a function that
// measures it once, on a fresh table, reporting progress to progress.
type spec struct {
	v   Variant
	run func(ctx context.Context, progress io.Writer) (Variant, BurnResult, error)
}

// runSpecs measures every spec cfg.Repeat times (at least once) and
// appends the variants to rep in spec order. Round r runs the specs in
// order rotated by r, so that over the rounds each variant runs early and
// late alike. Each variant's Result is its median run by rows per second;
// Runs keeps all of them. The first error ends the run; the variants
// measured so far are in rep.
func runSpecs(ctx context.Context, cfg Config, rep *Report, specs []spec) error {
	repeat := max(cfg.Repeat, 1)
	runs := make([][]BurnResult, len(specs))
	vs := make([]Variant, len(specs))
	for i := range specs {
		vs[i] = specs[i].v
	}
	var err error
rounds:
	for r := range repeat {
		for k := range specs {
			i := (k + r) % len(specs)
			if repeat > 1 && cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "round %d/%d: %s\n", r+1, repeat, specs[i].v.Name)
			}
			var res BurnResult
			var v Variant
			v, res, err = specs[i].run(ctx, cfg.Progress)
			v.Baseline = specs[i].v.Baseline
			vs[i] = v
			if res.Calls > 0 || err == nil {
				runs[i] = append(runs[i], res)
			}
			if err != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s stopped early (%v): its figures cover only the rows claimed before, and lost counts the rows left", v.Name, err))
				break rounds
			}
		}
	}
	for i := range vs {
		if len(runs[i]) > 0 {
			rep.Variants = append(rep.Variants, vs[i].withRuns(runs[i]))
		}
	}
	return err
}

// pathOf describes the claim path a store's capabilities announce.
func pathOf(c dao.Capabilities) string {
	if c.Strategy == dao.StrategyFastPath {
		return "fast path"
	}
	return "portable default (read candidates, then one guarded UPDATE per row)"
}

// tableName returns prefix_<8 random hex digits>, a fresh table name.
func tableName(prefix string) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("bench: table name: %w", err)
	}
	return prefix + "_" + hex.EncodeToString(b[:]), nil
}
