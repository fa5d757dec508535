package natspub_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// The child relay's parameters, passed in its environment.
const (
	envKillChild  = "CLAIMSTORE_LOGKILL_CHILD" // the NATS URL
	envKillLog    = "CLAIMSTORE_LOGKILL_LOG"
	envKillLeases = "CLAIMSTORE_LOGKILL_LEASES"
)

// The log relay of the kill test: 4 partitions, batches of 50, leases of
// 1 s (a dead relay's partitions are taken over within about a second).
const (
	killParts  = 4
	killKeys   = 8
	killPerKey = 300
	killReader = "relay-js"
)

func killRelayConfig(leases *sqlstore.Leases, holder string) outbox.LogRelayConfig {
	return outbox.LogRelayConfig{LogReaderConfig: outbox.LogReaderConfig{
		Reader: killReader, WorkerID: holder, Leases: leases, LogTable: "killtest",
		Lease: time.Second, Batch: 50, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}
}

// chunked publishes a batch ten messages at a time with a millisecond
// between chunks, as a broker far away would take it: a relay killed at
// a random moment is then most likely killed inside a batch.
type chunked struct{ p *natspub.Publisher }

func (c chunked) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, 0, len(msgs))
	for i := 0; i < len(msgs); i += 10 {
		errs = append(errs, c.p.Publish(ctx, msgs[i:min(i+10, len(msgs))])...)
		time.Sleep(time.Millisecond)
	}
	return errs
}

// TestLogRelayKilledMidBatch kills (SIGKILL) a log relay, running in a
// process of its own, while it publishes a PostgreSQL log of 8 keys × 300
// messages to JetStream; a second relay takes its partitions over when
// their leases end. The stream then holds every message exactly once
// (the batch the dead relay had begun is published again from its start,
// and the stream's duplicate window drops what had arrived), and each
// key's messages in their order.
func TestLogRelayKilledMidBatch(t *testing.T) {
	if url := os.Getenv(envKillChild); url != "" {
		runKillChild(t, url)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := testdb.Postgres(t)
	store := sqlstoretest.Log(t, db)
	leases := sqlstoretest.Leases(t, db)
	lg, err := outbox.NewLog(store, killParts)
	if err != nil {
		t.Fatal(err)
	}
	// Stream S of the embedded server, its duplicate window a minute: far
	// longer than the hand-over.
	nc, js, srv := setup(t)
	const subject = "s.logkill"
	stream, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	// Writers: keys interleaved, in transactions of 40 messages.
	total := killKeys * killPerKey
	var msgs []*outbox.Message
	for i := range killPerKey {
		for k := range killKeys {
			msgs = append(msgs, &outbox.Message{MessageID: fmt.Sprintf("k%d-%04d", k, i), Topic: subject,
				PartitionKey: fmt.Sprintf("key-%d", k), Payload: []byte(strconv.Itoa(i))})
		}
	}
	for i := 0; i < len(msgs); i += 40 {
		batch := msgs[i:min(i+40, len(msgs))]
		if err := db.Transaction(func(tx *gorm.DB) error { return lg.Write(ctx, tx, batch...) }); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() int {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int(info.State.Msgs)
	}

	// The first relay, in a process of its own, killed a quarter of the
	// way in.
	child := exec.Command(os.Args[0], "-test.run=^TestLogRelayKilledMidBatch$", "-test.count=1")
	child.Env = append(os.Environ(), envKillChild+"="+srv.URL(), envKillLog+"="+store.Tables().Log, envKillLeases+"="+leases.Table())
	var out strings.Builder
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for stored() < total/4 {
		if ctx.Err() != nil {
			_ = child.Process.Kill()
			t.Fatalf("the first relay published %d of %d:\n%s", stored(), total, out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = child.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ProcessState.String() != "signal: killed" {
		t.Fatalf("the first relay was not killed: %v\n%s", err, out.String())
	}
	atKill := stored()
	// What the dead relay had committed: every record up to its
	// cursors; what it published beyond them is published again.
	lags, err := lg.Lags(ctx, total)
	if err != nil {
		t.Fatal(err)
	}
	committed := total
	for _, l := range lags {
		committed -= int(l.Behind)
	}

	// The second relay takes over.
	pub, err := natspub.New(nc, natspub.Config{})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewLogRelay(lg, pub, killRelayConfig(leases, "second"))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	for stored() < total && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Error(err)
	}

	// Read the stream in order: every message once, each key in order.
	last := map[int]int{}
	seen := map[string]int{}
	order := 0
	n := stored()
	for seq := uint64(1); seq <= uint64(n); seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		id := raw.Header.Get(jetstream.MsgIDHeader)
		seen[id]++
		var k, i int
		if _, err := fmt.Sscanf(id, "k%d-%d", &k, &i); err != nil {
			t.Fatalf("message %d: id %q", seq, id)
		}
		if prev, ok := last[k]; ok && i != prev+1 {
			order++
			t.Errorf("key %d: message %d after %d", k, i, prev)
		} else if !ok && i != 0 {
			order++
			t.Errorf("key %d begins at message %d", k, i)
		}
		last[k] = i
	}
	dups := n - len(seen)
	missing := total - len(seen)
	t.Logf("%d messages; when the first relay was killed %d were in the stream and its cursors (%d) were past %d, so %d were published again; %d stored after: %d duplicates, %d missing, %d out of order",
		total, atKill, len(lags), committed, atKill-committed, n, dups, missing, order)
	if dups != 0 || missing != 0 {
		t.Errorf("the stream holds %d messages, %d distinct, of %d: want each once", n, len(seen), total)
	}
}

// runKillChild is the first relay: it publishes the log of the parent's
// test until it is killed.
func runKillChild(t *testing.T, url string) {
	db := testdb.Postgres(t)
	store, err := sqlstore.NewLog(db, os.Getenv(envKillLog))
	if err != nil {
		t.Fatal(err)
	}
	leases, err := sqlstore.NewLeases(db, os.Getenv(envKillLeases))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := outbox.NewLog(store, killParts)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := natspub.New(nc, natspub.Config{})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewLogRelay(lg, chunked{pub}, killRelayConfig(leases, "first"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Fatalf("the first relay was not killed: %v", relay.Run(ctx))
}
