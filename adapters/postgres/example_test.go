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
