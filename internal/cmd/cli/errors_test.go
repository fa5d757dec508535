package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// execFresh runs a command tree of its own like execCLI and stops it after
// 30 s: none of these runs should take that long.
func execFresh(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return clitest.RunFresh(t, NewRoot(), 30*time.Second, args...)
}

func TestErrorTextOnePrefix(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("bench: %w: rows must be >= 1", dao.ErrInvalidArgument), "claimstore: bench: invalid argument: rows must be >= 1"},
		{fmt.Errorf("bench: library: %w", fmt.Errorf("bench: load: %w", dao.ErrBusy)), "claimstore: bench: library: load: database busy"},
		{fmt.Errorf("outbox: add: %w", fmt.Errorf("sqlstore: create: %w: x", dao.ErrDuplicate)), "claimstore: outbox: add: sqlstore: create: duplicate key: x"},
		{errors.New("ERROR: relation \"x\" does not exist"), "claimstore: ERROR: relation \"x\" does not exist"},
	} {
		if got := ErrorText(tc.err); got != tc.want {
			t.Errorf("ErrorText(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
	// As the command prints them.
	for _, args := range [][]string{
		{"schedule", "list", "--backend", "oracle"},
		{"dispatch", "run", "--backend", "sqlite", "--dsn", filepath.Join(t.TempDir(), "x.db"), "--concurrency", "0"},
		{"relay", "--backend", "sqlite", "--dsn", filepath.Join(t.TempDir(), "x.db"), "--lease", "0s"},
		{"outbox", "purge", "--backend", "sqlite", "--dsn", filepath.Join(t.TempDir(), "x.db"), "--status", "pending"},
	} {
		_, _, err := execFresh(t, args...)
		if err == nil {
			t.Fatalf("%v succeeded", args)
		}
		if got := ErrorText(err); strings.Count(got, "claimstore:") != 1 {
			t.Errorf("%v prints %q", args, got)
		}
	}
}

// Every numeric and duration flag is checked before the command acts, and
// the error names the flag.
func TestNumericFlagsNamed(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.db")
	nats := clitest.ClosedNATS(t)
	base := map[string][]string{
		"claimstore relay":          {"--backend", "sqlite", "--dsn", none, "--nats-url", nats},
		"claimstore outbox status":  {"--backend", "sqlite", "--dsn", none},
		"claimstore outbox purge":   {"--backend", "sqlite", "--dsn", none},
		"claimstore outbox requeue": {"--backend", "sqlite", "--dsn", none, "--all"},
		"claimstore dispatch run":   {"--backend", "sqlite", "--dsn", none, "--http", ""},
		"claimstore schedule add":   {"k", "--backend", "sqlite", "--dsn", none},
		"claimstore schedule list":  {"--backend", "sqlite", "--dsn", none},
		"claimstore ui":             {"--backend", "sqlite", "--dsn", none},
		"claimstore jobs list":      {"--backend", "sqlite", "--dsn", none},
		"claimstore jobs sequences": {"--backend", "sqlite", "--dsn", none},
		"claimstore jobs limits":    {"--backend", "sqlite", "--dsn", none},
		"claimstore outbox log":     {"--backend", "sqlite", "--dsn", none},
	}
	root := NewRoot()
	checked := clitest.CheckFlagRanges(t, root, []*cobra.Command{root}, base)
	if checked < 30 {
		t.Errorf("checked %d flags; the walk missed some", checked)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a command created %s before checking its flags: %v", none, err)
	}

	// Upper bounds and pairs.
	relay := base["claimstore relay"]
	for _, tc := range []struct{ flag, args string }{
		{"retry-jitter", "--retry-jitter 2"},
		{"retry-jitter", "--retry-jitter NaN"},
		{"retry-multiplier", "--retry-multiplier 0.5"},
		{"retry-max", "--retry-base 2s --retry-max 1s"},
		{"max-poll-interval", "--poll-interval 1s --max-poll-interval 500ms"},
		{"max-poll-interval", "--poll 1s --max-poll 500ms"}, // the deprecated aliases set the same values
		{"batch", "--batch 0"},
		{"window", "--window 65"},
	} {
		_, _, err := execFresh(t, append(append([]string{"relay"}, relay...), strings.Fields(tc.args)...)...)
		if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--"+tc.flag+" ") {
			t.Errorf("relay %s: %v; want ErrInvalidArgument naming --%s", tc.args, err, tc.flag)
		}
	}
}

// No flag's help shows its default twice.
func TestHelpDefaultsOnce(t *testing.T) { clitest.CheckHelpDefaults(t, NewRoot()) }

// status and purge check their flags before they open anything or print.
func TestOutboxCommandsValidateFirst(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"status", "--list", "nope"},
		{"status", "--limit", "-1"},
		{"purge", "--status", "pending"},
		{"purge", "--batch", "0"},
		{"purge", "--older-than", "-1h"},
		{"purge", "--max-batches", "-1"},
	} {
		out, _, err := execFresh(t, append([]string{"--backend", "sqlite", "--dsn", none, "outbox"}, args...)...)
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: %v, want ErrInvalidArgument", args, err)
		}
		if out != "" {
			t.Errorf("%v printed before failing:\n%s", args, out)
		}
		if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v created %s: %v", args, none, err)
		}
	}
	// A file that does not exist is not created.
	_, _, err := execFresh(t, "--backend", "sqlite", "--dsn", none, "outbox", "status")
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("status on a missing file: %v", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("status created %s: %v", none, err)
	}
}

