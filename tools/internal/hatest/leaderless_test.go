//go:build linux

package hatest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// While an R3 stream has no leader (its leader was killed and the other
// replicas elect one) a publish to its subject gets no responders, as if
// no stream held the subject. The publisher must not call that
// outbox.ErrNoStream (which the relay logs at ERROR, asking the operator
// to create a stream): the stream exists. The test publishes one message
// at a time from the kill until a new leader answers, and counts each
// kind of error; a missing stream must still be ErrNoStream.
func TestLeaderlessStreamIsNotNoStream(t *testing.T) {
	haEnabled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := os.Getenv("CLAIMSTORE_NATS_SERVER")
	if bin == "" {
		bin = hatest.DefaultNATSServer
	}
	cluster, err := hatest.StartNATSCluster(hatest.NATSClusterOptions{Binary: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	nc, err := nats.Connect(cluster.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream := createStream(ctx, t, js, jetstream.StreamConfig{Name: "LEADERLESS", Subjects: []string{"leaderless"}, Replicas: 3, Storage: jetstream.FileStorage})
	leader := waitLeader(ctx, t, stream, "")
	pub, err := natspub.New(nc, natspub.Config{AckTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id, topic string) error {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		defer pcancel()
		return pub.Publish(pctx, []outbox.Message{{MessageID: id, Topic: topic}})[0]
	}
	if err := publish("before", "leaderless"); err != nil {
		t.Fatalf("publish with a leader: %v", err)
	}
	if err := publish("nowhere", "nowhere"); !errors.Is(err, outbox.ErrNoStream) {
		t.Fatalf("publish to a subject no stream holds: %v, want outbox.ErrNoStream", err)
	}

	cluster.Kill(cluster.Index(leader))
	killed := time.Now()
	var failed, noStream int
	var last error
	for i := 0; ; i++ {
		err := publish(fmt.Sprintf("after-%d", i), "leaderless")
		if err == nil {
			break
		}
		failed++
		last = err
		if errors.Is(err, outbox.ErrNoStream) {
			noStream++
			t.Logf("called a missing stream: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("no publish succeeded after the kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("leader %s killed: %d publishes failed in %.2fs before one was stored, %d of them called a missing stream; last error: %v",
		leader, failed, time.Since(killed).Seconds(), noStream, last)
	if noStream > 0 {
		t.Errorf("%d publishes to a stream without leader wrapped outbox.ErrNoStream", noStream)
	}
}
