package dbclock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The database clock reads the database's time once, advances it with the
// host clock, reads it again after ClockResync, and keeps its
// estimate when a later read fails.
func TestClockSamples(t *testing.T) {
	var mu sync.Mutex
	start := time.Now()
	host := start.Add(-time.Hour) // an hour behind the database
	db := start
	reads := 0
	var fail error
	c := &Clock{
		Host: func() time.Time { mu.Lock(); defer mu.Unlock(); return host },
		Read: func(context.Context) (time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return db, fail
		},
	}
	advance := func(d time.Duration) { mu.Lock(); host = host.Add(d); db = db.Add(d); mu.Unlock() }
	ctx := context.Background()

	fail = errors.New("down")
	if _, err := c.Now(ctx); err == nil {
		t.Fatal("the first read failed: want its error")
	}
	if got := c.Peek(); !got.Equal(host) {
		t.Fatalf("peek before any sample: %v, want the host's %v", got, host)
	}
	fail = nil
	if got, err := c.Now(ctx); err != nil || !got.Equal(start) {
		t.Fatalf("now: %v %v, want the database's %v", got, err, start)
	}
	advance(30 * time.Second)
	if got, err := c.Now(ctx); err != nil || !got.Equal(start.Add(30*time.Second)) || reads != 2 {
		t.Fatalf("30s later: %v %v after %d reads; want %v from the estimate", got, err, reads, start.Add(30*time.Second))
	}
	mu.Lock()
	db = db.Add(time.Second) // the two clocks drift apart by a second
	mu.Unlock()
	advance(ClockResync)
	want := start.Add(30*time.Second + ClockResync + time.Second)
	if got, err := c.Now(ctx); err != nil || !got.Equal(want) || reads != 3 {
		t.Fatalf("after the resync interval: %v %v after %d reads; want a new sample %v", got, err, reads, want)
	}
	fail = errors.New("down")
	advance(ClockResync)
	want = want.Add(ClockResync)
	if got, err := c.Now(ctx); err != nil || !got.Equal(want) || reads != 4 {
		t.Fatalf("a failed resync: %v %v after %d reads; want the older estimate %v", got, err, reads, want)
	}
	if got := c.Peek(); !got.Equal(want) {
		t.Fatalf("peek: %v, want %v", got, want)
	}
}

// While one caller reads the database's time again (its sample is older
// than ClockResync), other callers get the estimate from the old sample at
// once instead of waiting for that round trip; only the first sample is
// waited for. The database read is counted: one per resync.
func TestResyncDoesNotBlockOthers(t *testing.T) {
	var host atomic.Int64 // nanoseconds since base
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	release := make(chan struct{})
	var reads atomic.Int32
	c := &Clock{
		Host: func() time.Time { return base.Add(time.Duration(host.Load())) },
		Read: func(ctx context.Context) (time.Time, error) {
			if reads.Add(1) > 1 {
				<-release // the resync hangs until released
			}
			return base.Add(time.Hour), nil
		},
	}
	ctx := context.Background()
	if got, err := c.Now(ctx); err != nil || !got.Equal(base.Add(time.Hour)) {
		t.Fatalf("first Now = %v, %v; want the database's time", got, err)
	}
	host.Store(int64(ClockResync + time.Second)) // the sample is stale now
	done := make(chan time.Time)
	go func() {
		got, _ := c.Now(ctx) // reads again, and hangs in the read
		done <- got
	}()
	for reads.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	other := make(chan time.Time)
	go func() { got, _ := c.Now(ctx); other <- got }()
	want := base.Add(time.Hour + ClockResync + time.Second)
	select {
	case got := <-other:
		if !got.Equal(want) {
			t.Errorf("Now during a resync = %v, want the old sample's estimate %v", got, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Now waited for another caller's resync")
	}
	close(release)
	if got := <-done; !got.Equal(base.Add(time.Hour)) {
		t.Errorf("resyncing Now = %v, want the new sample %v", got, base.Add(time.Hour))
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d database reads, want 2", n)
	}
}

// The first reading on a new connection waits for the connection before
// the database reads its clock, so its midpoint runs ahead of the
// database. The clock reads again while readings are slow and keeps the
// one with the shortest round trip; a failure after a first reading keeps
// that reading.
func TestSlowFirstReadingIsNotTheSample(t *testing.T) {
	var mu sync.Mutex
	real := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pass := func(d time.Duration) { mu.Lock(); real = real.Add(d); mu.Unlock() }
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return real }
	for _, tc := range []struct {
		name      string
		reads     []time.Duration // the setup before each reading; its round trip adds 2 ms
		failAfter int             // readings after which Read fails (0: never)
		wantReads int
		wantAhead time.Duration
	}{
		{"fast first reading", []time.Duration{0}, 0, 1, 0},
		{"slow first reading", []time.Duration{2 * time.Second, 0}, 0, 2, 0},
		{"all slow, the shortest kept", []time.Duration{2 * time.Second, 400 * time.Millisecond, time.Second}, 0, 3, 200 * time.Millisecond},
		{"failure after a slow reading", []time.Duration{2 * time.Second}, 1, 2, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := 0
			c := &Clock{
				Host: func() time.Time { return now().Add(-time.Hour) },
				Read: func(context.Context) (time.Time, error) {
					reads++
					if tc.failAfter > 0 && reads > tc.failAfter {
						return time.Time{}, errors.New("down")
					}
					pass(tc.reads[reads-1]) // connection setup, then the query
					pass(time.Millisecond)
					db := now()
					pass(time.Millisecond)
					return db, nil
				},
			}
			got, err := c.Now(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if ahead := got.Sub(now()); ahead != tc.wantAhead || reads != tc.wantReads {
				t.Fatalf("estimate ahead of the database by %v after %d readings; want %v after %d", ahead, reads, tc.wantAhead, tc.wantReads)
			}
		})
	}
}
