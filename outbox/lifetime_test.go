package outbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/internal/testutil/leaktest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// losingLeases is a lease store whose acquisitions fail to hold the
// lease once lose is set, as when another reader took the partition over.
type losingLeases struct {
	driver.LeaseStore
	lose atomic.Bool
}

func (l *losingLeases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (driver.Lease, bool, error) {
	if l.lose.Load() {
		return driver.Lease{}, false, nil
	}
	return l.LeaseStore.AcquireLease(ctx, name, holder, ttl)
}

// stuckPublisher publishes nothing until release is closed, whatever its
// context says, and says on publishing when it was first called.
type stuckPublisher struct {
	publishing chan struct{}
	release    chan struct{}
	once       atomic.Bool
}

func (p *stuckPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	if p.once.CompareAndSwap(false, true) {
		close(p.publishing)
	}
	<-p.release
	return make([]error, len(msgs))
}

// A log relay returns only once every goroutine it started has ended:
// also the reader of a partition whose lease it lost while the
// partition's publish was under way.
func TestLogRelayRunOutlivesItsPartitions(t *testing.T) {
	db := testdb.SQLite(t)
	lg, err := outbox.NewLog(sqlstoretest.Log(t, db), 1)
	if err != nil {
		t.Fatal(err)
	}
	leases := &losingLeases{LeaseStore: sqlstoretest.Leases(t, db)}
	pub := &stuckPublisher{publishing: make(chan struct{}), release: make(chan struct{})}
	r, err := outbox.NewLogRelay(lg, pub, outbox.LogRelayConfig{LogReaderConfig: outbox.LogReaderConfig{Reader: "relay", WorkerID: "h1",
		Leases: leases, Lease: 300 * time.Millisecond, Batch: 10, PollInterval: 10 * time.Millisecond, Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Write(context.Background(), nil, &outbox.Message{MessageID: "m1", Topic: "events.log", Payload: []byte("p"), Type: "t"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-pub.publishing:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not published within 30 s")
	}
	leases.lose.Store(true)
	time.Sleep(500 * time.Millisecond) // past a renewal (every TTL/3) that loses the partition
	cancel()
	select {
	case err := <-done:
		close(pub.release)
		t.Fatalf("Run returned (%v) while the reader of the partition it lost still published", err)
	case <-time.After(time.Second):
	}
	close(pub.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of the publish's end")
	}
	if live := leaktest.Remaining("claimstore/outbox.("); len(live) > 0 {
		t.Fatalf("%d goroutines of the relay alive after Run returned:\n%s", len(live), strings.Join(live, "\n\n"))
	}
}
