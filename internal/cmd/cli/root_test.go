package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/outbox"
)

// flagValue returns the value of flag name as cmd (parsed or not) sees
// it, its root's persistent flags included.
func flagValue(t *testing.T, cmd *cobra.Command, name string) string {
	t.Helper()
	f := cmd.Flags().Lookup(name)
	if f == nil {
		f = cmd.Root().PersistentFlags().Lookup(name)
	}
	if f == nil {
		t.Fatalf("%s: no flag --%s", cmd.CommandPath(), name)
	}
	return f.Value.String()
}

// findCmd returns the command of root at path.
func findCmd(t *testing.T, root *cobra.Command, path ...string) *cobra.Command {
	t.Helper()
	c, _, err := root.Find(path)
	if err != nil || c == root {
		t.Fatalf("%v: %v", path, err)
	}
	return c
}

// Two trees built by NewRoot share no flag: flags parsed into one leave
// the other's at their defaults, and a run of one does not see what a run
// of the other set.
func TestNewRootTreesIndependent(t *testing.T) {
	a, b := NewRoot(), NewRoot()
	if a == b {
		t.Error("NewRoot returned the same tree twice")
	}
	relayA, relayB := findCmd(t, a, "relay"), findCmd(t, b, "relay")
	if relayA == relayB {
		t.Error("the two trees share their relay command")
	}
	if err := relayA.ParseFlags([]string{"--backend", "postgres", "--dsn", "host=a", "--log-level", "debug", "--batch", "7", "--table", "a_outbox"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ flag, a, b string }{
		{"backend", "postgres", "sqlite"},
		{"dsn", "host=a", ""},
		{"log-level", "debug", "info"},
		{"batch", "7", strconv.Itoa(outbox.DefaultBatchSize)},
		{"table", "a_outbox", outbox.DefaultTable},
	} {
		if got := flagValue(t, relayA, tc.flag); got != tc.a {
			t.Errorf("tree a: --%s = %q after parsing, want %q", tc.flag, got, tc.a)
		}
		if got := flagValue(t, relayB, tc.flag); got != tc.b {
			t.Errorf("tree b: --%s = %q, want its default %q", tc.flag, got, tc.b)
		}
	}

	// Runs: tree a refuses the memory backend; tree b, on its default
	// backend (sqlite), complains about the missing file instead.
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing.db")
	if _, _, err := clitest.Run(ctx, a, "schedule", "list", "--backend", "memory"); !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("tree a, --backend memory: %v; want the memory backend refused", err)
	}
	_, _, err := clitest.Run(ctx, b, "schedule", "list", "--dsn", missing)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("tree b, default backend: %v; want the SQLite file %s missing", err, missing)
	}
}

// One tree runs twice in a process, with the same result each time.
func TestNewRootRunsTwice(t *testing.T) {
	root := NewRoot()
	ctx := context.Background()
	var help [2]string
	for i := range help {
		out, _, err := clitest.Run(ctx, root, "--help")
		if err != nil {
			t.Fatalf("run %d: --help: %v", i+1, err)
		}
		help[i] = out
	}
	if !strings.Contains(help[0], "Usage:") || !strings.Contains(help[0], "relay") {
		t.Errorf("--help printed:\n%s", help[0])
	}
	if help[0] != help[1] {
		t.Errorf("--help printed differently the second time:\n%s\nthen:\n%s", help[0], help[1])
	}
	for i := 0; i < 2; i++ {
		out, _, err := clitest.Run(ctx, root, "outbox", "status", "--list", "nope")
		if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--list") {
			t.Errorf("run %d: outbox status --list nope: %v; want ErrInvalidArgument naming --list", i+1, err)
		}
		if out != "" {
			t.Errorf("run %d printed:\n%s", i+1, out)
		}
	}
}

// GlobalFlags reads the shared flags of the tree of the command it is
// given, and of that tree only.
func TestGlobalFlags(t *testing.T) {
	a, b := NewRoot(), NewRoot()
	statusA := findCmd(t, a, "outbox", "status")
	if err := statusA.ParseFlags([]string{"--backend", "mysql", "--dsn", "u@tcp(h)/d", "--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	if got, want := GlobalFlags(statusA), (Globals{Backend: "mysql", DSN: "u@tcp(h)/d", LogLevel: "warn"}); got != want {
		t.Errorf("GlobalFlags(tree a) = %+v, want %+v", got, want)
	}
	if got, want := GlobalFlags(findCmd(t, b, "outbox", "status")), (Globals{Backend: "sqlite", LogLevel: "info"}); got != want {
		t.Errorf("GlobalFlags(tree b) = %+v, want the defaults %+v", got, want)
	}
	if got := GlobalFlags(&cobra.Command{Use: "other"}); got != (Globals{}) {
		t.Errorf("GlobalFlags(a tree without the flags) = %+v, want the zero Globals", got)
	}
}
