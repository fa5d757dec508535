package natsembed_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/claimstore/claimstore/outbox/natsembed"
)

func TestStartRestartSamePort(t *testing.T) {
	dir := t.TempDir()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Port()
	if port == 0 {
		t.Fatal("no port")
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Shutdown()
	again, err := natsembed.Start(natsembed.Options{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Shutdown()
	if again.Port() != port {
		t.Fatalf("restarted on %d, want %d", again.Port(), port)
	}
	if _, err := natsembed.Start(natsembed.Options{}); err == nil {
		t.Fatal("start without a store dir succeeded")
	}
}
