package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs the root command with args and returns stdout, stderr and
// the error. Flags keep their values between runs, so every test passes
// the flags it depends on.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	rootCmd.SetArgs(args)
	t.Cleanup(func() { rootCmd.SetArgs(nil); rootCmd.SetOut(nil); rootCmd.SetErr(nil) })
	err := rootCmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestBenchCommandSQLite(t *testing.T) {
	out, _, err := runCLI(t, "bench", "--backend", "sqlite", "--dsn", "", "--rows", "600", "--workers", "3", "--batch", "25", "--baseline", "--quiet")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, want := range []string{
		"backend:         sqlite (SQLite 3.", "rows:            600", "workers:         3", "batch:           25",
		"round trips:", "duplicates:      0", "lost:            0", "raw database/sql", "naive",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchCommandMemoryProgress(t *testing.T) {
	out, _, err := runCLI(t, "bench", "--backend", "memory", "--dsn", "", "--rows", "300", "--workers", "2", "--batch", "10", "--baseline=false", "--quiet=false")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if !strings.Contains(out, "backend:         memory") || !strings.Contains(out, "lost:            0") {
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
