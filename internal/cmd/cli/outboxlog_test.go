package cli

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/outbox"
)

// TestOutboxLogShowsLagAndDeadLetters: `claimstore outbox log` lists each
// reader's cursor with the records behind it, capped by --limit, and the
// dead letters, as tables and as JSON.
func TestOutboxLogShowsLagAndDeadLetters(t *testing.T) {
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
	store, err := sqlstore.NewLog(db, "events_log")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	lg, err := outbox.NewLog(store, 1)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*outbox.Message
	for _, id := range []string{"m-0", "m-1", "m-2", "m-3", "m-4"} {
		msgs = append(msgs, &outbox.Message{MessageID: id, Topic: "orders", Payload: []byte("{}")})
	}
	if err := lg.Write(ctx, nil, msgs...); err != nil {
		t.Fatal(err)
	}
	// The relay read two records and gave up on the first.
	if _, err := store.OpenCursor(ctx, "relay", 0, 1); err != nil {
		t.Fatal(err)
	}
	batch, err := store.Next(ctx, driver.LogNext{Reader: "relay", Partition: 0, Term: 1, Limit: 2})
	if err != nil || len(batch.Records) != 2 {
		t.Fatalf("read: %d records, %v", len(batch.Records), err)
	}
	end := batch.Records[1].Position
	dead := driver.LogDeadLetter{Record: batch.Records[0], LastError: "refused by the broker"}
	if _, err := store.Next(ctx, driver.LogNext{Reader: "relay", Partition: 0, Term: 1, After: end,
		Commit: &driver.LogCommit{To: end, Dead: []driver.LogDeadLetter{dead}}, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	// A consumer group that has read nothing.
	if _, err := store.OpenCursor(ctx, "billing", 0, 1); err != nil {
		t.Fatal(err)
	}

	// Each run starts from the flags' defaults (a tree of its own).
	run := func(args ...string) (string, error) {
		out, _, err := execCLI(ctx, append([]string{"outbox", "log"}, args...)...)
		return out, err
	}
	out, err := run("--backend", "sqlite", "--dsn", dsn, "--log-table", "events_log")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"billing  0", "relay    0", "m-0", "refused by the broker", "dead letters: 1 listed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[1]); len(f) < 5 || f[0] != "billing" || f[4] != "5" {
		t.Errorf("billing's row %q: want 5 behind", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 5 || f[0] != "relay" || f[4] != "3" {
		t.Errorf("relay's row %q: want 3 behind", lines[2])
	}

	out, err = run("--backend", "sqlite", "--dsn", dsn, "--log-table", "events_log", "--limit", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep logReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(rep.Cursors) != 2 || rep.Cursors[0].Behind != 4 || !rep.Cursors[0].AtLeast || rep.Cursors[1].Behind != 3 || rep.Cursors[1].AtLeast ||
		rep.Cursors[0].OldestAgeMS < 0 || len(rep.DeadLetters) != 1 || rep.DeadLetters[0].MessageID != "m-0" || rep.MoreDead {
		t.Errorf("JSON report %+v", rep)
	}

	_, err = run("--backend", "sqlite", "--dsn", dsn, "--log-table", "nothing_here")
	var missing *missingTableError
	if !errors.As(err, &missing) || missing.table != "nothing_here" {
		t.Errorf("missing log: err = %v, want a missing-table error", err)
	}
	for _, args := range [][]string{
		{"--backend", "mysql"},
		{"--backend", "sqlite", "--dsn", dsn, "--limit", "0"},
		{"--backend", "sqlite", "--dsn", dsn, "--dead", "-1"},
	} {
		_, err := run(args...)
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: err = %v, want ErrInvalidArgument", args, err)
		}
	}
}
