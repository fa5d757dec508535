package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
)

// countingTable counts the batched outcome writes (UpdateKeys) and the
// rows they name.
type countingTable struct {
	*dao.Table[dispatch.Schedule]
	calls, keys atomic.Int64
}

func (c *countingTable) UpdateKeys(ctx context.Context, where dao.Criteria, set dao.Set) ([]any, error) {
	c.calls.Add(1)
	keys, err := c.Table.UpdateKeys(ctx, where, set)
	c.keys.Add(int64(len(keys)))
	return keys, err
}

// storeOnly hides every method of a store but those of dao.Store: a store
// without UpdateKeys, such as a user's own implementation.
type storeOnly struct{ dao.Store[dispatch.Schedule] }

// TestOutcomesWrittenInBatches: 20 fires that finish together are
// written in one statement; one of them, whose lease another worker took
// meanwhile, is refused by its own fence and counted as lost, and its row
// keeps the new owner's state.
func TestOutcomesWrittenInBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		table, _ := b.open(t)
		store := &countingTable{Table: table}
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		const n = 20
		for i := range n {
			addKeys(t, sc, fmt.Sprintf("k%02d", i))
		}
		var started atomic.Int64
		allStarted, finish := make(chan struct{}), make(chan struct{})
		w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
			if started.Add(1) == n {
				close(allStarted)
			}
			<-finish
			return nil
		}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
			Concurrency: 2 * n, BatchSize: n, PollInterval: 20 * time.Millisecond, Lease: time.Hour, OutcomeDelay: 15 * time.Minute,
		})
		before := time.Now().Add(-time.Minute)
		runWorker(t, w.Run)
		select {
		case <-allStarted:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d fires started", started.Load(), n)
		}
		setLease(t, store, "k07", "thief#1", time.Now().Add(time.Hour))
		close(finish)
		// OutcomeDelay is 15 minutes: the write happens because no handler
		// runs any more.
		waitFor(t, 10*time.Second, "every outcome written or refused", func() bool {
			st := w.Stats()
			return st.Completed+st.LeaseLost == n
		})
		st := w.Stats()
		t.Logf("stats %+v; %d UpdateKeys calls naming %d written rows", st, store.calls.Load(), store.keys.Load())
		if st.Completed != n-1 || st.LeaseLost != 1 || st.WriteErrors != 0 || st.Unwritten != 0 {
			t.Errorf("stats %+v; want %d completed, 1 lease lost", st, n-1)
		}
		if c := store.calls.Load(); c != 1 {
			t.Errorf("%d outcome statements for %d fires that finished together, want 1", c, n)
		}
		stolen := get(t, sc, "k07")
		if stolen.Status != dispatch.StatusActive || stolen.LeaseOwner != "thief#1" || stolen.LastFiredAt != nil {
			t.Errorf("row changed by a worker that lost it: %+v", stolen)
		}
		fired := get(t, sc, "k03")
		if fired.Status != dispatch.StatusFired || fired.LeaseOwner != "" || fired.LastFiredAt == nil || fired.LastFiredAt.Before(before) {
			t.Errorf("fired row %+v: want status fired, lease cleared, LastFiredAt the write's time", fired)
		}
	})
}

// TestOutcomesWithoutUpdateKeys: over a store that offers only dao.Store,
// each outcome is written by its own fenced Update and every fire is
// counted.
func TestOutcomesWithoutUpdateKeys(t *testing.T) {
	table, _ := memBackend().open(t)
	store := storeOnly{table}
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	const n = 12
	for i := range n {
		addKeys(t, sc, fmt.Sprintf("k%02d", i))
	}
	f := newFires()
	w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
		f.record(fr)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 4, PollInterval: 10 * time.Millisecond})
	stop := runWorker(t, w.Run)
	waitFired(t, store, n, "every schedule fired")
	stop()
	if st := w.Stats(); st.Completed != n || st.LeaseLost != 0 || st.WriteErrors != 0 {
		t.Errorf("stats %+v, want %d completed", st, n)
	}
	for i := range n {
		if c := f.count(fmt.Sprintf("k%02d", i)); c != 1 {
			t.Errorf("k%02d fired %d times", i, c)
		}
	}
}

