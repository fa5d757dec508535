package dao_test

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
)

// Task is a GORM model; the column names of its schema (id, state, priority,
// locked_by, locked_until) are the field names criteria use.
type Task struct {
	ID          int64
	State       string
	Priority    int
	LockedBy    *string
	LockedUntil *time.Time
}

// A worker claims up to two ready tasks, highest priority first, and holds a
// five-minute lease on them. Any store works the same way; the in-memory one
// keeps the example self-contained.
func ExampleStore_Claim() {
	ctx := context.Background()
	store, err := memstore.New[Task]()
	if err != nil {
		panic(err)
	}
	_ = store.Create(ctx, &Task{State: "ready", Priority: 1}, &Task{State: "ready", Priority: 5},
		&Task{State: "done", Priority: 9}, &Task{State: "ready", Priority: 3})

	now := time.Now()
	tasks, err := store.Claim(ctx, dao.ClaimRequest{
		Where: dao.Or(
			dao.Eq("state", "ready"),
			dao.And(dao.Eq("state", "running"), dao.Lt("locked_until", now)), // expired lease
		),
		Set:     dao.Set{"state": "running", "locked_by": "worker-1", "locked_until": now.Add(5 * time.Minute)},
		Limit:   2,
		OrderBy: []dao.Order{dao.Desc("priority")},
	})
	if err != nil {
		panic(err)
	}
	for _, t := range tasks {
		fmt.Println(t.ID, t.State, t.Priority, *t.LockedBy)
	}
	// Output:
	// 2 running 5 worker-1
	// 4 running 3 worker-1
}

// Bad input never reaches the database: it is reported as ErrInvalidArgument.
func ExampleTable_Find_invalidArgument() {
	ctx := context.Background()
	store, err := memstore.New[Task]()
	if err != nil {
		panic(err)
	}
	_, err = store.Find(ctx, dao.Query{Where: dao.Eq("priority", "high")})
	fmt.Println(err)
	_, err = store.Find(ctx, dao.Query{Where: dao.Eq("owner; DROP TABLE tasks", 1)})
	fmt.Println(err)
	// Output:
	// claimstore: find: invalid argument: field "priority" of type int: value of type string does not fit
	// claimstore: find: invalid argument: unknown field "owner; DROP TABLE tasks" for Task
}
