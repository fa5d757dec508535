package outboxbench_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/tools/internal/bench/outboxbench"
)

// Every variant carries every message into the stream once, and the
// report gives their rows and the ratios.
func TestRun(t *testing.T) {
	for _, b := range []struct {
		backend, dsn string
		n            int
	}{{"sqlite", "", 400}, {"postgres", testdb.PostgresDSN(), 1500}} {
		t.Run(b.backend, func(t *testing.T) {
			if b.backend == "postgres" {
				testdb.Postgres(t)
			}
			rep, err := outboxbench.Run(context.Background(), outboxbench.Options{
				Backend: b.backend, DSN: b.dsn, Messages: b.n, Payload: 128, Relays: 2, Workers: 2, Batch: 100, Lease: 30 * time.Second,
				Writers: 2, WriteBatch: 250, Window: 3,
				Variants: []string{outboxbench.VariantBatched, outboxbench.VariantPerMessage, outboxbench.VariantEarlier},
				Repeat:   1, Analyze: 2 * time.Second, Timeout: 2 * time.Minute,
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				t.Fatalf("bench outbox: %v", err)
			}
			var buf bytes.Buffer
			if err := rep.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			// Each variant: every message in the stream once, no duplicates.
			n := strconv.Itoa(b.n)
			row := regexp.MustCompile(`(?m)^\s*(batched|per-message|earlier)\s+` + n + `\s+\S+\s+\S+\s+\d+\s+(\d+)\s+` + n + `\s+` + n + `\s+0\s*$`)
			rows := row.FindAllStringSubmatch(out, -1)
			if len(rows) != 3 {
				t.Fatalf("report rows:\n%s", out)
			}
			if !strings.Contains(out, "ratio batched / per-message marks:") || !strings.Contains(out, "ratio batched / earlier relay and table:") {
				t.Fatalf("no ratio:\n%s", out)
			}
			// The per-message variant sends at least one UPDATE per message.
			if rows[1][1] != "per-message" || len(rows[1][2]) < len(n) {
				t.Fatalf("per-message UPDATEs %q:\n%s", rows[1][2], out)
			}
			// On PostgreSQL the claims of the batched variant are HOT
			// updates, those of the earlier table layout are not.
			if b.backend == "postgres" {
				if r := rep.Results[0]; !r.HOTKnown || r.HOTUpdates == 0 {
					t.Errorf("batched: HOT updates %d of %d (known %v)", r.HOTUpdates, r.RowUpdates, r.HOTKnown)
				}
				if r := rep.Results[2]; !r.HOTKnown || r.HOTUpdates != 0 || r.RowUpdates < int64(b.n) {
					t.Errorf("earlier: HOT updates %d of %d (known %v)", r.HOTUpdates, r.RowUpdates, r.HOTKnown)
				}
			}
			if got := rep.Results[1].Updates; got < int64(b.n) {
				t.Errorf("per-message variant sent %d UPDATEs for %d messages", got, b.n)
			}
		})
	}
}
