//go:build linux

package hatest_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// haEnabled skips t unless CLAIMSTORE_HA=1.
func haEnabled(t testing.TB) {
	t.Helper()
	if os.Getenv("CLAIMSTORE_HA") != "1" {
		t.Skip("starts server processes on 127.0.0.1 (a 3-node nats-server cluster on ports 14222-14224, a pg_auto_failover formation on 15500-15502, a MariaDB Galera Cluster on 14306-14308) and needs PostgreSQL: run with CLAIMSTORE_HA=1 (make ha)")
	}
}

// haMessages is the number of messages of a run: CLAIMSTORE_HA_MESSAGES,
// default 20 000.
func haMessages(t *testing.T) int { return haCount(t, "CLAIMSTORE_HA_MESSAGES") }

// haCount is the number in the environment variable name, at least 1000,
// default 20 000; t fails on anything else.
func haCount(t *testing.T, name string) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return 20000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1000 {
		t.Fatalf("%s=%q: want a number >= 1000", name, s)
	}
	return n
}

// The relay's settings in the failover test: retries that outlast a leader
// election many times over, a lease short enough that a lost batch comes
// back quickly.
var (
	haPolicy = outbox.RetryPolicy{BaseDelay: 100 * time.Millisecond, Multiplier: 2, MaxDelay: 2 * time.Second, Jitter: 0.2, MaxRetries: 30}
	haRelay  = outbox.RelayConfig{
		BatchSize: 250, Loops: 4, Lease: 10 * time.Second, WriteTimeout: 5 * time.Second,
		PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond, DrainTimeout: 5 * time.Second,
	}
)

