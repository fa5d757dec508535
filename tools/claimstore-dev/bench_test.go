package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/bench"
)

// runCLI runs a command tree of its own like execCLI, under a context
// that does not end.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return execCLI(context.Background(), args...)
}

func TestBenchCommandSQLite(t *testing.T) {
	out, _, err := runCLI(t, "bench", "--backend", "sqlite", "--dsn", "", "--rows", "600", "--workers", "3", "--batch", "25", "--baseline", "--budget", "0", "--quiet", "--json", "")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, want := range []string{
		"machine:         " + strconv.Itoa(runtime.NumCPU()) + " CPU cores, " + runtime.GOOS + "/" + runtime.GOARCH + ", " + runtime.Version(),
		"backend:         sqlite (SQLite 3.", "rows:            600", "workers:         3", "batch:           25",
		"round trips:", "duplicates:      0", "lost:            0", "raw database/sql", "naive",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchCommandMemoryProgress(t *testing.T) {
	out, _, err := runCLI(t, "bench", "--backend", "memory", "--dsn", "", "--rows", "300", "--workers", "2", "--batch", "10", "--variants", "library", "--baseline=false", "--budget", "0", "--quiet=false", "--json", "")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if !strings.Contains(out, "backend:         memory (no server)") || !strings.Contains(out, "lost:            0") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}

func TestBenchCommandRejectsBadFlags(t *testing.T) {
	if _, _, err := runCLI(t, "bench", "--backend", "oracle", "--rows", "10", "--workers", "1", "--batch", "1"); err == nil || !strings.Contains(err.Error(), "oracle") {
		t.Fatalf("unknown backend: got %v", err)
	}
	if _, _, err := runCLI(t, "bench", "--backend", "memory", "--rows", "0", "--workers", "1", "--batch", "1"); err == nil {
		t.Fatal("rows 0 accepted")
	}
	if _, _, err := runCLI(t, "bench", "--backend", "memory", "--log-level", "loud", "--rows", "1", "--workers", "1", "--batch", "1"); err == nil {
		t.Fatal("bad log level accepted")
	}
}

// benchCLI runs `claimstore bench` with args on a command tree of its own,
// so that no flag of an earlier test leaks in.
func benchCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return runCLI(t, append([]string{"bench"}, args...)...)
}

// sqliteFile returns the path of a SQLite file in a fresh temporary
// directory, not yet created, and the DSN that opens it.
func sqliteFile(t *testing.T) (path, dsn string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "bench.db")
	return path, sqlstore.SQLiteDSN(path)
}

// benchTables returns the tables a benchmark left in the SQLite database
// dsn.
func benchTables(t *testing.T, dsn string) []string {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), "sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	tables, err := db.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range tables {
		if strings.HasPrefix(n, "bench_") {
			out = append(out, n)
		}
	}
	return out
}

func TestBenchCommandSelectsVariants(t *testing.T) {
	_, dsn := sqliteFile(t)
	out, _, err := benchCLI(t, "--backend", "sqlite", "--dsn", dsn, "--rows", "400", "--workers", "2", "--batch", "20",
		"--variants", "naive, raw", "--budget", "0", "--quiet")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	// The variants run in their fixed order, whatever the order named:
	// the first block is the raw baseline's, the table has both.
	for _, want := range []string{"variant:         raw database/sql", "rows:            400", "duplicates:      0", "lost:            0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^ +naive +400 +\d+ .* 0 +0 +\d\.\d{3}x raw database/sql *$`).MatchString(out) {
		t.Errorf("no naive row with its ratio to raw database/sql:\n%s", out)
	}
	if regexp.MustCompile(`(?m)^ +library +\d`).MatchString(out) {
		t.Errorf("the library ran though not selected:\n%s", out)
	}
	if left := benchTables(t, dsn); len(left) != 0 {
		t.Fatalf("tables left behind: %v", left)
	}
}

func TestBenchCommandRejectsUnknownVariant(t *testing.T) {
	path, dsn := sqliteFile(t)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	_, _, err := benchCLI(t, "--backend", "sqlite", "--dsn", dsn, "--rows", "10", "--workers", "1", "--batch", "1",
		"--variants", "library,slow", "--quiet", "--json", jsonPath)
	if !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
	for _, want := range []string{"--variants", `"slow"`, strings.Join(bench.VariantNames(), ", ")} {
		if !strings.Contains(cli.ErrorText(err), want) {
			t.Errorf("error %q lacks %q", cli.ErrorText(err), want)
		}
	}
	// Checked before anything is opened: no database file, no JSON file.
	for _, p := range []string{path, jsonPath} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a rejected run (%v)", p, err)
		}
	}
	if _, _, err := benchCLI(t, "--backend", "memory", "--rows", "10", "--workers", "1", "--batch", "1",
		"--variants", "library", "--budget", "-1s", "--quiet"); !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--budget") {
		t.Fatalf("negative budget: got %v", err)
	}
}

