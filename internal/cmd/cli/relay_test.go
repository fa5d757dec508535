package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
)

func TestRelayCommand(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	dsn, repo := sqliteOutbox(t, "relay_out")
	ms := addMessages(t, repo, "r", "orders.created", 120)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := execCLI(ctx, "--backend", "sqlite", "--dsn", dsn, "--log-level", "warn", "relay",
			"--table", "relay_out", "--nats-url", srv.URL(), "--stream", "ORDERS", "--subjects", "orders.>",
			"--batch", "50", "--loops", "2", "--lease", "5s", "--poll-interval", "10ms", "--max-poll-interval", "50ms", "--report", "0s",
			"--worker-id", "cli-relay", "--broker", "")
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := repo.Counts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c[outbox.StatusPublished] == int64(len(ms)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay command published %d of %d", c[outbox.StatusPublished], len(ms))
		}
		select {
		case err := <-done:
			t.Fatalf("relay command ended early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relay command after SIGINT-like cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("relay command did not stop")
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The stream's duplicate window covers the relay's retry horizon, so a
	// message published again after a lost ack is not stored twice.
	st, err := js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	horizon := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), outbox.RelayConfig{Lease: 5 * time.Second, MaxPollInterval: 50 * time.Millisecond})
	if got := st.CachedInfo().Config.Duplicates; got != horizon {
		t.Fatalf("stream ORDERS has a duplicate window of %v, want the relay's retry horizon %v", got, horizon)
	}
	a, err := natspub.Audit(context.Background(), js, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if a.Messages != uint64(len(ms)) || a.Distinct() != len(ms) || a.Duplicates() != 0 {
		t.Fatalf("stream: %d messages, %d distinct, %d duplicates", a.Messages, a.Distinct(), a.Duplicates())
	}
	rows, err := repo.Published(context.Background(), 1)
	if err != nil || len(rows) != 1 || rows[0].LockedBy[:len("cli-relay")] != "cli-relay" {
		t.Fatalf("published row %+v %v", rows, err)
	}

	for _, bad := range [][]string{
		{"--backend", "memory", "--dsn", "", "relay", "--stream", "", "--subjects", ""},
		{"--backend", "sqlite", "--dsn", dsn, "relay", "--table", "relay_out", "--stream", "X", "--subjects", ""},
		{"--backend", "sqlite", "--dsn", dsn, "relay", "--table", "relay_out", "--stream", "", "--subjects", "", "--lease", "0s"},
	} {
		if _, _, err := execCLI(context.Background(), bad...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// TestEnsureStreamKeepsLongerWindow: --stream raises a short window to the
// horizon, keeps a longer one and the stream's other settings, and stops
// at MaxAge, which JetStream requires the window not to exceed.
func TestEnsureStreamKeepsLongerWindow(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const horizon = 20 * time.Minute
	pub, err := natspub.New(nc, natspub.Config{MinDuplicateWindow: horizon})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	js := pub.JetStream()
	for _, c := range []struct {
		name           string
		have           *jetstream.StreamConfig
		window, maxAge time.Duration
	}{
		{name: "NEW", window: horizon},
		{name: "SHORT", have: &jetstream.StreamConfig{Duplicates: 2 * time.Minute, MaxMsgs: 1000}, window: horizon},
		{name: "LONG", have: &jetstream.StreamConfig{Duplicates: time.Hour, MaxMsgs: 1000}, window: time.Hour},
		{name: "AGED", have: &jetstream.StreamConfig{Duplicates: time.Minute, MaxAge: 5 * time.Minute}, window: 5 * time.Minute, maxAge: 5 * time.Minute},
	} {
		subject := strings.ToLower(c.name) + ".>"
		if c.have != nil {
			c.have.Name, c.have.Subjects = c.name, []string{subject}
			if _, err := js.CreateStream(ctx, *c.have); err != nil {
				t.Fatal(err)
			}
		}
		if err := ensureStream(ctx, pub, relayOptions{stream: c.name, subjects: subject}, horizon); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		st, err := js.Stream(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		got := st.CachedInfo().Config
		if got.Duplicates != c.window || got.MaxAge != c.maxAge {
			t.Errorf("%s: window %v, max age %v; want %v, %v", c.name, got.Duplicates, got.MaxAge, c.window, c.maxAge)
		}
		if c.have != nil && c.have.MaxMsgs != 0 && got.MaxMsgs != c.have.MaxMsgs {
			t.Errorf("%s: MaxMsgs %d, want the stream's own %d kept", c.name, got.MaxMsgs, c.have.MaxMsgs)
		}
	}
}
