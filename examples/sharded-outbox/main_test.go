package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// The example on the local PostgreSQL server with NATS inside the process:
// both shards take deposits, the stream holds each message once and in
// order per account, and the two databases are gone afterwards.
func TestRun(t *testing.T) {
	admin := testdb.Postgres(t) // skips when the server is down
	count := func() (n int64) {
		if err := admin.Raw("SELECT count(*) FROM pg_database WHERE datname LIKE 'claimstore_example_shard_%'").Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	var out bytes.Buffer
	cfg := config{dsn: testdb.PostgresDSN(), accounts: 30, deposits: 4}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	text := out.String()
	for _, want := range []string{
		"wrote 120 deposits of 30 accounts to 2 databases",
		"stream EXAMPLE_SHARDED: 120 messages, 0 duplicates, 0 out of order per account",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, ": 0 deposits") {
		t.Error("a shard took no deposit")
	}
	if after := count(); after != before {
		t.Errorf("%d example databases before the run, %d after", before, after)
	}
}
