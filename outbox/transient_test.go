package outbox_test

import (
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/internal/testutil/faultstore"
	"github.com/claimstore/claimstore/outbox"
)

// A mark or release that fails for a reason a retry can cure is tried
// again: every message ends published, none is left processing until its
// lease ends, and the stream holds each message once.
func TestRelayRetriesTransientMarkFailures(t *testing.T) {
	mem, err := memstore.New[outbox.Message]()
	if err != nil {
		t.Fatal(err)
	}
	s := faultstore.Wrap[outbox.Message](mem)
	nb := startBroker(t)
	repo := newRepo(t, s)
	const n = 200
	want := write(t, repo, nil, msgs("flaky", testSubject, n))
	r := startRelay(t, repo, nb.publisher(t, 5*time.Second), outbox.RelayConfig{
		WorkerID: "flaky", BatchSize: 20, Loops: 2, Lease: time.Hour,
	})
	waitFor(t, 30*time.Second, "every message published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
	r.stop(t)
	c := counts(t, repo)
	t.Logf("updates %d, failed on purpose %d; rows %v; relay %+v", s.Updates(), s.Failed(), c, r.relay.Stats())
	if s.Failed() == 0 {
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
