package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/cmd/cli/clitest"
	"github.com/claimstore/claimstore/outbox"
)

// execCLI runs a command tree of its own (NewRoot), every flag at its
// default, with args under ctx and returns stdout, stderr and the error
// (clitest.Run).
func execCLI(ctx context.Context, args ...string) (string, string, error) {
	return clitest.Run(ctx, NewRoot(), args...)
}

// sqliteOutbox creates an SQLite file with a message table and returns its
// DSN and a repository on it.
func sqliteOutbox(t *testing.T, table string, opts ...outbox.Option) (string, *outbox.Repository) {
	t.Helper()
	ctx := context.Background()
	dsn := sqlstore.SQLiteDSN(filepath.Join(t.TempDir(), "app.db"))
	db, err := sqlstore.Open(ctx, "sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	s, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return dsn, r
}

func addMessages(t *testing.T, r *outbox.Repository, prefix, topic string, n int) []*outbox.Message {
	t.Helper()
	ms := make([]*outbox.Message, n)
	for i := range ms {
		ms[i] = &outbox.Message{MessageID: fmt.Sprintf("%s-%d", prefix, i), Topic: topic, Payload: []byte("{}")}
	}
	if err := r.Add(context.Background(), nil, ms...); err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestOutboxStatusRequeuePurge(t *testing.T) {
	ctx := context.Background()
	policy := outbox.RetryPolicy{BaseDelay: time.Hour, Multiplier: 1, MaxDelay: time.Hour, MaxRetries: 3}
	dsn, r := sqliteOutbox(t, "events_out", outbox.WithRetryPolicy(policy))
	addMessages(t, r, "m", "t", 10)
	got, err := r.ClaimBatch(ctx, "w", 9, "")
	if err != nil || len(got) != 9 {
		t.Fatal(err)
	}
	if _, err := r.MarkPublished(ctx, "w", got[0].ID, got[1].ID, got[2].ID, got[3].ID); err != nil {
		t.Fatal(err)
	}
	fails := []outbox.Failure{outbox.Failed(&got[4], errors.New("flaky")), outbox.Failed(&got[5], errors.New("flaky")),
		outbox.Failed(&got[6], outbox.Permanent(errors.New("payload rejected\nby broker")))}
	if _, err := r.MarkFailed(ctx, "w", fails...); err != nil {
		t.Fatal(err)
	}
	// Now: 4 published, 2 failed, 1 abandoned, 2 processing, 1 pending.
	base := []string{"--backend", "sqlite", "--dsn", dsn, "--log-level", "warn", "outbox"}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := execCLI(ctx, append(append([]string{}, base...), args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}
	out := run("status", "--table", "events_out", "--list", "abandoned", "--limit", "10", "--broker", "")
	for _, want := range []string{"pending     1", "processing  2", "published   4", "failed      2", "abandoned   1", "total       10",
		"oldest unpublished message", "m-6", "payload rejected by broker"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if out := run("requeue", "--table", "events_out", "--all=false", "--status", "failed", fmt.Sprint(got[4].ID), fmt.Sprint(got[6].ID)); !strings.Contains(out, "requeued 1 message(s)") {
		t.Errorf("requeue of one failed and one abandoned id with --status failed: %s", out)
	}
	if out := run("requeue", "--table", "events_out", "--all", "--status", "any"); !strings.Contains(out, "requeued 2 message(s)") {
		t.Errorf("requeue --all: %s", out)
	}
	c, err := r.Counts(ctx)
	if err != nil || c[outbox.StatusPending] != 4 || c[outbox.StatusFailed]+c[outbox.StatusAbandoned] != 0 {
		t.Fatalf("after requeue: %v %v", c, err)
	}
	if out := run("purge", "--table", "events_out", "--status", "published", "--older-than", "1h", "--batch", "2", "--max-batches", "0"); !strings.Contains(out, "deleted 0 published") {
		t.Errorf("purge of young rows: %s", out)
	}
	if out := run("purge", "--table", "events_out", "--status", "published", "--older-than", "0s", "--batch", "3", "--max-batches", "0"); !strings.Contains(out, "deleted 4 published") {
		t.Errorf("purge: %s", out)
	}
	if n, _ := r.Store().Count(ctx, dao.Criteria{}); n != 6 {
		t.Fatalf("%d rows left after purge, want 6", n)
	}

	for _, bad := range [][]string{
		{"requeue", "--table", "events_out", "--all=false", "--status", "any"},
		{"requeue", "--table", "events_out", "--all=false", "--status", "any", "x"},
		{"requeue", "--table", "events_out", "--all=false", "--status", "published", "1"},
		{"status", "--table", "events_out", "--list", "nope"},
		{"status", "--table", "bad name;"},
		{"purge", "--table", "events_out", "--status", "pending"},
	} {
		if _, _, err := execCLI(ctx, append(append([]string{}, base...), bad...)...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, _, err := execCLI(ctx, "--backend", "memory", "--dsn", "", "outbox", "status", "--table", "events_out", "--list", ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("memory backend: %v", err)
	}
	if _, _, err := execCLI(ctx, "--backend", "sqlite", "--dsn", "", "outbox", "status", "--table", "events_out", "--list", ""); !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--dsn") {
		t.Errorf("sqlite without --dsn: %v", err)
	}
}
