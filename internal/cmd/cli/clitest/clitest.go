// Package clitest runs a cobra command tree in the tests of the claimstore
// command-line tools (internal/cmd/cli, tools/claimstore-dev): one run at a
// time, with its output captured and every flag back at its default when
// asked, and checks that every numeric flag of a tree is range-checked.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox/natsembed"
)

// mu serialises runs of command trees: a run installs the process's
// default logger on its tree's error output, and the runs of one tree
// share its flags.
var mu sync.Mutex

// Run runs root with args under ctx and returns stdout, stderr and the
// error. A tree's flags keep their values between its runs, so every
// caller passes the flags it depends on, builds a tree for the run, or
// uses [RunFresh].
func Run(ctx context.Context, root *cobra.Command, args ...string) (string, string, error) {
	mu.Lock()
	defer mu.Unlock()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	defer func() { root.SetArgs(nil); root.SetOut(nil); root.SetErr(nil) }()
	// cobra keeps the context a subcommand got on its first run; give every
	// command this run's context.
	var setCtx func(c *cobra.Command)
	setCtx = func(c *cobra.Command) {
		c.SetContext(ctx)
		for _, sub := range c.Commands() {
			setCtx(sub)
		}
	}
	setCtx(root)
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// Fresh sets every flag of root back to its default now and when t ends.
func Fresh(t testing.TB, root *cobra.Command) {
	t.Helper()
	mu.Lock()
	ResetFlags(root)
	mu.Unlock()
	t.Cleanup(func() { mu.Lock(); ResetFlags(root); mu.Unlock() })
}

// RunFresh runs root like [Run], with every flag at its default before and
// after ([Fresh]), and stops it after timeout.
func RunFresh(t testing.TB, root *cobra.Command, timeout time.Duration, args ...string) (string, string, error) {
	t.Helper()
	Fresh(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return Run(ctx, root, args...)
}

// ResetFlags sets every flag of c and its subcommands back to its default,
// so that a run's flags do not leak into the next one.
func ResetFlags(c *cobra.Command) {
	reset := func(f *pflag.Flag) {
		_ = f.Value.Set(f.DefValue)
		f.Changed = false
	}
	c.Flags().VisitAll(reset)
	c.PersistentFlags().VisitAll(reset)
	for _, sub := range c.Commands() {
		ResetFlags(sub)
	}
}

// StartNATS starts an embedded NATS server for the test and returns its
// URL; it stops when t ends.
func StartNATS(t testing.TB) string {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv.URL()
}

// ClosedNATS returns a NATS URL on a local port nothing listens on.
func ClosedNATS(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + addr
}

// CheckFlagRanges runs every command under cmds (and their subcommands)
// once per int, int64, float64 or duration flag of its own, with the
// arguments base gives for its path (as cobra's CommandPath prints it) and
// the flag at -1 (-1s), and fails t unless the command refuses with
// dao.ErrInvalidArgument naming the flag and prints nothing. A command
// with such a flag but no entry in base fails t: a new command gets its
// arguments here. Deprecated aliases are skipped: they share the value of
// the flag they stand for. It returns the number of flags checked.
func CheckFlagRanges(t *testing.T, root *cobra.Command, cmds []*cobra.Command, base map[string][]string) int {
	t.Helper()
	checked := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Deprecated != "" {
				return // an alias: its value is the flag it stands for, checked under that name
			}
			bad := "-1"
			switch f.Value.Type() {
			case "duration":
				bad = "-1s"
			case "int", "int64", "float64":
			default:
				return
			}
			args, ok := base[c.CommandPath()]
			if !ok {
				t.Errorf("%s: no arguments to test --%s with", c.CommandPath(), f.Name)
				return
			}
			checked++
			path := strings.Fields(c.CommandPath())[1:]
			all := append(append(append([]string{}, path...), args...), "--"+f.Name+"="+bad)
			out, _, err := RunFresh(t, root, 30*time.Second, all...)
			if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--"+f.Name+" ") {
				t.Errorf("%s --%s=%s: %v; want ErrInvalidArgument naming --%s", c.CommandPath(), f.Name, bad, err, f.Name)
			}
			if out != "" {
				t.Errorf("%s --%s=%s printed before failing:\n%s", c.CommandPath(), f.Name, bad, out)
			}
		})
	}
	for _, c := range cmds {
		walk(c)
	}
	return checked
}

// CheckHelpDefaults fails t for each flag under cmd whose help shows its
// default twice (a "(default …)" in the usage text and pflag's own).
func CheckHelpDefaults(t *testing.T, cmd *cobra.Command) {
	t.Helper()
	for _, line := range strings.Split(cmd.LocalFlags().FlagUsages(), "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("%s: %s", cmd.CommandPath(), strings.TrimSpace(line))
		}
	}
	for _, sub := range cmd.Commands() {
		CheckHelpDefaults(t, sub)
	}
}
