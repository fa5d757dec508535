package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
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
	// Baseline adds the raw-driver and naive variants, each on a fresh
	// table of the same shape and size.
	Baseline bool
	// Portable adds, with Baseline on PostgreSQL, the library with its
	// fast path switched off (sqlstore.WithoutFastPath): what the fast
	// path buys.
	Portable bool
	// Keep keeps the tables (and a default SQLite file) instead of
	// dropping them at the end.
	Keep bool
	// LoadBatch is the number of rows per insert while loading;
	// DefaultLoadBatch when <= 0.
	LoadBatch int
	// Progress receives a progress line about every second of each burn,
	// and a line per loaded table; nil disables them.
	Progress io.Writer
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
	}
	return nil
}

// Run loads and burns down one table per variant, one variant after the
// other, and returns the report: the library's Store.Claim first, then,
// with cfg.Baseline, the raw-driver and naive variants of cfg.Backend. It
// returns an error wrapping [dao.ErrInvalidArgument] for a bad
// configuration and the first load, burn or clean-up error otherwise;
// accounting failures (duplicates, lost rows) are in the report, see
// [Report.Err].
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
	store, err := memstore.New[Job]()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rep := &Report{Backend: "memory", Rows: cfg.Rows, Workers: cfg.Workers, Batch: cfg.Batch}
	if err := Load(ctx, cfg.Rows, cfg.LoadBatch, StoreInserter(store)); err != nil {
		return nil, err
	}
	caps := store.Capabilities()
	res, err := Burn(ctx, BurnConfig{
		Label: "library", Rows: cfg.Rows, Workers: cfg.Workers, Batch: cfg.Batch,
		Claim:     StoreClaimFunc(store),
		Remaining: func(ctx context.Context) (int64, error) { return store.Count(ctx, PendingCriteria()) },
		Progress:  cfg.Progress, Stall: cfg.Stall,
	})
	rep.Variants = append(rep.Variants, Variant{
		Name: "library", Path: pathOf(caps) + " under one mutex",
		Promised: caps.ClaimRoundTrips.String() + " (in-process calls, not counted)", Result: res,
	})
	if cfg.Baseline {
		rep.Notes = append(rep.Notes, "memory has no driver: no raw baseline and no round-trip count")
	}
	return rep, err
}

// pathOf describes the claim path a store's capabilities announce.
func pathOf(c dao.Capabilities) string {
	if c.FastPath {
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
