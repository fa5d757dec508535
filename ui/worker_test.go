package ui_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/ui"
)

// thumbnail is a worker's table of one's own.
type thumbnail struct {
	ID          int64
	Status      string `gorm:"size:16;index"`
	RunAt       time.Time
	LockedBy    string `gorm:"size:64"`
	LockedUntil *time.Time
	LastError   string
}

func TestWorkerTable(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t)
	store, err := sqlstore.New[thumbnail](db, sqlstore.WithTable("thumbnails"))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	later := now.Add(time.Hour)
	rows := []*thumbnail{
		{Status: "ready", RunAt: now.Add(-time.Minute)},
		{Status: "ready", RunAt: now.Add(-2 * time.Minute)},
		{Status: "ready", RunAt: later},
		{Status: "running", RunAt: now.Add(-time.Minute), LockedBy: "w-1", LockedUntil: &later},
		{Status: "failed", RunAt: now, LastError: "<b>decoder</b> failed"},
	}
	if err := store.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	src, err := ui.Worker(ui.WorkerTable[thumbnail]{
		Store: store, StatusField: "status", Statuses: []string{"ready", "running", "failed"}, FailedStatuses: []string{"failed"},
		Due:        func(now time.Time) dao.Criteria { return dao.And(dao.Eq("status", "ready"), dao.Le("run_at", now)) },
		DueField:   "run_at",
		OwnerField: "locked_by", UntilField: "locked_until", ErrorField: "last_error",
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Config{Sources: []ui.Source{src}})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Overview(ctx)[0]
	if o.Error != "" || o.Name != "thumbnails" || o.Kind != "worker" {
		t.Fatalf("overview %+v", o)
	}
	want := map[string]int64{"ready": 3, "running": 1, "failed": 1}
	for _, c := range o.Counts {
		if c.N != want[c.Status] || c.Estimate {
			t.Errorf("%s: %+v, want %d", c.Status, c, want[c.Status])
		}
	}
	if o.Due.N != 2 || o.Failures.N != 1 || o.OldestDue < 100 || o.OldestDue > 300 {
		t.Errorf("due %+v, failures %+v, oldest %.0fs", o.Due, o.Failures, o.OldestDue)
	}
	if len(o.InFlight) != 1 || o.InFlight[0].Owner != "w-1" {
		t.Errorf("in flight %+v", o.InFlight)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, _, page := get(t, client(t), srv.URL+"/row?t=thumbnails&id="+itoa(rows[4].ID))
	if code != http.StatusOK || !strings.Contains(page, "&lt;b&gt;decoder&lt;/b&gt; failed") {
		t.Fatalf("row detail %d:\n%s", code, page)
	}
	if _, err := ui.Worker(ui.WorkerTable[thumbnail]{Store: store}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("no status field: %v", err)
	}
}
