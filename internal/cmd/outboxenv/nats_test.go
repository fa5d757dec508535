package outboxenv_test

import (
	"testing"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
)

// TestConnectNATSKeepAlive: a connection from ConnectNATS pings the
// server at NATSPingInterval and gives it up after NATSMaxPingsOut
// unanswered pings, not at the client library's defaults (2 min × 2),
// and reconnects forever.
func TestConnectNATSKeepAlive(t *testing.T) {
	b, err := outboxenv.StartBroker("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	nc, err := outboxenv.ConnectNATS(b.URL, "keep-alive test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Fatal("not connected")
	}
	if nc.Opts.PingInterval != outboxenv.NATSPingInterval || nc.Opts.MaxPingsOut != outboxenv.NATSMaxPingsOut || nc.Opts.MaxReconnect != -1 {
		t.Errorf("ping interval %v, max pings out %d, max reconnects %d; want %v, %d, -1",
			nc.Opts.PingInterval, nc.Opts.MaxPingsOut, nc.Opts.MaxReconnect, outboxenv.NATSPingInterval, outboxenv.NATSMaxPingsOut)
	}
}
