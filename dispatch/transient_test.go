package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/faultstore"
)

// An outcome write that fails for a reason a retry can cure is tried
// again: every once schedule ends fired after exactly one fire, with no
// write error, although its lease is far longer than the test.
func TestOutcomeWriteRetriesTransientFailures(t *testing.T) {
	mem, err := memstore.New[dispatch.Schedule]()
	if err != nil {
		t.Fatal(err)
	}
	s := faultstore.Wrap[dispatch.Schedule](mem)
	ctx := context.Background()
	sc := newSchedules(t, mem, dispatch.SchedulesConfig{})
	const n = 50
	addDueOnce(t, sc, n)
	f := newFires()
	w := newScheduleWorker(t, s, func(ctx context.Context, fr dispatch.Fire) error {
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 8, PollInterval: 20 * time.Millisecond, Lease: time.Hour})
	stop := runWorker(t, w.Run)
	waitFor(t, 30*time.Second, "every once schedule fired", func() bool {
		c, err := mem.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, "once"), dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired))))
		return err == nil && c == n
	})
	stop()
	t.Logf("updates %d, failed on purpose %d; worker %+v", s.Updates(), s.Failed(), w.Stats())
	if s.Failed() == 0 {
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

// addDueOnce adds n once schedules ("once-00", …) due a minute ago.
func addDueOnce(t *testing.T, sc *dispatch.Schedules, n int) {
	t.Helper()
	for i := range n {
		if _, _, err := sc.Add(context.Background(), dispatch.Spec{Key: fmt.Sprintf("once-%02d", i), At: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
}
