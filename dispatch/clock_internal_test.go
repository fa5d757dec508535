package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// While one caller reads the database's time again (its sample is older
// than ClockResync), other callers get the estimate from the old sample at
// once instead of waiting for that round trip; only the first sample is
// waited for. The database read is counted: one per resync.
func TestTimeSourceResyncDoesNotBlockOthers(t *testing.T) {
	var host atomic.Int64 // nanoseconds since base
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	release := make(chan struct{})
	var reads atomic.Int32
	c := &timeSource{
		host: func() time.Time { return base.Add(time.Duration(host.Load())) },
		read: func(ctx context.Context) (time.Time, error) {
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