// TestDrainWritesQueuedOutcomesAtOnce: outcomes waiting for a long
// OutcomeDelay are written as soon as the worker drains, before Run
// returns.
func TestDrainWritesQueuedOutcomesAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		// The slow fire is due first, so its handler starts first in the
		// claim and runs while the fast ones finish.
		now := time.Now()
		for key, at := range map[string]time.Time{"slow": now.Add(-2 * time.Minute), "fast-1": now.Add(-time.Minute), "fast-2": now.Add(-time.Minute)} {
			if _, _, err := sc.Add(context.Background(), dispatch.Spec{Key: key, At: at}); err != nil {
				t.Fatal(err)
			}
		}
		var fast atomic.Int64
		release := make(chan struct{})
		w := newScheduleWorker(t, store, func(ctx context.Context, fr dispatch.Fire) error {
			if fr.Schedule.Key == "slow" {
				<-release // keeps a handler running, so the fast outcomes wait
				return nil
			}
			fast.Add(1)
			return nil
		}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{Concurrency: 10, BatchSize: 10, PollInterval: 10 * time.Millisecond, Lease: time.Hour, OutcomeDelay: 15 * time.Minute})
		stop := runWorker(t, w.Run)
		waitFor(t, 10*time.Second, "the fast fires", func() bool { return fast.Load() == 2 && w.Stats().Unwritten == 2 })
		if st := w.Stats(); st.Completed != 0 {
			t.Fatalf("stats %+v: outcomes written before OutcomeDelay, BatchSize or an idle worker", st)
		}
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		// The slow handler still runs: only the drain writes the two
		// outcomes now.
		waitFor(t, 10*time.Second, "the queued outcomes written by the drain", func() bool { return w.Stats().Completed == 2 })
		close(release)
		<-stopped
		if st := w.Stats(); st.Completed != 3 || st.Unwritten != 0 {
			t.Errorf("after Run returned: stats %+v, want 3 completed, none unwritten", st)
		}
		waitFired(t, store, 3, "every outcome in the table")
	})
}

// TestAddMany: AddMany creates the schedules whose keys are new, leaves
// existing ones unchanged, skips a key repeated in the call, and refuses a
// call with a bad spec without writing anything; over a store without
// CreateIfAbsent it does the same through Add.
func TestAddMany(t *testing.T) {
	check := func(t *testing.T, store dao.Store[dispatch.Schedule]) {
		ctx := context.Background()
		sc := newSchedules(t, store, dispatch.SchedulesConfig{})
		if _, _, err := sc.Add(ctx, dispatch.Spec{Key: "k003", Payload: []byte("original")}); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		var specs []dispatch.Spec
		for i := range 40 {
			specs = append(specs, dispatch.Spec{Key: fmt.Sprintf("k%03d", i), At: at, Payload: []byte("new")})
		}
		specs = append(specs, dispatch.Spec{Key: "k010", Payload: []byte("repeated")},
			dispatch.Spec{Key: "cron", Cron: "0 0 9 * * *", TimeZone: "Europe/Paris"})
		n, err := sc.AddMany(ctx, specs)
		if err != nil || n != 40 {
			t.Fatalf("AddMany = %d, %v; want 40 created (39 once, 1 cron)", n, err)
		}
		if got := get(t, sc, "k003"); string(got.Payload) != "original" {
			t.Errorf("existing schedule changed: payload %q", got.Payload)
		}
		if got := get(t, sc, "k010"); string(got.Payload) != "new" || !got.NextFireAt.Equal(at) || got.Status != dispatch.StatusActive {
			t.Errorf("k010 = %+v; want the first spec of its key, due at %v", got, at)
		}
		cron := get(t, sc, "cron")
		if want, err := dispatch.NextCron("0 0 9 * * *", "Europe/Paris", time.Now()); err != nil || cron.Kind != dispatch.KindCron || cron.NextFireAt.Sub(want).Abs() > time.Minute {
			t.Errorf("cron schedule %+v; want next fire %v (%v)", cron, want, err)
		}
		if n, err := sc.AddMany(ctx, specs); err != nil || n != 0 {
			t.Errorf("AddMany again = %d, %v; want 0 created", n, err)
		}
		before, err := store.Count(ctx, dao.Criteria{})
		if err != nil {
			t.Fatal(err)
		}
		bad := []dispatch.Spec{{Key: "fresh-1"}, {Key: "bad", Cron: "not a cron"}, {Key: "fresh-2"}}
		if _, err := sc.AddMany(ctx, bad); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("AddMany with a bad cron expression: %v, want ErrInvalidArgument", err)
		}
		if after, err := store.Count(ctx, dao.Criteria{}); err != nil || after != before {
			t.Errorf("%d rows after a refused AddMany, want %d (%v)", after, before, err)
		}
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		store, _ := b.open(t)
		check(t, store)
	})
	t.Run("without CreateIfAbsent", func(t *testing.T) {
		store, _ := memBackend().open(t)
		check(t, storeOnly{store})
	})
}
