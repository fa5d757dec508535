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

// flakyStore fails every other Update with dao.ErrUnavailable before
// anything is written, as a store does whose connection drops between
// statements.
type flakyStore struct {
	dao.Store[dispatch.Schedule]
	updates, failed atomic.Int64
}

func (s *flakyStore) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if s.updates.Add(1)%2 == 1 {
		s.failed.Add(1)
		return 0, fmt.Errorf("update: connection lost: %w", dao.ErrUnavailable)
	}
	return s.Store.Update(ctx, where, set)
}

// An outcome write that fails for a reason a retry can cure is tried
// again: every once schedule ends fired after exactly one fire, with no
// write error, although its lease is far longer than the test.
func TestOutcomeWriteRetriesTransientFailures(t *testing.T) {
	mem, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	s := &flakyStore{Store: mem}
	ctx := context.Background()
	sc := newSchedules(t, mem, dispatch.SchedulesConfig{})
	const n = 50
	for i := range n {
		if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("once-%02d", i), At: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	f := newFires()
	w := newScheduleWorker(t, s, func(ctx context.Context, fr dispatch.Fire) error {
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 8, Tick: 20 * time.Millisecond, Lease: time.Hour})
	stop := runWorker(t, w.Run)
	waitFor(t, 30*time.Second, "every once schedule fired", func() bool {
		c, err := mem.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, "once"), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired))))
		return err == nil && c == n
	})
	stop()
	t.Logf("updates %d, failed on purpose %d; worker %+v", s.updates.Load(), s.failed.Load(), w.Stats())
	if s.failed.Load() == 0 {
		t.Fatal("no Update failed: the test did not exercise a transient failure")
	}
	for i := range n {
		if c := f.count(fmt.Sprintf("once-%02d", i)); c != 1 {
			t.Errorf("once-%02d fired %d times", i, c)
		}
	}
	if st := w.Stats(); st.WriteErrors != 0 {
		t.Errorf("worker stats %+v; want no write errors", st)
	}
}
