package outbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// The database clock reads the database's time once, advances it with the
// host clock, reads it again after DatabaseClockResync, and keeps its
// estimate when a later read fails.
func TestDBClockSamples(t *testing.T) {
	var mu sync.Mutex
	start := time.Now()
	host := start.Add(-time.Hour) // an hour behind the database
	db := start
	reads := 0
	var fail error
	c := &dbClock{
		host: func() time.Time { mu.Lock(); defer mu.Unlock(); return host },
		read: func(context.Context) (time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return db, fail
		},
	}
	advance := func(d time.Duration) { mu.Lock(); host = host.Add(d); db = db.Add(d); mu.Unlock() }
	ctx := context.Background()

	fail = errors.New("down")
	if _, err := c.now(ctx); err == nil {
		t.Fatal("the first read failed: want its error")
	}
	if got := c.peek(); !got.Equal(host) {
		t.Fatalf("peek before any sample: %v, want the host's %v", got, host)
	}
	fail = nil
	if got, err := c.now(ctx); err != nil || !got.Equal(start) {
		t.Fatalf("now: %v %v, want the database's %v", got, err, start)
	}
	advance(30 * time.Second)
	if got, err := c.now(ctx); err != nil || !got.Equal(start.Add(30*time.Second)) || reads != 2 {
		t.Fatalf("30s later: %v %v after %d reads; want %v from the estimate", got, err, reads, start.Add(30*time.Second))
	}
	mu.Lock()
	db = db.Add(time.Second) // the two clocks drift apart by a second
	mu.Unlock()
	advance(DatabaseClockResync)
	want := start.Add(30*time.Second + DatabaseClockResync + time.Second)
	if got, err := c.now(ctx); err != nil || !got.Equal(want) || reads != 3 {
		t.Fatalf("after the resync interval: %v %v after %d reads; want a new sample %v", got, err, reads, want)
	}
	fail = errors.New("down")
	advance(DatabaseClockResync)
	want = want.Add(DatabaseClockResync)
	if got, err := c.now(ctx); err != nil || !got.Equal(want) || reads != 4 {
		t.Fatalf("a failed resync: %v %v after %d reads; want the older estimate %v", got, err, reads, want)
	}
	if got := c.peek(); !got.Equal(want) {
		t.Fatalf("peek: %v, want %v", got, want)
	}
}