func TestBenchCommandBudgetStopsVariant(t *testing.T) {
	_, dsn := sqliteFile(t)
	out, _, err := benchCLI(t, "--backend", "sqlite", "--dsn", dsn, "--rows", "3000", "--workers", "2", "--batch", "5",
		"--variants", "naive", "--budget", "1ms", "--quiet")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`partial: +stopped at the 1ms budget: (\d+) of 3000 rows claimed, (\d+) left`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no partial marker:\n%s", out)
	}
	claimed, _ := strconv.Atoi(m[1])
	left, _ := strconv.Atoi(m[2])
	if claimed == 0 || claimed >= 3000 || claimed+left != 3000 {
		t.Fatalf("%d claimed and %d left of 3000", claimed, left)
	}
	for _, want := range []string{"duplicates:      0", "lost:            0", "note: naive is partial"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if left := benchTables(t, dsn); len(left) != 0 {
		t.Fatalf("tables left behind after a partial run: %v", left)
	}
}

func TestBenchCommandJSON(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	out, _, err := benchCLI(t, "--backend", "sqlite", "--rows", "500", "--workers", "2", "--batch", "25",
		"--variants", "library,raw,naive", "--budget", "0", "--quiet", "--json", jsonPath)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema  int `json:"schema"`
		Machine struct {
			CPUs      int    `json:"cpus"`
			OS        string `json:"goos"`
			Arch      string `json:"goarch"`
			GoVersion string `json:"go_version"`
		} `json:"machine"`
		Backend    string `json:"backend"`
		Server     string `json:"server"`
		Parameters struct {
			Rows          int64    `json:"rows"`
			Workers       int      `json:"workers"`
			Batch         int      `json:"batch"`
			Repeat        int      `json:"repeat"`
			BudgetSeconds *float64 `json:"budget_seconds"`
			Variants      []string `json:"variants"`
		} `json:"parameters"`
		Variants []struct {
			Name               string   `json:"name"`
			RowsPerSec         float64  `json:"rows_per_sec"`
			WallSeconds        float64  `json:"wall_seconds"`
			Partial            *bool    `json:"partial"`
			RowsClaimed        int64    `json:"rows_claimed"`
			RowsTotal          int64    `json:"rows_total"`
			RoundTripsPerClaim *float64 `json:"round_trips_per_claim"`
			CPUPerClaimMicros  *float64 `json:"cpu_per_claim_us"`
			Duplicates         *int64   `json:"duplicates"`
			Lost               *int64   `json:"lost"`
			Ratio              *float64 `json:"ratio"`
			RatioTo            string   `json:"ratio_to"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	m, p := doc.Machine, doc.Parameters
	if doc.Schema != bench.JSONSchema || m.CPUs != runtime.NumCPU() || m.OS != runtime.GOOS || m.Arch != runtime.GOARCH || m.GoVersion != runtime.Version() {
		t.Fatalf("schema %d, machine %+v", doc.Schema, m)
	}
	if doc.Backend != "sqlite" || !strings.HasPrefix(doc.Server, "SQLite 3.") ||
		p.Rows != 500 || p.Workers != 2 || p.Batch != 25 || p.Repeat != 1 || p.BudgetSeconds == nil || *p.BudgetSeconds != 0 ||
		strings.Join(p.Variants, ",") != "library,raw,naive" {
		t.Fatalf("backend %q, server %q, parameters %+v", doc.Backend, doc.Server, p)
	}
	names := []string{bench.VariantLibrary, bench.VariantRawSQL, bench.VariantNaive}
	if len(doc.Variants) != len(names) {
		t.Fatalf("%d variants, want %v:\n%s", len(doc.Variants), names, data)
	}
	for i, v := range doc.Variants {
		if v.Name != names[i] || v.RowsPerSec <= 0 || v.WallSeconds <= 0 || v.Partial == nil || *v.Partial ||
			v.RowsClaimed != 500 || v.RowsTotal != 500 || v.Duplicates == nil || *v.Duplicates != 0 || v.Lost == nil || *v.Lost != 0 {
			t.Fatalf("variant %d: %+v", i, v)
		}
		// Every claim is at least one round trip; the naive loop is one
		// more per row.
		if v.RoundTripsPerClaim == nil || *v.RoundTripsPerClaim < 1 {
			t.Fatalf("%s: round trips per claim %v", v.Name, v.RoundTripsPerClaim)
		}
		if runtime.GOOS == "linux" && (v.CPUPerClaimMicros == nil || *v.CPUPerClaimMicros <= 0) {
			t.Fatalf("%s: cpu per claim %v", v.Name, v.CPUPerClaimMicros)
		}
		isRaw := v.Name == bench.VariantRawSQL
		if isRaw != (v.Ratio == nil) || (!isRaw && (*v.Ratio <= 0 || v.RatioTo != bench.VariantRawSQL)) {
			t.Fatalf("%s: ratio %v to %q", v.Name, v.Ratio, v.RatioTo)
		}
	}
	// The ratio is the rows/s of the variant over those of raw.
	if got, want := *doc.Variants[0].Ratio, doc.Variants[0].RowsPerSec/doc.Variants[1].RowsPerSec; got < want*0.999 || got > want*1.001 {
		t.Fatalf("library ratio %v, rows/s say %v", got, want)
	}
}
