package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
)

// execCLI runs a command tree of its own (newRoot), every flag at its
// default, with args under ctx and returns stdout, stderr and the error
// (clitest.Run).
func execCLI(ctx context.Context, args ...string) (string, string, error) {
	return clitest.Run(ctx, newRoot(), args...)
}

// execFresh runs a command tree of its own like execCLI and stops it
// after 30 s.
func execFresh(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return clitest.RunFresh(t, newRoot(), 30*time.Second, args...)
}

// devCommands are the commands this tool adds to the operator's, in root.
func devCommands(t *testing.T, root *cobra.Command) []*cobra.Command {
	t.Helper()
	var cmds []*cobra.Command
	for _, name := range []string{"bench", "demo", "soak"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c == root {
			t.Fatalf("command %s: %v", name, err)
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// Every numeric and duration flag of the developers' commands is checked
// before the command acts, and the error names the flag.
func TestNumericFlagsNamed(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none.db")
	nats := clitest.ClosedNATS(t)
	base := map[string][]string{
		"claimstore-dev bench":          {"--backend", "memory", "--rows", "10", "--workers", "1", "--batch", "1", "--quiet"},
		"claimstore-dev bench dispatch": {"--backend", "sqlite", "--dsn", none, "--quiet"},
		"claimstore-dev bench outbox":   {"--backend", "memory", "--messages", "10", "--relays", "1", "--loops", "1", "--batch", "1", "--writers", "1", "--write-batch", "5", "--quiet", "--nats-url", nats},
		"claimstore-dev bench log":      {"--backend", "sqlite", "--dsn", none, "--messages", "10", "--quiet", "--nats-url", nats},
		"claimstore-dev demo":           {"--backend", "memory", "--messages", "10", "--relays", "1", "--loops", "1", "--batch", "1", "--writers", "1", "--quiet", "--nats-url", nats},
		"claimstore-dev demo dispatch":  {"--backend", "sqlite"},
		"claimstore-dev soak":           {"--backend", "postgres"},
		"claimstore-dev soak child":     {"--dir", dir, "--slot", "w1"},
	}
	root := newRoot()
	if checked := clitest.CheckFlagRanges(t, root, devCommands(t, root), base); checked < 20 {
		t.Errorf("checked %d flags; the walk missed some", checked)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a command created %s before checking its flags: %v", none, err)
	}
}

// No flag's help shows its default twice.
func TestHelpDefaultsOnce(t *testing.T) {
	for _, c := range devCommands(t, newRoot()) {
		clitest.CheckHelpDefaults(t, c)
	}
}
