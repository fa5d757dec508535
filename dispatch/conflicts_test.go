package dispatch_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// conflictingStore reports, through the claim trace of the context, two
// absorbed conflicts in each of its first claims, as a SQL store does for
// the deadlock victims its claim goes on from.
type conflictingStore[T any] struct {
	dao.Store[T]
	left atomic.Int64 // claims still to report conflicts
}

func (s *conflictingStore[T]) Claim(ctx context.Context, req dao.ClaimRequest) ([]T, error) {
	if s.left.Add(-1) >= 0 {
		if tr := dao.ContextClaimTrace(ctx); tr != nil && tr.Conflict != nil {
			tr.Conflict(ctx)
			tr.Conflict(ctx)
		}
	}
	return s.Store.Claim(ctx, req)
}

// The conflicts a worker's claims absorb are counted in
// Stats.ConflictRetries, one per conflict the store reports, and passed on
// to the claim trace of Run's context.
func TestWorkerCountsClaimConflicts(t *testing.T) {
	mem, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	s := &conflictingStore[dispatch.Schedule]{Store: mem}
	s.left.Store(3)
	ctx := context.Background()
	sc := newSchedules(t, mem, dispatch.SchedulesConfig{})
	const n = 20
	addDueOnce(t, sc, n)
	f := newFires()
	w := newScheduleWorker(t, s, func(ctx context.Context, fr dispatch.Fire) error {
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 2, PollInterval: 10 * time.Millisecond})
	var outer atomic.Int64
	stop := runWorker(t, func(ctx context.Context) error {
		return w.Run(dao.WithClaimTrace(ctx, &dao.ClaimTrace{Conflict: func(context.Context) { outer.Add(1) }}))
	})
	waitFor(t, 30*time.Second, "every once schedule fired", func() bool {
		c, err := mem.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, "once"), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired))))
		return err == nil && c == n
	})
	stop()
	for i := range n {
		if c := f.count(fmt.Sprintf("once-%02d", i)); c != 1 {
			t.Errorf("once-%02d fired %d times", i, c)
		}
	}
	if got := w.Stats().ConflictRetries; got != 6 {
		t.Errorf("Stats.ConflictRetries = %d, want 6 (two in each of three claims)", got)
	}
	if got := outer.Load(); got != 6 {
		t.Errorf("the trace of Run's context saw %d conflicts, want 6", got)
	}
}
