package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// With a backlog, the worker claims again as soon as a handler slot frees,
// never waiting for the tick: with a tick of an hour, 300 due schedules and
// quick handlers, every schedule fires within seconds. (A slot freed while
// every slot was taken again used to leave the loop waiting for the tick.)
func TestBacklogDoesNotWaitForTick(t *testing.T) {
	store, _ := memBackend().open(t)
	ctx := context.Background()
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	const n = 300
	past := time.Now().Add(-time.Minute)
	for i := range n {
		if _, _, err := sc.Add(ctx, dispatch.Spec{Key: fmt.Sprintf("once-%03d", i), At: past}); err != nil {
			t.Fatal(err)
		}
	}
	f := newFires()
	w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
		time.Sleep(time.Millisecond)
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 4, PollInterval: time.Hour, Lease: 3 * time.Hour})
	stop := runWorker(t, w.Run)
	defer stop()
	waitFor(t, 20*time.Second, "every schedule fired without a tick", func() bool {
		c, err := store.Count(ctx, dao.Eq(dispatch.ColStatus, string(dispatch.StatusFired)))
		return err == nil && c == n
	})
	for i := range n {
		if c := f.count(fmt.Sprintf("once-%03d", i)); c != 1 {
			t.Errorf("once-%03d fired %d times", i, c)
		}
	}
}
