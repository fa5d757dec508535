package cli

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestLeaderStatus runs `claimstore leader status` on an SQLite file
// whose lease table holds a live lease and a released one.
func TestLeaderStatus(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	leases, err := sqlstore.NewLeases(db, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, held, err := leases.AcquireLease(ctx, "cron", "host-a", time.Minute); err != nil || !held {
		t.Fatal(held, err)
	}
	if _, held, err := leases.AcquireLease(ctx, "sweeper", "host-b", time.Minute); err != nil || !held {
		t.Fatal(held, err)
	}
	if ok, err := leases.ReleaseLease(ctx, "sweeper", "host-b", 1); err != nil || !ok {
		t.Fatal(ok, err)
	}

	out, _, err := execCLI(ctx, "leader", "status", "--backend", "sqlite", "--dsn", path, "--name", "")
	if err != nil {
		t.Fatalf("leader status: %v", err)
	}
	for _, re := range []string{`(?m)^cron\s+host-a\s+1\s+\S+\s+((59|60)\.\d+s|1m0s)$`, `(?m)^sweeper\s+host-b\s+1\s+\S+\s+expired$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("leader status output does not match %s:\n%s", re, out)
		}
	}
	out, _, err = execCLI(ctx, "leader", "status", "--backend", "sqlite", "--dsn", path, "--name", "cron")
	if err != nil || regexp.MustCompile(`sweeper`).MatchString(out) || !regexp.MustCompile(`(?m)^cron\s+host-a`).MatchString(out) {
		t.Errorf("leader status --name cron = %q, %v; want the cron lease alone", out, err)
	}
	if _, _, err := execCLI(ctx, "leader", "status", "--backend", "sqlite", "--dsn", path, "--name", "nobody"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("leader status of an unknown election: err = %v, want ErrNotFound", err)
	}
	if _, _, err := execCLI(ctx, "leader", "status", "--backend", "memory", "--dsn", "", "--name", ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("leader status on memory: err = %v, want ErrInvalidArgument", err)
	}
}
