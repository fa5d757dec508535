package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// certifiedJobs is a job store whose first unique inserts are aborted at
// commit with dao.ErrConflict, as a Galera node's are when another node
// inserted the same key first (certification, 1213); when other is set,
// that node's job lands before the abort is returned.
type certifiedJobs struct {
	*dao.Table[jobs.Row]
	abortsLeft atomic.Int64
	other      *jobs.Row
	calls      atomic.Int64
}

func (s *certifiedJobs) CreateIfAbsent(ctx context.Context, items ...*jobs.Row) (int64, error) {
	s.calls.Add(1)
	if s.abortsLeft.Add(-1) >= 0 {
		if s.other != nil {
			cp := *s.other
			if _, err := s.Table.CreateIfAbsent(ctx, &cp); err != nil {
				return 0, err
			}
		}
		return 0, fmt.Errorf("certification failed: %w", dao.ErrConflict)
	}
	return s.Table.CreateIfAbsent(ctx, items...)
}

// A unique insert aborted by a conflict is tried again: it then finds
// the key held by the job that won (a duplicate), or inserts its own when
// nothing holds the key; a conflict on every try is returned, wrapping
// dao.ErrConflict.
func TestInsertUniqueRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	opts := &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}}
	newClient := func(t *testing.T, aborts int64, otherWins bool) (*jobs.Client, *certifiedJobs) {
		t.Helper()
		mem, _ := memstore.New[jobs.Row]()
		store := &certifiedJobs{Table: mem}
		store.abortsLeft.Store(aborts)
		ws := jobs.NewWorkers()
		if err := jobs.AddWorker(ws, jobs.WorkFunc[GreetArgs](func(context.Context, *jobs.Job[GreetArgs]) error { return nil })); err != nil {
			t.Fatal(err)
		}
		c, err := jobs.NewClient(jobs.Config{Store: store, Workers: ws, Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}}})
		if err != nil {
			t.Fatal(err)
		}
		if otherWins {
			// The other node's job: the same args, inserted by a twin
			// client into a scratch store to get its row.
			scratch, _ := memstore.New[jobs.Row]()
			twin, err := jobs.NewClient(jobs.Config{Store: scratch, Workers: ws, Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := twin.Insert(ctx, GreetArgs{Name: "once"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			other := *res.Job
			other.ID = 0
			other.Metadata = `{"by":"other"}`
			store.other = &other
		}
		return c, store
	}

	t.Run("another insert won", func(t *testing.T) {
		c, store := newClient(t, 1, true)
		res, err := c.Insert(ctx, GreetArgs{Name: "once"}, opts)
		if err != nil {
			t.Fatalf("Insert: %v, want the conflict tried again", err)
		}
		if !res.UniqueSkippedAsDuplicate || res.Job.Metadata != `{"by":"other"}` {
			t.Errorf("Insert = duplicate %v, job metadata %s; want the other insert's job as a duplicate", res.UniqueSkippedAsDuplicate, res.Job.Metadata)
		}
		if n, _ := store.Count(ctx, dao.Criteria{}); n != 1 || store.calls.Load() != 2 {
			t.Errorf("%d jobs stored after %d inserts, want 1 after 2", n, store.calls.Load())
		}
	})
	t.Run("the other rolled back", func(t *testing.T) {
		c, store := newClient(t, 3, false)
		res, err := c.Insert(ctx, GreetArgs{Name: "once"}, opts)
		if err != nil || res.UniqueSkippedAsDuplicate {
			t.Fatalf("Insert = %+v, %v; want it inserted after its conflicts", res, err)
		}
		if n, _ := store.Count(ctx, dao.Criteria{}); n != 1 || store.calls.Load() != 4 {
			t.Errorf("%d jobs stored after %d inserts, want 1 after 4", n, store.calls.Load())
		}
	})
	t.Run("conflicts every time", func(t *testing.T) {
		c, store := newClient(t, 1000, false)
		_, err := c.Insert(ctx, GreetArgs{Name: "once"}, opts)
		if !errors.Is(err, dao.ErrConflict) {
			t.Fatalf("Insert: %v, want dao.ErrConflict", err)
		}
		if n, _ := store.Count(ctx, dao.Criteria{}); n != 0 || store.calls.Load() != 10 {
			t.Errorf("%d jobs stored after %d inserts, want 0 after 10", n, store.calls.Load())
		}
	})
}