// An outbox relay on PostgreSQL publishes N messages with Nats-Msg-Id to an
// R3 stream of a three-node JetStream cluster. During the run the stream
// leader is killed with SIGKILL and restarted, then a follower is frozen
// with SIGSTOP (a partition) and resumed. Afterwards the stream holds every
// message exactly once, every row is published, the relay's connection
// reconnected by itself, and every replica caught up.
func TestJetStreamClusterFailover(t *testing.T) {
	haEnabled(t)
	n := haMessages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	since := func() string { return fmt.Sprintf("%6.2fs", time.Since(start).Seconds()) }

	bin := os.Getenv("CLAIMSTORE_NATS_SERVER")
	if bin == "" {
		bin = hatest.DefaultNATSServer
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("nats-server binary: %v (install the nats-server package or set CLAIMSTORE_NATS_SERVER)", err)
	}
	cluster, err := hatest.StartNATSCluster(hatest.NATSClusterOptions{Binary: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	t.Logf("%s cluster listening: %s", since(), cluster.URLs())

	db := testdb.Postgres(t)
	table := testdb.Table(t, db, "ha_outbox")
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := outbox.New(store, outbox.WithRetryPolicy(haPolicy))
	if err != nil {
		t.Fatal(err)
	}

	// The admin connection creates the stream and watches it; the relay
	// has its own connection.
	admin, err := nats.Connect(cluster.URLs(), nats.Name("ha-admin"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}

	// The relay is built first so that its settings, defaults filled in,
	// size the duplicate window.
	tag := outboxenv.RandomHex(4)
	streamName, subject := "HA_"+tag, "ha."+tag
	rc := haRelay
	rc.WorkerID = "ha-" + tag
	probe, err := outbox.NewRelay(repo, nopPublisher{}, rc)
	if err != nil {
		t.Fatal(err)
	}
	horizon := outbox.RetryHorizon(haPolicy, probe.Config())
	window := horizon.Round(time.Minute) + time.Minute
	t.Logf("%s retry horizon %v (max retries %d, lease %v, mark timeout %v, idle poll %v): duplicate window %v",
		since(), horizon, haPolicy.MaxRetries, probe.Config().Lease, probe.Config().WriteTimeout, probe.Config().MaxPollInterval, window)

	stream := createStream(ctx, t, ajs, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{subject}, Replicas: 3,
		Storage: jetstream.FileStorage, Duplicates: window,
	})
	if got := mustInfo(ctx, t, stream).Config.Duplicates; got < horizon {
		t.Fatalf("stream duplicate window %v is below the retry horizon %v", got, horizon)
	}
	leader := waitLeader(ctx, t, stream, "")
	t.Logf("%s stream %s R3 created, leader %s", since(), streamName, leader)

	// The relay connects to the leader first, so that killing the leader
	// cuts its connection. Pings every second, two outstanding at most:
	// a frozen server is left after about 3 s rather than the default
	// 2 min × 2.
	li := cluster.Index(leader)
	urls := cluster.Nodes[li].ClientURL
	for i, node := range cluster.Nodes {
		if i != li {
			urls += "," + node.ClientURL
		}
	}
	var disconnects, reconnects atomic.Int64
	nc, err := nats.Connect(urls, nats.Name("ha-relay"), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }),
		nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pub, err := natspub.New(nc, natspub.Config{Subject: func(*outbox.Message) string { return subject }})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(repo, pub, rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s relay connected to %s", since(), nc.ConnectedUrl())

	// Writers add the messages at a steady pace, so that the relay is
	// publishing through every failure below.
	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	const group = 200
	pace := 15 * time.Second / time.Duration(n/group)
	writers := outboxenv.StartWriters(writeCtx, 1, group, n, func(ctx context.Context, first, count int) error {
		next := time.Now().Add(pace)
		msgs := make([]*outbox.Message, count)
		for i := range msgs {
			msgs[i] = &outbox.Message{MessageID: msgID(first + i), Topic: "ha", Payload: []byte(`{"n":` + strconv.Itoa(first+i) + `}`)}
		}
		if err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return repo.Add(ctx, tx, msgs...) }); err != nil {
			return err
		}
		time.Sleep(time.Until(next))
		return nil
	})
	run := startRelay(ctx, relay, writers, n)
	defer run.halt() // before the table is dropped

	published := run.published
	// Every stretch of over 0.5 s without a message marked published while
	// messages were waiting: what a failure costs in latency.
	type stall struct{ at, d time.Duration }
	stallsC := make(chan []stall, 1)
	go func() {
		var stalls []stall
		last, lastAt := published(), time.Now()
		for run.running() {
			time.Sleep(10 * time.Millisecond)
			if p := published(); p != last || p >= n || int(writers.Written.Load()) <= p {
				if d := time.Since(lastAt); d > 500*time.Millisecond && p != last {
					stalls = append(stalls, stall{lastAt.Sub(start), d})
				}
				last, lastAt = p, time.Now()
			}
		}
		stallsC <- stalls
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		run.waitFor(t, what, cond)
	}

	// 1. SIGKILL the stream leader, restart it 2 s later.
	waitFor("a fifth published", func() bool { return published() >= n/5 })
	killed := cluster.Index(leader)
	cluster.Kill(killed)
	tKill := time.Now()
	t.Logf("%s SIGKILL leader %s at %d published", since(), leader, published())
	newLeader := waitLeader(ctx, t, stream, leader)
	t.Logf("%s new leader %s elected %.2fs after the kill", since(), newLeader, time.Since(tKill).Seconds())
	time.Sleep(2 * time.Second)
	if err := cluster.Start(killed); err != nil {
		t.Fatal(err)
	}
	tRestart := time.Now()
	t.Logf("%s restarted %s at %d published (down %.2fs)", since(), leader, published(), tRestart.Sub(tKill).Seconds())
	killedCatchUp := watchCatchUp(ctx, cluster, killed, stream, streamName)

	// 2. Freeze a follower for 5 s: the one the relay is connected to
	// when it is a follower, so that the client must notice a server that
	// holds its socket open but answers nothing.
	waitFor("three fifths published", func() bool { return published() >= 3*n/5 })
	cur := waitLeader(ctx, t, stream, "")
	frozen := -1
	for i, node := range cluster.Nodes {
		if node.Name != cur && node.ClientURL == nc.ConnectedUrl() {
			frozen = i
		}
	}
	if frozen < 0 {
		for i, node := range cluster.Nodes {
			if node.Name != cur && i != killed {
				frozen = i
			}
		}
	}
	relayOnFrozen := cluster.Nodes[frozen].ClientURL == nc.ConnectedUrl()
	if err := cluster.Stop(frozen); err != nil {
		t.Fatal(err)
	}
	tStop := time.Now()
	t.Logf("%s SIGSTOP follower %s (relay connected to it: %v) at %d published", since(), cluster.Nodes[frozen].Name, relayOnFrozen, published())
	time.Sleep(5 * time.Second)
	if err := cluster.Resume(frozen); err != nil {
		t.Fatal(err)
	}
	tResume := time.Now()
	t.Logf("%s SIGCONT %s at %d published (frozen %.2fs)", since(), cluster.Nodes[frozen].Name, published(), tResume.Sub(tStop).Seconds())
	frozenCatchUp := watchCatchUp(ctx, cluster, frozen, stream, streamName)

	// 3. Every message published and marked, every replica at N.
	run.waitWriters(t)
	waitFor("every message published", func() bool { return published() >= n })
	tAll := time.Now()
	t.Logf("%s relay published all %d", since(), n)
	// Every replica must hold the N messages within a minute of the last
	// mark: a replica left behind is a stream running on fewer copies
	// than it was configured with.
	caught := make([]time.Time, len(cluster.Nodes))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		behind := ""
		for i, node := range cluster.Nodes {
			if !caught[i].IsZero() {
				continue
			}
			r, err := cluster.StreamState(ctx, i, streamName, time.Second)
			if err == nil && r.Messages >= uint64(n) {
				caught[i] = time.Now()
				continue
			}
			behind += fmt.Sprintf(" %s (%d messages, last sequence %d, leader %q, err %v)", node.Name, r.Messages, r.LastSeq, r.Leader, err)
		}
		if behind == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("replicas short of %d messages a minute after the relay's last mark:%s", n, behind)
			for i := range caught {
				if caught[i].IsZero() {
					caught[i] = time.Now()
				}
			}
			break
		}
	}
	run.stop(t)

	st := relay.Stats()
	t.Logf("relay totals: claimed %d, published %d, failed attempts %d, abandoned %d, released %d, lease lost %d, mark errors %d",
		st.Claimed, st.Published, st.Failed, st.Abandoned, st.Released, st.LeaseLost, st.MarkErrors)
	t.Logf("relay connection: %d disconnects, %d reconnects, now on %s", disconnects.Load(), reconnects.Load(), nc.ConnectedUrl())
	for _, st := range <-stallsC {
		t.Logf("no publish for %.2fs from %.2fs while messages waited", st.d.Seconds(), st.at.Seconds())
	}
	t.Logf("catch-up of %s (SIGKILLed leader): with the leader %.2fs after its restart, at N %.2fs after it (relay's last mark %.2fs after it)",
		leader, (<-killedCatchUp).Seconds(), caught[killed].Sub(tRestart).Seconds(), tAll.Sub(tRestart).Seconds())
	t.Logf("catch-up of %s (frozen follower): with the leader %.2fs after SIGCONT, at N %.2fs after it (relay's last mark %.2fs after it)",
		cluster.Nodes[frozen].Name, (<-frozenCatchUp).Seconds(), caught[frozen].Sub(tResume).Seconds(), tAll.Sub(tResume).Seconds())
	for i := range cluster.Nodes {
		t.Logf("replica %s at N %.2fs after the relay's last mark", cluster.Nodes[i].Name, max(0, caught[i].Sub(tAll).Seconds()))
	}

	// The verdict: 0 lost, 0 duplicates, in the stream and in the table.
	audit := auditStream(ctx, t, ajs, streamName)
	lost := 0
	for i := range n {
		if audit.IDs[msgID(i)] == 0 {
			lost++
		}
	}
	t.Logf("stream %s: %d messages, %d read, %d distinct ids, %d duplicates, %d without id, %d lost",
		streamName, audit.Messages, audit.Read, audit.Distinct(), audit.Duplicates(), audit.NoID, lost)
	if audit.Messages != uint64(n) || audit.Read != n || audit.Distinct() != n || audit.Duplicates() != 0 || audit.NoID != 0 || lost != 0 {
		t.Errorf("stream holds %d messages (%d read, %d distinct, %d duplicates, %d lost), want %d exactly once",
			audit.Messages, audit.Read, audit.Distinct(), audit.Duplicates(), lost, n)
	}
	counts, err := repo.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[outbox.StatusPublished] != int64(n) {
		t.Errorf("table: %v, want %d published", counts, n)
	}
	if st.Published != int64(n) || st.Abandoned != 0 || st.LeaseLost != 0 {
		t.Errorf("relay totals %+v: want %d published, 0 abandoned, 0 lease lost", st, n)
	}
	if reconnects.Load() == 0 {
		t.Error("the relay's connection never reconnected, though its server was killed")
	}
}