// A missing message table is named, with the way to create it, on every
// backend and for every command that reads it.
func TestMissingTable(t *testing.T) {
	type target struct{ backend, dsn, table string }
	var targets []target
	sqliteDSN, _ := sqliteOutbox(t, "other_table")
	targets = append(targets, target{"sqlite", sqliteDSN, "no_such_outbox"})
	t.Run("servers", func(t *testing.T) {
		pg := testdb.Postgres(t)
		my := testdb.MySQL(t)
		targets = append(targets,
			target{"postgres", testdb.PostgresDSN(), testdb.Table(t, pg, "cli_missing")},
			target{"mysql", testdb.MySQLDSN(), testdb.Table(t, my, "cli_missing")})
	})
	for _, tg := range targets {
		for _, args := range [][]string{
			{"outbox", "status"},
			{"outbox", "requeue", "--all"},
			{"outbox", "purge"},
			{"relay", "--migrate=false", "--nats-url", ""},
		} {
			if args[0] == "relay" {
				srvURL := clitest.StartNATS(t)
				args[len(args)-1] = srvURL
			}
			all := append(append([]string{"--backend", tg.backend, "--dsn", tg.dsn}, args...), "--table", tg.table)
			_, _, err := execFresh(t, all...)
			var mt *missingTableError
			if !errors.As(err, &mt) {
				t.Errorf("%s %v: %v; want a missing table error", tg.backend, args, err)
				continue
			}
			msg := ErrorText(err)
			for _, want := range []string{`table "` + tg.table + `" does not exist`, tg.backend, "--migrate"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s %v: %q lacks %q", tg.backend, args, msg, want)
				}
			}
			for _, raw := range []string{"SQLSTATE", "1146", "no such table"} {
				if strings.Contains(msg, raw) {
					t.Errorf("%s %v: %q shows the raw error", tg.backend, args, msg)
				}
			}
		}
	}
}

// The relay connects to NATS before it opens the database, so an
// unreachable broker leaves no file and no table behind.
func TestRelayChecksBrokerFirst(t *testing.T) {
	nats := clitest.ClosedNATS(t)
	file := filepath.Join(t.TempDir(), "relay.db")
	_, _, err := execFresh(t, "--backend", "sqlite", "--dsn", file, "relay", "--nats-url", nats)
	if err == nil || !strings.Contains(err.Error(), "NATS") {
		t.Fatalf("relay with NATS down: %v", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("relay touched %s before connecting to NATS: %v", file, err)
	}
	pg := testdb.Postgres(t)
	table := testdb.Table(t, pg, "cli_relay")
	_, _, err = execFresh(t, "--backend", "postgres", "--dsn", testdb.PostgresDSN(), "relay", "--table", table, "--nats-url", nats)
	if err == nil || !strings.Contains(err.Error(), "NATS") {
		t.Fatalf("relay with NATS down: %v", err)
	}
	if pg.Migrator().HasTable(table) {
		t.Errorf("relay created %s before connecting to NATS", table)
	}
}

// The MySQL driver's own log lines go through slog at --log-level, never
// straight to stderr.
func TestMySQLDriverLogsThroughSlog(t *testing.T) {
	// A server that hangs up at once: the driver logs the failed handshake.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dsn := "root@tcp(" + l.Addr().String() + ")/test?timeout=2s"
	_, errOut, err := execFresh(t, "--backend", "mysql", "--dsn", dsn, "--log-level", "warn", "outbox", "status")
	if err == nil {
		t.Fatal("status on a server that hangs up succeeded")
	}
	if !strings.Contains(errOut, `level=WARN msg="mysql driver"`) || strings.Contains(errOut, "[mysql]") {
		t.Errorf("driver logs at warn:\n%s", errOut)
	}
	_, errOut, _ = execFresh(t, "--backend", "mysql", "--dsn", dsn, "--log-level", "error", "outbox", "status")
	if strings.Contains(errOut, "mysql driver") {
		t.Errorf("driver logs at --log-level error:\n%s", errOut)
	}
}
