package cli

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/internal/cmd/dsn"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// Without --dsn and CLAIMSTORE_DSN a command that opens a server refuses
// to start, naming both: the tool never picks a server of its own.
func TestCommandsNeedADSN(t *testing.T) {
	t.Setenv(dsn.Env, "")
	nats := clitest.StartNATS(t)
	for _, backend := range []string{"postgres", "mysql", "sqlite"} {
		for _, args := range [][]string{
			{"outbox", "status"},
			{"outbox", "requeue", "--all"},
			{"outbox", "purge"},
			{"relay", "--nats-url", nats},
			{"schedule", "list"},
			{"schedule", "add", "k", "--in", "1h"},
			{"dispatch", "run", "--http", ""},
			{"leader", "status"},
			{"ui", "--addr", "127.0.0.1:0"},
		} {
			_, _, err := execFresh(t, append(args, "--backend", backend, "--dsn", "")...)
			if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--dsn") || !strings.Contains(err.Error(), dsn.Env) {
				t.Errorf("%s %v without a DSN: %v; want ErrInvalidArgument naming --dsn and %s", backend, args, err, dsn.Env)
			}
		}
	}
}

// CLAIMSTORE_DSN stands in for --dsn.
func TestDSNFromEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	t.Setenv(dsn.Env, path)
	if _, errOut, err := execFresh(t, "schedule", "add", "k", "--in", "1h", "--backend", "sqlite"); err != nil {
		t.Fatalf("add: %v\n%s", err, errOut)
	}
	t.Setenv(dsn.Env, "")
	out, errOut, err := execFresh(t, "schedule", "list", "--backend", "sqlite", "--dsn", path)
	if err != nil || !strings.Contains(out, "k ") {
		t.Fatalf("list: %v\n%s%s", err, out, errOut)
	}

	t.Run("postgres", func(t *testing.T) {
		testdb.Postgres(t) // skips, or fails when required, if the server is down
		t.Setenv(dsn.Env, testdb.PostgresDSN())
		if _, errOut, err := execFresh(t, "leader", "status", "--backend", "postgres", "--table", "claimstore_cli_no_leases"); err == nil || errors.Is(err, dao.ErrInvalidArgument) {
			t.Fatalf("leader status on a missing table: %v\n%s; want the server's answer", err, errOut)
		}
	})
}
