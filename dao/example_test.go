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

// Metered is a metrics wrapper around a table: it embeds dao.Store for
// the methods every store has, counts the batched writes, and forwards the
// optional interfaces the library's packages assert (here dao.KeyUpdater,
// dao.EachUpdater, dao.TxBinder and dao.TableNamer; a complete wrapper
// forwards each interface of dao/optional.go), so that wrapping the table
// changes nothing but the counts.
type Metered[T any] struct {
	dao.Store[T]
	table      *dao.Table[T]
	KeyUpdates int // calls of UpdateKeys
}

// NewMetered returns t wrapped in a Metered.
func NewMetered[T any](t *dao.Table[T]) *Metered[T] { return &Metered[T]{Store: t, table: t} }

// UpdateKeys counts the call and forwards it: dao.KeyUpdater.
func (m *Metered[T]) UpdateKeys(ctx context.Context, where dao.Criteria, set dao.Set) ([]any, error) {
	m.KeyUpdates++
	return m.table.UpdateKeys(ctx, where, set)
}

// UpdateEach forwards the call: dao.EachUpdater.
func (m *Metered[T]) UpdateEach(ctx context.Context, match []string, where dao.Criteria, common dao.Set, rows []dao.RowSet) ([]any, error) {
	return m.table.UpdateEach(ctx, match, where, common, rows)
}

// WithTx forwards the call: dao.TxBinder.
func (m *Metered[T]) WithTx(tx any) *dao.Table[T] { return m.table.WithTx(tx) }

// TableName forwards the call: dao.TableNamer.
func (m *Metered[T]) TableName() string { return m.table.TableName() }

// A wrapper store keeps the behaviour of the table it wraps when it
// forwards the optional interfaces: code that asserts dao.KeyUpdater (a
// dispatch worker writing its outcomes) finds it on the wrapper, while a
// wrapper that only embeds dao.Store loses it.
func ExampleKeyUpdater() {
	ctx := context.Background()
	table, err := memstore.New[Task]()
	if err != nil {
		panic(err)
	}
	_ = table.Create(ctx, &Task{State: "running"}, &Task{State: "running"}, &Task{State: "ready"})

	var store dao.Store[Task] = NewMetered(table)
	var plain dao.Store[Task] = struct{ dao.Store[Task] }{table}
	_, plainBatches := plain.(dao.KeyUpdater)
	_, binds := store.(dao.TxBinder[Task])

	ku, ok := store.(dao.KeyUpdater)
	if !ok {
		panic("the wrapper lost UpdateKeys")
	}
	keys, err := ku.UpdateKeys(ctx, dao.Eq("state", "running"), dao.Set{"state": "done"})
	if err != nil {
		panic(err)
	}
	fmt.Println("plain wrapper is a KeyUpdater:", plainBatches)
	fmt.Println("metered wrapper is a TxBinder:", binds)
	fmt.Println("rows written:", len(keys), "UpdateKeys calls:", store.(*Metered[Task]).KeyUpdates)
	// Output:
	// plain wrapper is a KeyUpdater: false
	// metered wrapper is a TxBinder: true
	// rows written: 2 UpdateKeys calls: 1
}
