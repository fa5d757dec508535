package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// TestRelayDeprecatedFields: a RelayConfig that sets only a deprecated
// field (Concurrency, ShutdownTimeout, MarkTimeout) runs with it as the
// field that replaces it (Loops, DrainTimeout, WriteTimeout), the new
// field wins when both are set, and RetryHorizon counts MarkTimeout as
// WriteTimeout.
func TestRelayDeprecatedFields(t *testing.T) {
	s, _ := backends()[0].open(t)
	r := newRepo(t, s)
	pub := outbox.PublisherFunc(func(context.Context, []outbox.Message) []error { return nil })
	type want struct {
		loops         int
		drain, writes time.Duration
	}
	for _, c := range []struct {
		name string
		cfg  outbox.RelayConfig
		want want
	}{
		{"old only", outbox.RelayConfig{Concurrency: 3, ShutdownTimeout: 7 * time.Second, MarkTimeout: 4 * time.Second}, want{3, 7 * time.Second, 4 * time.Second}},
		{"both", outbox.RelayConfig{Concurrency: 3, Loops: 2, ShutdownTimeout: 7 * time.Second, DrainTimeout: 8 * time.Second, MarkTimeout: 4 * time.Second, WriteTimeout: 5 * time.Second}, want{2, 8 * time.Second, 5 * time.Second}},
		{"neither", outbox.RelayConfig{}, want{1, outbox.DefaultDrainTimeout, outbox.DefaultWriteTimeout}},
	} {
		rl, err := outbox.NewRelay(r, pub, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := rl.Config()
		if g := (want{got.Loops, got.DrainTimeout, got.WriteTimeout}); g != c.want {
			t.Errorf("%s: Loops, DrainTimeout, WriteTimeout = %v, want %v", c.name, g, c.want)
		}
	}
	p := outbox.DefaultRetryPolicy()
	old := outbox.RetryHorizon(p, outbox.RelayConfig{MarkTimeout: time.Minute})
	if now := outbox.RetryHorizon(p, outbox.RelayConfig{WriteTimeout: time.Minute}); old != now {
		t.Errorf("RetryHorizon with MarkTimeout 1m = %v, with WriteTimeout 1m = %v: want equal", old, now)
	}
	if d, w, rs := outbox.DefaultShutdownTimeout, outbox.DefaultMarkTimeout, outbox.DatabaseClockResync; d != outbox.DefaultDrainTimeout || w != outbox.DefaultWriteTimeout || rs != outbox.ClockResync {
		t.Errorf("deprecated constants %v, %v, %v; want %v, %v, %v", d, w, rs, outbox.DefaultDrainTimeout, outbox.DefaultWriteTimeout, outbox.ClockResync)
	}
}

// TestLogReaderDeprecatedFields: a LogReaderConfig that sets only a
// deprecated field (Holder, LeaseTTL, Poll) reads with it as the field
// that replaces it (WorkerID, Lease, PollInterval), and the new field
// wins when both are set.
func TestLogReaderDeprecatedFields(t *testing.T) {
	db := testdb.SQLite(t)
	lg, err := outbox.NewLog(sqlstoretest.Log(t, db), 1)
	if err != nil {
		t.Fatal(err)
	}
	leases := memstore.NewLeases()
	handle := func(context.Context, int, []outbox.LogRecord) (int, []outbox.LogDeadLetter, error) {
		return 0, nil, nil
	}
	type want struct {
		worker      string
		lease, poll time.Duration
	}
	for _, c := range []struct {
		name string
		cfg  outbox.LogReaderConfig
		want want
	}{
		{"old only", outbox.LogReaderConfig{Holder: "old", LeaseTTL: 9 * time.Second, Poll: 70 * time.Millisecond}, want{"old", 9 * time.Second, 70 * time.Millisecond}},
		{"both", outbox.LogReaderConfig{Holder: "old", WorkerID: "new", LeaseTTL: 9 * time.Second, Lease: 6 * time.Second, Poll: 70 * time.Millisecond, PollInterval: 30 * time.Millisecond}, want{"new", 6 * time.Second, 30 * time.Millisecond}},
	} {
		cfg := c.cfg
		cfg.Reader, cfg.Leases = "vocab", leases
		cons, err := lg.Consumer(cfg, handle)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := outbox.ReaderConfigOf(cons)
		if g := (want{got.WorkerID, got.Lease, got.PollInterval}); g != c.want {
			t.Errorf("%s: WorkerID, Lease, PollInterval = %v, want %v", c.name, g, c.want)
		}
	}
}
