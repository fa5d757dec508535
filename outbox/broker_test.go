package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
)

const (
	testStream  = "OUTBOX"
	testSubject = "events.test"
)

// broker is an embedded NATS JetStream server with a stream on events.>,
// and a client connection that reconnects forever.
type broker struct {
	t    *testing.T
	dir  string
	srv  *natsembed.Server
	port int
	nc   *nats.Conn
	js   jetstream.JetStream
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	b := &broker{t: t, dir: t.TempDir()}
	b.start()
	nc, err := nats.Connect(b.srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	b.nc = nc
	if b.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: testStream, Subjects: []string{"events.>"}, Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		if b.srv != nil {
			b.srv.Shutdown()
		}
	})
	return b
}

// start (re)starts the server on the same port and store directory.
func (b *broker) start() {
	b.t.Helper()
	var err error
	for range 50 { // the old listener may take a moment to free the port
		b.srv, err = natsembed.Start(natsembed.Options{StoreDir: b.dir, Port: b.port})
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	b.port = b.srv.Port()
}

// stop shuts the server down and waits until the client has noticed, so
// that publishes from then on wait for the server to come back.
func (b *broker) stop() {
	b.srv.Shutdown()
	b.srv = nil
	deadline := time.Now().Add(10 * time.Second)
	for b.nc.Status() == nats.CONNECTED {
		if time.Now().After(deadline) {
			b.t.Fatal("the client did not notice the server shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (b *broker) publisher(t *testing.T, ackTimeout time.Duration) *natspub.Publisher {
	t.Helper()
	p, err := natspub.New(b.nc, natspub.Config{AckTimeout: ackTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (b *broker) audit(t *testing.T) *natspub.AuditResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := natspub.Audit(ctx, b.js, testStream)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkExactlyOnce asserts that the stream holds each of want once and
// nothing else.
func (b *broker) checkExactlyOnce(t *testing.T, want []string) {
	t.Helper()
	a := b.audit(t)
	if a.Messages != uint64(len(want)) || a.Read != len(want) || a.Distinct() != len(want) || a.Duplicates() != 0 || a.NoID != 0 {
		t.Fatalf("stream holds %d messages (read %d, %d distinct ids, %d duplicates, %d without id); want %d, each once",
			a.Messages, a.Read, a.Distinct(), a.Duplicates(), a.NoID, len(want))
	}
	for _, id := range want {
		if a.IDs[id] != 1 {
			t.Fatalf("message %q is in the stream %d times", id, a.IDs[id])
		}
	}
}

// testLogger logs warnings and errors to the test log.
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// running is a relay started in the background.
type running struct {
	relay  *outbox.Relay
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	took   time.Duration // from cancel to Run's return
}

func startRelay(t *testing.T, repo *outbox.Repository, pub outbox.Publisher, cfg outbox.RelayConfig) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	r, err := outbox.NewRelay(repo, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return runRelay(t, r)
}

func runRelay(t *testing.T, r *outbox.Relay) *running {
	ctx, cancel := context.WithCancel(context.Background())
	rr := &running{relay: r, cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() { rr.stop(t) })
	return rr
}

// stop cancels the relay and waits for Run to return; later calls do
// nothing.
func (rr *running) stop(t *testing.T) {
	t.Helper()
	rr.once.Do(func() {
		start := time.Now()
		rr.cancel()
		select {
		case err := <-rr.done:
			rr.took = time.Since(start)
			if err != nil {
				t.Errorf("relay: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("relay did not stop within 30s")
		}
	})
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counts(t *testing.T, r *outbox.Repository) map[outbox.Status]int64 {
	t.Helper()
	c, err := r.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
