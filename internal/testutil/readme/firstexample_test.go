package readme_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/claimstore/claimstore/adapters/postgres" // the backend of the PostgreSQL run
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/readme"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// Job is the model of the README's first example.
type Job struct {
	gorm.Model          // ID, CreatedAt, UpdatedAt, DeletedAt
	Status      string  `gorm:"size:16;index"`
	Priority    int     `gorm:"not null"`
	LockedBy    *string `gorm:"size:64"`
	LockedUntil *time.Time
}

// claimJobs is the README's first example: add a job, claim up to 100
// ready ones, mark each claimed job done.
func claimJobs(ctx context.Context, db *gorm.DB) ([]Job, error) {
	jobs, err := sqlstore.New[Job](db)
	if err != nil {
		return nil, err
	}
	if err := jobs.Migrate(ctx); err != nil {
		return nil, err
	}
	// A producer adds work.
	if err := jobs.Create(ctx, &Job{Status: "ready", Priority: 5}); err != nil {
		return nil, err
	}

	// A worker claims up to 100 ready jobs, highest priority first, with a
	// one-minute lease.
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
	for i, job := range claimed {
		// … the work itself …
		// Mark it done, unless the lease expired and another worker took it.
		n, uerr := jobs.Update(ctx, dao.And(dao.Eq("id", job.ID), dao.Eq("locked_by", "worker-1")),
			dao.Set{"status": "done"})
		if uerr != nil {
			return claimed, uerr
		}
		if n == 1 {
			claimed[i].Status = "done"
		}
	}
	return claimed, err
}

// run opens an SQLite file and works through its jobs (on PostgreSQL:
// sqlstore.Open(ctx, "postgres", dsn); MySQL and MariaDB:
// sqlstore.Open(ctx, "mysql", dsn)).
func run(ctx context.Context, path string) error {
	db, err := sqlstore.Open(ctx, "sqlite", path) // WAL, a 5 s busy timeout, BEGIN IMMEDIATE
	if err != nil {
		return err // errors.Is(err, dao.ErrUnavailable) when a server is down
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	done, err := claimJobs(ctx, db)
	fmt.Println(len(done), "jobs done")
	return err
}

// The README's first example on a new SQLite file: it adds one job and
// works through it.
func Example() {
	dir, err := os.MkdirTemp("", "claimstore-readme")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), filepath.Join(dir, "jobs.db")); err != nil {
		fmt.Println(err)
	}
	// Output: 1 jobs done
}

// The README shows Job, claimJobs and run exactly as this file defines
// them.
func TestREADMEFirstSnippet(t *testing.T) {
	readme.Holds(t, "../../../README.md", "firstexample_test.go", "type Job struct", "func claimJobs(", "func run(")
}

// TestClaimJobs runs the README's first example on SQLite and PostgreSQL
// with jobs already queued: the call adds its own ready job, claims the
// ready ones and the running one whose lease expired (not the done one,
// nor the running one with a live lease), highest priority first, and
// marks them done. On PostgreSQL the jobs table is dropped afterwards; a
// database that already has one is left alone.
func TestClaimJobs(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			if db.Migrator().HasTable(&Job{}) {
				t.Skip("the test database already has a jobs table; the example would claim its rows")
			}
			t.Cleanup(func() {
				if err := db.Migrator().DropTable(&Job{}); err != nil {
					t.Errorf("drop jobs: %v", err)
				}
			})
			if err := db.AutoMigrate(&Job{}); err != nil {
				t.Fatal(err)
			}
			past, future, other := time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "worker-2"
			seed := []Job{
				{Status: "ready", Priority: 1},
				{Status: "ready", Priority: 9},
				{Status: "done", Priority: 8},
				{Status: "running", Priority: 7, LockedBy: &other, LockedUntil: &past},
				{Status: "running", Priority: 6, LockedBy: &other, LockedUntil: &future},
			}
			if err := db.Create(&seed).Error; err != nil {
				t.Fatal(err)
			}
			got, err := claimJobs(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			// priorities 9, 7 (expired lease), 5 (added by the call), 1
			if len(got) != 4 || got[0].ID != seed[1].ID || got[1].ID != seed[3].ID || got[2].Priority != 5 || got[3].ID != seed[0].ID {
				t.Fatalf("claimed %+v; want the ready jobs and the expired lease, highest priority first", got)
			}
			for _, j := range got {
				if j.Status != "done" || j.LockedBy == nil || *j.LockedBy != "worker-1" || j.LockedUntil == nil || j.CreatedAt.IsZero() {
					t.Errorf("claimed job %+v; want done, locked by worker-1 with a lease, created_at set", j)
				}
			}
			var rows []Job
			if err := db.Order("id").Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			want := map[uint]string{seed[0].ID: "done", seed[1].ID: "done", seed[2].ID: "done", seed[3].ID: "done", seed[4].ID: "running", got[2].ID: "done"}
			if len(rows) != 6 {
				t.Fatalf("%d rows in jobs; want 6", len(rows))
			}
			for _, r := range rows {
				if r.Status != want[r.ID] {
					t.Errorf("job %d (priority %d) is %q; want %q", r.ID, r.Priority, r.Status, want[r.ID])
				}
			}
			if *rows[4].LockedBy != "worker-2" {
				t.Errorf("the job with a live lease is locked by %q; want worker-2 still", *rows[4].LockedBy)
			}
		})
	}
}
