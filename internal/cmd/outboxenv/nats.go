package outboxenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
)

// Keep-alive of the connections ConnectNATS opens: a ping every
// NATSPingInterval, and the connection is given up (and another server of
// url tried) when NATSMaxPingsOut pings in a row go unanswered. A server
// that keeps the socket open but answers nothing (frozen, or cut off by a
// partition that drops packets) is thus left after about 30 s instead of
// the client library's default of 2 min × 2.
const (
	NATSPingInterval = 10 * time.Second
	NATSMaxPingsOut  = 3
)

// ConnectNATS connects to the NATS server at url (one URL, or several
// separated by commas for a cluster) under the connection name name,
// reconnecting forever after a lost connection, with the keep-alive of
// [NATSPingInterval] and [NATSMaxPingsOut]. The error names the URL and
// --nats-url.
func ConnectNATS(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.PingInterval(NATSPingInterval), nats.MaxPingsOutstanding(NATSMaxPingsOut),
		nats.RetryOnFailedConnect(false))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (--nats-url): %w", url, err)
	}
	return nc, nil
}

// Broker is the NATS server a run publishes to: an external one, or one
// with JetStream embedded in this process.
type Broker struct {
	// URL is the server's client URL.
	URL      string
	embedded *natsembed.Server
	dir      string
}

// StartBroker returns the external server at url, or, when url is empty,
// starts an embedded server with JetStream storage in a fresh temporary
// directory. Close stops an embedded server and removes its storage.
func StartBroker(url string) (*Broker, error) {
	if url != "" {
		return &Broker{URL: url}, nil
	}
	dir, err := os.MkdirTemp("", "claimstore-demo-nats-")
	if err != nil {
		return nil, err
	}
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Broker{URL: srv.URL(), embedded: srv, dir: dir}, nil
}

// Embedded reports whether the server runs in this process.
func (b *Broker) Embedded() bool { return b.embedded != nil }

// Close stops an embedded server and removes its storage; an external
// server is left alone.
func (b *Broker) Close() {
	if b.embedded != nil {
		b.embedded.Shutdown()
		os.RemoveAll(b.dir)
	}
}

// CreateStream creates the JetStream stream name, file-stored, holding
// subject, with the duplicate window dup (the window in which a message
// id published twice is stored once; give it [DuplicateWindow] of the
// relays that publish to the stream). It returns a function that deletes
// the stream (errors ignored: it is clean-up).
func CreateStream(ctx context.Context, js jetstream.JetStream, name, subject string, dup time.Duration) (drop func(), err error) {
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Duplicates: dup, Storage: jetstream.FileStorage}
	// A server-side failure (API error 500, e.g. "error creating store
	// for stream" from an embedded server on a loaded machine) is tried
	// twice more, 200 ms apart; any other error is returned.
	for try := 1; ; try++ {
		_, err = js.CreateStream(ctx, cfg)
		var api *jetstream.APIError
		if err == nil || try == 3 || !errors.As(err, &api) || api.Code != 500 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("create stream %s: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", name, err)
	}
	return func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(dctx, name)
	}, nil
}

// DuplicateWindow returns the duplicate window of a stream that relays
// with settings cfg publish to (zero settings count as the defaults):
// outbox.RetryHorizon of the default retry policy and cfg, rounded up to
// a whole minute; 22 min for the default settings.
func DuplicateWindow(cfg outbox.RelayConfig) time.Duration {
	h := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), cfg)
	return (h + time.Minute - 1).Truncate(time.Minute)
}
