package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dispatch"
)

// owners records the lease owner of every fire.
type owners struct {
	mu  sync.Mutex
	all []string
}

func (o *owners) fire(_ context.Context, fr dispatch.Fire) error {
	o.mu.Lock()
	o.all = append(o.all, fr.Schedule.LeaseOwner)
	o.mu.Unlock()
	return nil
}

// of returns how many fires ran under lease owner token owner.
func (o *owners) of(owner string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, w := range o.all {
		if w == owner {
			n++
		}
	}
	return n
}

func (o *owners) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.all)
}

// A worker starts the rows of a claim only when the claim answered within
// the lease less two ticks: a handler started later could not have its
// first renewal (at the next tick) written (within another tick) before
// the lease ends. Both sides of the rule: with a tick of 300 ms and a
// lease of 1 s the window is 400 ms, so a claim that answers after 450 ms
// hands out nothing (its rows are released and claimed again); with a
// tick of 50 ms the window is 900 ms, so a claim that answers after
// 700 ms has its rows handled under its own lease.
func TestClaimStartsWithinLeaseLessTwoTicks(t *testing.T) {
	for _, c := range []struct {
		name        string
		tick, delay time.Duration
		started     bool // the first claim's rows run under its lease
	}{
		{"late_for_a_long_tick", 300 * time.Millisecond, 450 * time.Millisecond, false},
		{"in_time_for_a_short_tick", 50 * time.Millisecond, 700 * time.Millisecond, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem, err := memstore.New[dispatch.Schedule]()
			if err != nil {
				t.Fatal(err)
			}
			const n = 4
			addOnce(t, mem, n)
			var o owners
			slow := &lateFirstClaim{Store: mem, delay: c.delay}
			w := newScheduleWorker(t, slow, o.fire, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
				WorkerID: "a", Concurrency: n, BatchSize: n, PollInterval: c.tick, Lease: time.Second,
			})
			stop := runWorker(t, w.Run)
			waitFor(t, 10*time.Second, "every once schedule fired", func() bool { return o.count() == n })
			stop()
			first := o.of("a#1")
			st := w.Stats()
			t.Logf("fires under a#1: %d; stats %+v", first, st)
			if c.started && (first != n || st.Released != 0) {
				t.Fatalf("claim answered after %v (window %v): %d of %d rows ran under it, %d released; want all run, none released",
					c.delay, time.Second-2*c.tick, first, n, st.Released)
			}
			if !c.started && (first != 0 || st.Released != n) {
				t.Fatalf("claim answered after %v (window %v): %d of %d rows ran under it, %d released; want none run, all released",
					c.delay, time.Second-2*c.tick, first, n, st.Released)
			}
			if !strings.HasPrefix(o.all[0], "a#") {
				t.Fatalf("owner %q", o.all[0])
			}
		})
	}
}