// auditStream reads the stream back with [natspub.Audit], tried again for
// up to 30 s while JetStream answers that it is temporarily unavailable (a
// node that just came back may still be electing its leaders).
func auditStream(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string) *natspub.AuditResult {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		audit, err := natspub.Audit(ctx, js, stream)
		if err == nil {
			return audit
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit: %v", err)
		}
		t.Logf("audit: %v; trying again", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// watchCatchUp measures, from now, how long node i takes to catch up with
// the stream: to store at least the last sequence the stream's leader
// reported just before node i was asked. The duration arrives on the
// channel (-1 if ctx ended first).
func watchCatchUp(ctx context.Context, c *hatest.NATSCluster, i int, s jetstream.Stream, name string) <-chan time.Duration {
	start := time.Now()
	out := make(chan time.Duration, 1)
	go func() {
		for ctx.Err() == nil {
			ictx, cancel := context.WithTimeout(ctx, time.Second)
			info, err := s.Info(ictx)
			cancel()
			if err == nil {
				r, err := c.StreamState(ctx, i, name, time.Second)
				if err == nil && r.LastSeq >= info.State.LastSeq {
					out <- time.Since(start)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		out <- -1
	}()
	return out
}

// msgID is the message id of message i.
func msgID(i int) string { return fmt.Sprintf("ha-%06d", i) }

// createStream creates the stream of cfg, tried again every 250 ms until
// ctx ends: JetStream elects its meta leader a few seconds after the nodes
// start, and until then stream creation fails.
func createStream(ctx context.Context, t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		stream, err := js.CreateStream(cctx, cfg)
		cancel()
		if err == nil {
			return stream
		}
		if ctx.Err() != nil {
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// relayRun is an outbox relay running in its own goroutine while writers
// add the n messages of a run.
type relayRun struct {
	ctx     context.Context // the test's; waits end with it
	relay   *outbox.Relay
	writers *outboxenv.Writers
	n       int
	rctx    context.Context // the relay's; cancelled by halt
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run has returned
	err     error         // Run's error, set before done is closed
}

// startRelay runs relay until ctx ends or stop is called. Callers defer
// halt so that the relay stops before its table is dropped.
func startRelay(ctx context.Context, relay *outbox.Relay, writers *outboxenv.Writers, n int) *relayRun {
	rctx, cancel := context.WithCancel(ctx)
	r := &relayRun{ctx: ctx, relay: relay, writers: writers, n: n, rctx: rctx, cancel: cancel, done: make(chan struct{})}
	go func() { r.err = relay.Run(rctx); close(r.done) }()
	return r
}

// published is the number of messages the relay has published so far.
func (r *relayRun) published() int { return int(r.relay.Stats().Published) }

// running reports whether the relay has not been told to stop.
func (r *relayRun) running() bool { return r.rctx.Err() == nil }

// halt stops the relay and waits for Run to return.
func (r *relayRun) halt() { r.cancel(); <-r.done }

// stop stops the relay, waits for Run to return and fails t with Run's
// error.
func (r *relayRun) stop(t *testing.T) {
	t.Helper()
	r.halt()
	if r.err != nil {
		t.Fatalf("relay: %v", r.err)
	}
}

// waitFor polls cond every 20 ms until it holds, and fails t when a writer
// fails, when the relay stops first or when the test's ctx ends.
func (r *relayRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case err := <-r.writers.Errs:
			t.Fatalf("writer: %v", err)
		case <-r.done:
			t.Fatalf("relay stopped while waiting for %s: %v", what, r.err)
		case <-r.ctx.Done():
			t.Fatalf("timed out waiting for %s: published %d of %d, relay %+v", what, r.relay.Stats().Published, r.n, r.relay.Stats())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitWriters waits until every writer has returned, and fails t when one
// fails or the test's ctx ends first.
func (r *relayRun) waitWriters(t *testing.T) {
	t.Helper()
	select {
	case <-r.writers.Done:
	case err := <-r.writers.Errs:
		t.Fatalf("writer: %v", err)
	case <-r.ctx.Done():
		t.Fatal("writers did not finish")
	}
}

// mustInfo returns the stream's info, retried for up to 10 s while the
// stream has no leader.
func mustInfo(ctx context.Context, t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ictx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := s.Info(ictx)
		cancel()
		if err == nil {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream info: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLeader waits up to 60 s for the stream to report a leader other than
// not, and returns its server name.
func waitLeader(ctx context.Context, t *testing.T, s jetstream.Stream, not string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ictx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := s.Info(ictx)
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != not {
			return info.Cluster.Leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream leader other than %q after 60 s (last error %v)", not, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nopPublisher publishes nothing: it stands in to read a relay's settings
// with defaults filled in.
type nopPublisher struct{}

func (nopPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	return make([]error, len(msgs))
}
