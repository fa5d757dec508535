package outbox_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/outbox"
)

// A message whose subject no stream holds fails with outbox.ErrNoStream,
// stays retryable, and the relay says so at ERROR once per topic, with the
// fix; messages whose subject has a stream are published meanwhile.
func TestRelayReportsMissingStreamOncePerTopic(t *testing.T) {
	s, err := memstore.New[outbox.Message]()
	if err != nil {
		t.Fatal(err)
	}
	nb := startBroker(t)
	repo := newRepo(t, s, outbox.WithRetryPolicy(outbox.RetryPolicy{MaxRetries: 100, BaseDelay: 10 * time.Millisecond, Multiplier: 1, MaxDelay: 10 * time.Millisecond}))
	const n = 5
	good := write(t, repo, nil, msgs("good", testSubject, n))
	write(t, repo, nil, msgs("lost", "nowhere.orders", n))
	var logs syncbuf.Buffer
	rr := startRelay(t, repo, nb.publisher(t, time.Second), outbox.RelayConfig{
		BatchSize: 4, Lease: 5 * time.Second, PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	// Every message of the stream-less topic fails at least twice.
	waitFor(t, 10*time.Second, "repeated publish failures", func() bool { return rr.relay.Stats().Failed >= 2*n })
	rr.stop(t)
	nb.checkExactlyOnce(t, good)
	if c := counts(t, repo); c[outbox.StatusAbandoned] != 0 {
		t.Errorf("counts %v: a missing stream must not abandon messages before their max retries", c)
	}
	var reports []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "no stream") {
			reports = append(reports, line)
		}
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "topic=nowhere.orders") || !strings.Contains(reports[0], "--subjects") {
		t.Fatalf("ERROR reports of the missing stream = %q; want one, naming topic nowhere.orders and the fix", reports)
	}
}
