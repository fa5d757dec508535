package coord_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/internal/testutil/readme"
)

// elected receives the leader of the snippet's run in the test.
var elected = make(chan coord.Leader, 1)

// sweepUntil stands for the leader-only work of docs/leader-election.md.
func sweepUntil(ctx context.Context, l coord.Leader) {
	elected <- l
	<-ctx.Done()
}

// campaign is the first snippet of docs/leader-election.md.
func campaign(ctx context.Context, db *gorm.DB) error {
	leases, err := sqlstore.NewLeases(db, "") // claimstore_leaders
	if err != nil {
		return err
	}
	if err := leases.Migrate(ctx); err != nil {
		return err
	}
	e, err := coord.NewElector(leases, coord.ElectorConfig{
		Name:  "retention-sweeper", // one leadership per name
		Lease: 15 * time.Second,
		OnElected: func(ctx context.Context, l coord.Leader) {
			sweepUntil(ctx, l) // stop when ctx is done
		},
	})
	if err != nil {
		return err
	}
	return e.Run(ctx) // campaigns; resigns when ctx ends
}

// docs/leader-election.md shows campaign exactly as this file defines it,
// and campaign on a new SQLite file is elected in term 1, then resigns
// without error when its context ends.
func TestLeaderElectionDocSnippet(t *testing.T) {
	readme.Holds(t, "../docs/leader-election.md", "docs_snippet_test.go", "func campaign(")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "leader.db")))
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	done := make(chan error, 1)
	go func() { done <- campaign(ctx, db) }()
	select {
	case l := <-elected:
		if l.Term() != 1 {
			t.Errorf("elected in term %d, want 1", l.Term())
		}
	case err := <-done:
		t.Fatalf("campaign returned before an election: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("campaign: %v", err)
	}
}
