package dispatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/countstore"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
)

// noted is the row of the wrapped-store tests.
type noted struct {
	ID         int64 `gorm:"primaryKey"`
	Done       bool
	Note       string
	LeaseOwner string `gorm:"size:191"`
	LeaseUntil *time.Time
}

// runNoted runs a worker over store until the n rows it creates first
// have their outcomes written: the rows finish together, the even ones
// with one shared Set, the odd ones with a note of their own. It returns
// the worker's logs.
func runNoted(t *testing.T, table *dao.Table[noted], store dao.Store[noted], n int) string {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		if err := table.Create(ctx, &noted{ID: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncbuf.Buffer
	var started atomic.Int64
	allStarted := make(chan struct{})
	done := dao.Set{"done": true}
	w, err := dispatch.New(dispatch.Config[noted]{
		Store: store, KeyField: "id", Key: func(r *noted) any { return r.ID },
		Due: func(time.Time) dao.Criteria { return dao.Eq("done", false) },
		Handler: func(ctx context.Context, j *dispatch.Job[noted]) dao.Set {
			if started.Add(1) == int64(n) {
				close(allStarted)
			}
			<-allStarted
			if j.Row.ID%2 == 0 {
				return done
			}
			return dao.Set{"done": true, "note": fmt.Sprint("row ", j.Row.ID)}
		},
		Concurrency: 2 * n, BatchSize: n, PollInterval: 20 * time.Millisecond, Lease: time.Hour, OutcomeDelay: 15 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w.Run)
	waitFor(t, 10*time.Second, "every outcome written", func() bool { return w.Stats().Completed == int64(n) })
	rows, err := table.Find(ctx, dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		want := ""
		if r.ID%2 == 1 {
			want = fmt.Sprint("row ", r.ID)
		}
		if !r.Done || r.Note != want || r.LeaseOwner != "" {
			t.Errorf("row %+v: want done, note %q, lease cleared", r, want)
		}
	}
	return logs.String()
}

// A metrics wrapper that embeds dao.Store and forwards dao.KeyUpdater and
// dao.EachUpdater keeps the worker's batched outcomes: the rows that
// finished together are written in a few UpdateKeys and UpdateEach
// calls, none by Update, and New logs nothing about the store.
func TestWrappedStoreForwardingBatchesOutcomes(t *testing.T) {
	table, err := memstore.New[noted]()
	if err != nil {
		t.Fatal(err)
	}
	store := countstore.NewForwarding(table)
	const n = 20
	logs := runNoted(t, table, store, n)
	c := &store.Counts
	t.Logf("%d UpdateKeys, %d UpdateEach, %d Update calls for %d outcomes", c.UpdateKeys.Load(), c.UpdateEach.Load(), c.Update.Load(), n)
	if c.Update.Load() != 0 {
		t.Errorf("%d Update calls: outcomes written one row at a time through a forwarding wrapper", c.Update.Load())
	}
	if c.UpdateKeys.Load() == 0 || c.UpdateEach.Load() == 0 || c.UpdateKeys.Load()+c.UpdateEach.Load() > 4 {
		t.Errorf("%d UpdateKeys and %d UpdateEach calls for %d outcomes that finished together; want one or two of each",
			c.UpdateKeys.Load(), c.UpdateEach.Load(), n)
	}
	if strings.Contains(logs, "dao.KeyUpdater") || strings.Contains(logs, "dao.EachUpdater") {
		t.Errorf("New reported a missing interface of a forwarding wrapper:\n%s", logs)
	}
}

// A wrapper that forwards nothing but dao.Store works, one Update per
// outcome, and New says so once, at Warn, naming the interface.
func TestWrappedStoreWithoutForwardingLogsPerRowOutcomes(t *testing.T) {
	table, err := memstore.New[noted]()
	if err != nil {
		t.Fatal(err)
	}
	store := countstore.NewPlain[noted](table)
	const n = 6
	logs := runNoted(t, table, store, n)
	if got := store.Counts.Update.Load(); got != n {
		t.Errorf("%d Update calls for %d outcomes over a store without UpdateKeys, want %d", got, n, n)
	}
	if strings.Count(logs, "is not a dao.KeyUpdater") != 1 || !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "one statement per row") {
		t.Errorf("want one Warn naming dao.KeyUpdater and the per-row writes, got logs:\n%s", logs)
	}
}
