package dispatch_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// logRecords decodes the JSON log lines of buf, failing t on one that is not.
func logRecords(t *testing.T, buf *syncbuf.Buffer) []map[string]any {
	t.Helper()
	out, err := buf.Records()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A claim that fails tick after tick, here because another connection
// holds the only due row locked (PostgreSQL's portable claim waits for the
// lock until its deadline), is logged at WARN once for the episode (each
// further failure at DEBUG), and once more, with the number of failed
// claims, when a claim succeeds again: not at WARN at every tick.
func TestClaimFailuresLoggedOncePerEpisode(t *testing.T) {
	db := testdb.Postgres(t)
	ctx := context.Background()
	table := testdb.Table(t, db, "claimlog")
	if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table), sqlstore.WithStrategy(dao.StrategyPortable))
	if err != nil {
		t.Fatal(err)
	}
	addOnce(t, s, 1)
	locked, err := s.Find(ctx, dao.Query{Where: dao.Eq(dispatch.ColKey, "once-000")})
	if err != nil || len(locked) != 1 {
		t.Fatalf("find once-000: %v (%d rows)", err, len(locked))
	}
	var once sync.Once
	hold := testdb.HoldLock(t, db, table, locked[0].ID)
	release := func() { once.Do(hold) }
	t.Cleanup(release)

	var logs syncbuf.Buffer
	c := &leaseChecks{fires: newFires()}
	w := newScheduleWorker(t, s, c.fire, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		WorkerID: "noisy", PollInterval: 50 * time.Millisecond, Lease: 400 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	stop := runWorker(t, w.Run)
	// The claim's deadline is a quarter of the lease (100 ms): claims fail
	// tick after tick while the lock is held. Wait for four of them
	// (each failure is a record, at WARN or DEBUG).
	waitFor(t, 30*time.Second, "four failed claims", func() bool {
		return strings.Count(logs.String(), `"msg":"claim failed"`) >= 4
	})
	release()
	waitFired(t, s, 1, "the schedule fired once the lock was released")
	stop()
	c.checkFiredOnceInLease(t, 1)

	var warns, ends int
	for _, r := range logRecords(t, &logs) {
		msg, _ := r["msg"].(string)
		if !strings.HasPrefix(msg, "claim failed") {
			continue
		}
		t.Logf("%s %s %v", r["level"], msg, r)
		switch {
		case r["level"] == "DEBUG":
		case r["level"] == "WARN" && r["failures"] == nil:
			warns++
			if e, _ := r["err"].(string); !strings.Contains(e, "deadline exceeded") {
				t.Errorf("claim failure logged with err %q, want a deadline", e)
			}
		case r["failures"] != nil:
			ends++
			if n, _ := r["failures"].(float64); n < 4 {
				t.Errorf("end of the episode counts %v failed claims, want several", r["failures"])
			}
		}
	}
	if warns != 1 || ends != 1 {
		t.Fatalf("%d claim-failure warnings and %d end-of-episode records; want one of each", warns, ends)
	}
}
