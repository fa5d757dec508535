package logbench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/internal/testutil/testdb"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
)

// TestRun runs a small benchmark on PostgreSQL and SQLite: every phase
// measures something and the stream check passes.
func TestRun(t *testing.T) {
	for _, b := range []struct{ backend, dsn string }{
		{"postgres", testdb.PostgresDSN()},
		{"sqlite", sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "log.db"))},
	} {
		t.Run(b.backend, func(t *testing.T) {
			if b.backend == "postgres" {
				testdb.Postgres(t) // skips with how to start it, or fails in CI
			}
			var progress strings.Builder
			rep, err := Run(context.Background(), Options{Backend: b.backend, DSN: b.dsn, Messages: 3000, Payload: 16, Keys: 10,
				Partitions: 4, Writers: 2, WriteBatch: 200, Relays: 2, Batch: 100, Repeat: 1, Timeout: time.Minute, Progress: &progress})
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if rep.Ceiling <= 0 || rep.Write <= 0 || rep.Relay <= 0 || rep.Republished < 0 {
				t.Fatalf("report %+v", rep)
			}
			var out strings.Builder
			rep.WriteText(&out)
			if !strings.Contains(out.String(), "relay / JetStream ceiling") {
				t.Errorf("report text:\n%s", out.String())
			}
			t.Log(out.String())
		})
	}
}

// TestCheckStreamRefusesDisorder: the read-back fails on a key's messages
// out of order and on a missing one. (A message stored twice cannot be
// made here: the stream's duplicate window drops the second copy.)
func TestCheckStreamRefusesDisorder(t *testing.T) {
	broker, err := outboxenv.StartBroker("")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	nc, err := nats.Connect(broker.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fetchWait = 500 * time.Millisecond
	defer func() { fetchWait = 5 * time.Second }()
	for _, c := range []struct {
		ids  []string
		want string
	}{
		{[]string{"0-0", "1-0", "0-1", "1-1"}, ""},
		{[]string{"0-0", "0-2", "0-1", "1-0"}, "stored after"},
		{[]string{"0-1", "0-0", "1-0", "1-1"}, "stored after"},
		{[]string{"0-0", "0-1", "1-0"}, "read back"},
	} {
		st, subject, drop, err := stream(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range c.ids {
			m := nats.NewMsg(subject)
			m.Header.Set(jetstream.MsgIDHeader, id)
			m.Header.Set("Seq", string(rune('a'+i)))
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		err = checkStream(ctx, st, Options{Messages: 4})
		drop()
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want))) {
			t.Errorf("%v: err = %v, want %q", c.ids, err, c.want)
		}
	}
}
