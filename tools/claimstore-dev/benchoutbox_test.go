package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// The command runs the benchmark with its flags, progress on stderr and
// the report on stdout.
func TestBenchOutboxCommand(t *testing.T) {
	out, errOut, err := execCLI(context.Background(), "--backend", "memory", "--dsn", "", "--log-level", "warn",
		"bench", "outbox", "--messages", "300", "--relays", "1", "--loops", "2", "--batch", "50", "--writers", "2",
		"--write-batch", "100", "--window", "3", "--nats-url", "", "--variants", "batched", "--prefill", "--quiet=false")
	if err != nil {
		t.Fatalf("bench outbox: %v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{
		"bench outbox: backend memory, NATS nats://", "(embedded, file storage)",
		"300 messages of 128 bytes per variant; 2 writers x 100 per transaction; 1 relays x 2 workers x a window of 3 batches of 50",
		"all messages written first, then relayed (--prefill); median of 1 run(s) per variant",
		"batched: CPU per message not measured",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^\s*batched\s+300\s.*\s300\s+300\s+0\s*$`).MatchString(out) {
		t.Errorf("no batched row with every message once:\n%s", out)
	}
	if strings.Contains(out, "ratio") {
		t.Errorf("a ratio with one variant:\n%s", out)
	}
	if !strings.Contains(errOut, "bench outbox: variant batched, run 1 of 1") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}
