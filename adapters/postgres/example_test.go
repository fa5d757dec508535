package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/readme"
	"github.com/claimstore/claimstore/internal/testdb"
)

// Job is the model of the README's first example.
type Job struct {
	ID          int64
	Status      string `gorm:"index"`
	Priority    int
	LockedBy    *string
	LockedUntil *time.Time
}

// claimJobs is the README's first example: open, migrate, claim.
func claimJobs(ctx context.Context, dsn string) ([]Job, error) {
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return nil, err // errors.Is(err, dao.ErrUnavailable) when the server is down
	}
	jobs, err := postgres.New[Job](db)
	if err != nil {
		return nil, err
	}
	if err := jobs.Migrate(ctx); err != nil {
		return nil, err
	}

	now := time.Now()
	claimed, err := jobs.Claim(ctx, dao.ClaimRequest{
		Where: dao.Or(dao.Eq("status", "ready"), // or a lease that expired
			dao.And(dao.Eq("status", "running"), dao.Lt("locked_until", now))),
		Set:     dao.Set{"status": "running", "locked_by": "worker-1", "locked_until": now.Add(time.Minute)},
		Limit:   100,
		OrderBy: []dao.Order{dao.Desc("priority")},
	})
	// Even with an error, claimed holds the rows this call committed:
	// process them (or let their lease expire).
	return claimed, err
}

// Claiming up to 100 ready jobs on PostgreSQL (compiled, not run: it needs
// a server).
func Example() {
	ctx := context.Background()
	claimed, err := claimJobs(ctx, "postgres://postgres@127.0.0.1:5432/test")
	fmt.Println(len(claimed), "jobs claimed")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// The README shows claimJobs and Job exactly as this file defines them.
func TestREADMEFirstSnippet(t *testing.T) {
	readme.Holds(t, "../../README.md", "example_test.go", "type Job struct", "func claimJobs(")
}

// TestClaimJobs runs the README's first example against the test database:
// the first call creates the jobs table, the second claims the ready jobs
// inserted meanwhile (and not the done one) and marks them running. The
// table is dropped afterwards; a database that already has one is left
// alone.
func TestClaimJobs(t *testing.T) {
	db := testdb.Postgres(t)
	if db.Migrator().HasTable(&Job{}) {
		t.Skip("the test database already has a jobs table; the example would claim its rows")
	}
	t.Cleanup(func() {
		if err := db.Migrator().DropTable(&Job{}); err != nil {
			t.Errorf("drop jobs: %v", err)
		}
	})
	ctx := context.Background()
	if got, err := claimJobs(ctx, testdb.PostgresDSN()); err != nil || len(got) != 0 {
		t.Fatalf("first call on a new table = %d jobs, %v; want none and no error", len(got), err)
	}
	seed := []Job{{Status: "ready", Priority: 1}, {Status: "ready", Priority: 3}, {Status: "done", Priority: 9}}
	if err := db.Create(&seed).Error; err != nil {
		t.Fatal(err)
	}
	got, err := claimJobs(ctx, testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != seed[1].ID || got[1].ID != seed[0].ID {
		t.Fatalf("claimed %+v; want the two ready jobs, highest priority first", got)
	}
	for _, j := range got {
		if j.Status != "running" || j.LockedBy == nil || *j.LockedBy != "worker-1" || j.LockedUntil == nil {
			t.Errorf("claimed job %+v; want status running, locked by worker-1 with a lease", j)
		}
	}
}
