package esstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/adapters/esstore/internal/fakees"
	"github.com/claimstore/claimstore/dao"
)

// Task is a work item; the same GORM model works with the SQL adapter.
type Task struct {
	ID          int64  `gorm:"primaryKey"`
	Status      string `gorm:"index"`
	LockedBy    *string
	LockedUntil *time.Time
}

// A worker claims up to ten pending tasks with a five-minute lease. A lost
// race is reported as dao.ErrConflict together with the rows claimed before
// it: the caller keeps those and simply claims again.
func Example() {
	// This example runs against the package's in-process test server; a
	// program passes its cluster's address, e.g. http://127.0.0.1:9200.
	srv := fakees.New(fakees.Scripts{FieldCompare: esstore.FieldCompareScript, Write: esstore.WriteScript})
	defer srv.Close()
	client, err := elasticsearch.NewClient(elasticsearch.Config{
		Addresses:    []string{srv.URL()},
		DisableRetry: true, // a retried claim write could report a row it claimed as a conflict
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	store, err := esstore.New[Task](client, esstore.WithIndex("tasks"))
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx); err != nil {
		panic(err)
	}
	if err := store.Create(ctx, &Task{Status: "pending"}, &Task{Status: "pending"}, &Task{Status: "done"}); err != nil {
		panic(err)
	}

	now := time.Now().UTC()
	claimed, err := store.Claim(ctx, dao.ClaimRequest{
		Where:   dao.Or(dao.Eq("status", "pending"), dao.And(dao.Eq("status", "running"), dao.Lt("locked_until", now))),
		Set:     dao.Set{"status": "running", "locked_by": "worker-1", "locked_until": now.Add(5 * time.Minute)},
		Limit:   10,
		OrderBy: []dao.Order{dao.Asc("id")},
	})
	if errors.Is(err, dao.ErrConflict) {
		err = nil // another worker won a row; the rows in claimed are ours
	}
	if err != nil {
		panic(err)
	}
	for _, t := range claimed {
		fmt.Println(t.ID, t.Status, *t.LockedBy)
	}
	// Output:
	// 1 running worker-1
	// 2 running worker-1
}
