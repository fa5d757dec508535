package postgres_test

import (
	"context"
	"fmt"
	"os"
	"time"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm"
)

// Job is the model of the example.
type Job struct {
	gorm.Model
	Status      string  `gorm:"size:16;index"`
	Priority    int     `gorm:"not null"`
	LockedBy    *string `gorm:"size:64"`
	LockedUntil *time.Time
}

// Opening PostgreSQL and claiming up to 100 ready jobs (compiled, not run:
// it needs a server; the README's first example, run on PostgreSQL and
// SQLite by internal/testutil/readme's tests, shows the whole cycle).
func Example() {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors.Is(err, dao.ErrUnavailable) when the server is down
		return
	}
	jobs, err := sqlstore.New[Job](db)
	if err == nil {
		err = jobs.Migrate(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	claimed, err := jobs.Claim(ctx, dao.ClaimRequest{
		Where:   dao.Eq("status", "ready"),
		Set:     dao.Set{"status": "running", "locked_by": "worker-1", "locked_until": time.Now().Add(time.Minute)},
		Limit:   100,
		OrderBy: []dao.Order{dao.Desc("priority")},
	})
	// Even with an error, claimed holds the rows this call committed.
	fmt.Println(len(claimed), "jobs claimed")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
