package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
)

// flakyStore fails every other Update with dao.ErrUnavailable before
// anything is written, as a store does whose connection drops between
// statements.
type flakyStore struct {
	dao.Store[outbox.Message]
	updates, failed atomic.Int64
}

func (s *flakyStore) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if s.updates.Add(1)%2 == 1 {
		s.failed.Add(1)
		return 0, fmt.Errorf("update: connection lost: %w", dao.ErrUnavailable)
	}
	return s.Store.Update(ctx, where, set)
}

// A mark or release that fails for a reason a retry can cure is tried
// again: every message ends published, none is left processing until its
// lease ends, and the stream holds each message once.
func TestRelayRetriesTransientMarkFailures(t *testing.T) {
	mem, err := memstore.New[outbox.Message]()
	if err != nil {
		t.Fatal(err)
	}
	s := &flakyStore{Store: mem}
	nb := startBroker(t)
	repo := newRepo(t, s)
	const n = 200
	want := write(t, repo, nil, msgs("flaky", testSubject, n))
	r := startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
		WorkerID: "flaky", BatchSize: 20, Concurrency: 2, Lease: time.Hour,
	})
	waitFor(t, 30*time.Second, "every message published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
	r.stop(t)
	c := counts(t, repo)
	t.Logf("updates %d, failed on purpose %d; rows %v; relay %+v", s.updates.Load(), s.failed.Load(), c, r.relay.Stats())
	if s.failed.Load() == 0 {
		t.Fatal("no Update failed: the test did not exercise a transient failure")
	}
	if c[outbox.StatusProcessing] != 0 || c[outbox.StatusPublished] != n {
		t.Fatalf("rows %v; want all %d published, none processing", c, n)
	}
	if st := r.relay.Stats(); st.Published != n || st.MarkErrors != 0 {
		t.Fatalf("relay stats %+v; want %d published and no mark errors", st, n)
	}
	nb.checkExactlyOnce(t, want)
}
