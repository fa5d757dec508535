package cli

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// galera status refuses a backend that cannot be a Galera node before it
// opens anything, and says so of a lone MariaDB server. The cluster's
// own case runs in tools/internal/hatest (TestGaleraClusterState).
func TestGaleraStatusOffCluster(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"galera", "status", "--backend", "sqlite", "--dsn", none},
		{"galera", "status", "--backend", "postgres"},
	} {
		if _, _, err := execFresh(t, args...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: %v, want dao.ErrInvalidArgument", args, err)
		}
	}
	testdb.MySQL(t) // the server runs, or the test is skipped (or failed in CI) with how to start it
	out, _, err := execFresh(t, "galera", "status", "--backend", "mariadb", "--dsn", testdb.MySQLDSN())
	if !errors.Is(err, dialects.ErrNotGalera) || out != "" {
		t.Errorf("galera status on a lone MariaDB server: %q, %v; want no output and dialects.ErrNotGalera", out, err)
	}
}
