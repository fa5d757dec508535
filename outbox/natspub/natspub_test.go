package natspub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natsembed"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/nats-io/nats-server/v2/server"
)

// setup starts an embedded JetStream server with stream S on "s.>" and a
// duplicate window of one minute.
func setup(t *testing.T) (*nats.Conn, jetstream.JetStream, *natsembed.Server) {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return nc, js, srv
}

func TestPublishHeadersAndDeduplication(t *testing.T) {
	nc, js, _ := setup(t)
	p, err := natspub.New(nc, natspub.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msgs := []outbox.Message{
		{ID: 1, MessageID: "a", Topic: "s.one", Type: "t.created", Payload: []byte("A"), Headers: outbox.Headers{"X-Tenant": "7"},
			CorrelationID: "corr", CausationID: "cause", PartitionKey: "pk"},
		{ID: 2, MessageID: "b", Topic: "s.two", Payload: []byte("B")},
	}
	for round := range 3 { // the same messages three times: stored once
		for i, err := range p.Publish(ctx, msgs) {
			if err != nil {
				t.Fatalf("round %d, message %d: %v", round, i, err)
			}
		}
	}
	a, err := natspub.Audit(ctx, js, "S")
	if err != nil {
		t.Fatal(err)
	}
	if a.Messages != 2 || a.Distinct() != 2 || a.Duplicates() != 0 || a.IDs["a"] != 1 || a.IDs["b"] != 1 {
		t.Fatalf("audit %+v", a)
	}
	s, _ := js.Stream(ctx, "S")
	raw, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		jetstream.MsgIDHeader: "a", "X-Tenant": "7", natspub.HeaderType: "t.created",
		natspub.HeaderCorrelationID: "corr", natspub.HeaderCausationID: "cause", natspub.HeaderPartitionKey: "pk",
	}
	for k, v := range want {
		if got := raw.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if raw.Subject != "s.one" || !bytes.Equal(raw.Data, []byte("A")) {
		t.Fatalf("stored %s %q", raw.Subject, raw.Data)
	}
	second, err := s.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if second.Header.Get(natspub.HeaderType) != "" || second.Header.Get(jetstream.MsgIDHeader) != "b" {
		t.Fatalf("second message headers %v", second.Header)
	}
}

func TestPublishErrors(t *testing.T) {
	nc, _, _ := setup(t)
	p, err := natspub.New(nc, natspub.Config{
		AckTimeout: time.Second,
		Subject:    func(m *outbox.Message) string { return "s." + m.Topic },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	huge := make([]byte, nc.MaxPayload()+1)
	errs := p.Publish(ctx, []outbox.Message{
		{MessageID: "ok", Topic: "fine"},
		{MessageID: "big", Topic: "fine", Payload: huge},
		{MessageID: "bad", Topic: "bad subject"},
	})
	if errs[0] != nil {
		t.Fatalf("good message: %v", errs[0])
	}
	for _, i := range []int{1, 2} {
		if !errors.Is(errs[i], outbox.ErrPermanent) {
			t.Errorf("message %d: %v, want a permanent error", i, errs[i])
		}
	}
	if !errors.Is(errs[1], nats.ErrMaxPayload) {
		t.Errorf("oversized message: %v, want nats.ErrMaxPayload reachable", errs[1])
	}
	// No stream on the subject: not permanent (the stream may be created).
	noStream, err := natspub.New(nc, natspub.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if errs := noStream.Publish(ctx, []outbox.Message{{MessageID: "x", Topic: "elsewhere"}}); !errors.Is(errs[0], outbox.ErrNoStream) ||
		errors.Is(errs[0], outbox.ErrPermanent) || !errors.Is(errs[0], jetstream.ErrNoStreamResponse) {
		t.Fatalf("no stream: %v, want a transient outbox.ErrNoStream keeping jetstream.ErrNoStreamResponse", errs[0])
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if errs := p.Publish(cancelled, []outbox.Message{{MessageID: "c", Topic: "fine"}}); !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("cancelled context: %v", errs[0])
	}
	if _, err := natspub.New(nil, natspub.Config{}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("nil connection: %v", err)
	}
}

func TestPublishWhileServerDownTimesOut(t *testing.T) {
	nc, _, srv := setup(t)
	p, err := natspub.New(nc, natspub.Config{AckTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	errs := p.Publish(ctx, []outbox.Message{{MessageID: "x", Topic: "s.x"}, {MessageID: "y", Topic: "s.y"}})
	for i, err := range errs {
		if err == nil {
			t.Fatalf("message %d acknowledged by a stopped server", i)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("publish against a stopped server took %v, want about the ack timeout", took)
	}
}

// TestShortDuplicateWindowWarnsOnce: a publisher told the relay's retry
// horizon warns once per stream whose duplicate window is shorter (S keeps
// ids for one minute), at the stream's first ack, and not for a stream
// whose window covers the horizon.
func TestShortDuplicateWindowWarnsOnce(t *testing.T) {
	nc, js, _ := setup(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "L", Subjects: []string{"l.>"}, Duplicates: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	horizon := outbox.RetryHorizon(outbox.DefaultRetryPolicy(), outbox.RelayConfig{})
	p, err := natspub.New(nc, natspub.Config{MinDuplicateWindow: horizon, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		msgs := []outbox.Message{
			{MessageID: fmt.Sprint("s", round), Topic: "s.x"},
			{MessageID: fmt.Sprint("l", round), Topic: "l.x"},
		}
		for i, err := range p.Publish(ctx, msgs) {
			if err != nil {
				t.Fatalf("round %d, message %d: %v", round, i, err)
			}
		}
	}
	out := logs.String()
	if n := strings.Count(out, "duplicate window shorter"); n != 1 || !strings.Contains(out, "stream=S") {
		t.Fatalf("want one warning for stream S, got %d:\n%s", n, out)
	}
	if strings.Contains(out, "stream=L") {
		t.Fatalf("warned for stream L, whose window is an hour:\n%s", out)
	}
	w, err := p.CheckStream(ctx, "S")
	if !errors.Is(err, natspub.ErrShortWindow) || w != time.Minute {
		t.Fatalf("CheckStream(S) = %v, %v; want 1m0s and ErrShortWindow", w, err)
	}
	if w, err := p.CheckStream(ctx, "L"); err != nil || w != time.Hour {
		t.Fatalf("CheckStream(L) = %v, %v", w, err)
	}
	if _, err := p.CheckStream(ctx, "NONE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("CheckStream(NONE) = %v, want jetstream.ErrStreamNotFound", err)
	}
	if _, err := natspub.New(nc, natspub.Config{MinDuplicateWindow: -1}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("negative window: %v", err)
	}
}

// A window check that fails for a reason other than a short window (here
// the account may not read stream information) is not tried again on
// every publish, each try waiting for the server: it is logged at WARN
// once and tried again after a minute.
func TestFailedWindowCheckIsNotRepeatedEachPublish(t *testing.T) {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{
			{Username: "admin", Password: "a"},
			{Username: "relay", Password: "r", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.INFO.>"}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	connect := func(user, pass string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, pass))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	admin, err := jetstream.New(connect("admin", "a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Duplicates: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	p, err := natspub.New(connect("relay", "r"), natspub.Config{MinDuplicateWindow: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		for i, err := range p.Publish(ctx, []outbox.Message{{MessageID: fmt.Sprint("m", round), Topic: "s.x"}}) {
			if err != nil {
				t.Fatalf("round %d, message %d: %v", round, i, err)
			}
		}
	}
	out := logs.String()
	if n := strings.Count(out, "duplicate window not checked"); n != 1 || !strings.Contains(out, "level=WARN") {
		t.Fatalf("%d failed checks logged in 3 publishes, want 1 at WARN:\n%s", n, out)
	}
}
