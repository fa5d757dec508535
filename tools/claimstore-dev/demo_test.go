package main

import (
	"context"
	"strings"
	"testing"
)

// The command runs the demo with its flags and prints the verdict.
func TestDemoCommand(t *testing.T) {
	out, errOut, err := execCLI(context.Background(), "--backend", "memory", "--dsn", "", "--log-level", "warn",
		"demo", "--messages", "120", "--relays", "2", "--loops", "2", "--batch", "10", "--writers", "2", "--per-tx", "4",
		"--nats-url", "", "--table", "", "--quiet=false")
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{
		"demo: 120 messages, 2 writers, 2 relays x 2 batches of 10; backend memory",
		"stream: 120 messages, 120 distinct message ids, 0 duplicates, 0 lost", "verdict: OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "written") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
}

func TestDemoBadFlags(t *testing.T) {
	if _, _, err := execCLI(context.Background(), "--backend", "sqlite", "--dsn", "", "demo", "--messages", "0", "--nats-url", "", "--table", ""); err == nil {
		t.Fatal("demo with --messages 0 succeeded")
	}
	if _, _, err := execCLI(context.Background(), "--backend", "sqlite", "--dsn", "", "demo", "--messages", "10", "--table", "no such;table", "--nats-url", ""); err == nil {
		t.Fatal("demo with a bad table name succeeded")
	}
}
