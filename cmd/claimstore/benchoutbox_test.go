package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/internal/testdb"
)

func TestBenchOutbox(t *testing.T) {
	for _, b := range []struct{ backend, dsn, n string }{{"sqlite", "", "400"}, {"postgres", testdb.PostgresDSN(), "1500"}} {
		t.Run(b.backend, func(t *testing.T) {
			if b.backend == "postgres" {
				testdb.Postgres(t)
			}
			out, errOut, err := execCLI(context.Background(), "--backend", b.backend, "--dsn", b.dsn, "--log-level", "warn",
				"bench", "outbox", "--messages", b.n, "--relays", "2", "--workers", "2", "--batch", "100", "--writers", "2",
				"--write-batch", "250", "--nats-url", "", "--variants", "batched,per-message", "--quiet")
			if err != nil {
				t.Fatalf("bench outbox: %v\n%s\n%s", err, out, errOut)
			}
			// Each variant: every message in the stream once, no duplicates.
			n := b.n
			row := regexp.MustCompile(`(?m)^\s*(batched|per-message)\s+` + n + `\s+\S+\s+\S+\s+\d+\s+(\d+)\s+` + n + `\s+` + n + `\s+0\s*$`)
			rows := row.FindAllStringSubmatch(out, -1)
			if len(rows) != 2 {
				t.Fatalf("report rows:\n%s", out)
			}
			if !strings.Contains(out, "ratio batched / per-message marks:") {
				t.Fatalf("no ratio:\n%s", out)
			}
			// The per-message variant sends at least one UPDATE per message.
			if rows[1][1] != "per-message" || len(rows[1][2]) < len(n) {
				t.Fatalf("per-message UPDATEs %q:\n%s", rows[1][2], out)
			}
		})
	}
}
