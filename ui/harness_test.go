package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/ui"
)

// xssImg and xssScript are last errors that would run script if the
// console wrote them as HTML: each sets window.__xss.
const (
	xssImg    = `<img src=x onerror="window.__xss='img'">`
	xssScript = `<script>window.__xss='script'</script>`
)

// env is a seeded database with its three tables and a console over them.
type env struct {
	name      string
	db        *gorm.DB
	schedules *dao.Table[dispatch.Schedule]
	sc        *dispatch.Schedules
	messages  *dao.Table[outbox.Message]
	repo      *outbox.Repository
	schedT    string
	outboxT   string
	leaseT    string
	sources   []ui.Source
}

// backends are the databases the console is tested on.
var backends = []struct {
	name string
	open func(testing.TB) *gorm.DB
}{
	{"postgres", testdb.Postgres},
	{"sqlite", testdb.SQLite},
}

// seed creates a schedule table, an outbox table and a lease table on db
// (dropped at cleanup) and fills them:
//
//   - schedules: nightly (cron, active), reminder (once, active, in a
//     day), broken (cron, active, last error xssImg), held (paused);
//   - messages: 7 pending, 3 published, 2 abandoned (last errors xssImg
//     and xssScript), 1 failed;
//   - leases: election "relay" held by worker-a.
func seed(t testing.TB, name string, db *gorm.DB) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{name: name, db: db}
	e.schedT = testdb.Table(t, db, "ui_sched")
	e.outboxT = testdb.Table(t, db, "ui_outbox")
	e.leaseT = testdb.Table(t, db, "ui_lease")
	if err := dispatch.MigrateSchedules(ctx, db, e.schedT); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, e.outboxT); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.schedules, err = sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(e.schedT)); err != nil {
		t.Fatal(err)
	}
	if e.sc, err = dispatch.NewSchedules(e.schedules, dispatch.SchedulesConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []dispatch.Spec{
		{Key: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin"},
		{Key: "reminder", At: time.Now().Add(24 * time.Hour)},
		{Key: "broken", Cron: "*/5 * * * *"},
		{Key: "held", Cron: "@hourly"},
	} {
		if _, _, err := e.sc.Add(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.sc.Pause(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.schedules.Update(ctx, dao.Eq(dispatch.ColKey, "broken"), dao.Set{dispatch.ColLastError: xssImg, dispatch.ColFailureCount: 2}); err != nil {
		t.Fatal(err)
	}

	if e.messages, err = sqlstore.New[outbox.Message](db, sqlstore.WithTable(e.outboxT)); err != nil {
		t.Fatal(err)
	}
	if e.repo, err = outbox.New(e.messages); err != nil {
		t.Fatal(err)
	}
	var msgs []*outbox.Message
	add := func(n int, st outbox.Status, lastErr string) {
		for range n {
			m := &outbox.Message{MessageID: fmt.Sprintf("m-%d", len(msgs)), Topic: "orders", Type: "order.created",
				Payload: []byte(`{"order":1}`), TargetBroker: "nats", Status: st, LastError: lastErr, MaxRetries: 3, CreatedAt: time.Now().UTC()}
			if st == outbox.StatusPublished {
				at := time.Now().UTC().Add(-48 * time.Hour)
				m.PublishedAt = &at
			}
			msgs = append(msgs, m)
		}
	}
	add(7, outbox.StatusPending, "")
	add(3, outbox.StatusPublished, "")
	add(1, outbox.StatusAbandoned, xssImg)
	add(1, outbox.StatusAbandoned, xssScript)
	add(1, outbox.StatusFailed, "broker down")
	if err := e.messages.Create(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	leases, err := sqlstore.NewLeases(db, e.leaseT)
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, held, err := leases.AcquireLease(ctx, "relay", "worker-a", time.Minute); err != nil || !held {
		t.Fatalf("acquire: held %v, %v", held, err)
	}

	s1, err := ui.Schedules(e.schedT, e.schedules)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ui.Outbox(e.outboxT, e.repo)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := ui.Leases(e.leaseT, leases)
	if err != nil {
		t.Fatal(err)
	}
	e.sources = []ui.Source{s1, s2, s3}
	return e
}

// serve starts the console over e with cfg (its Sources set to e's).
func (e *env) serve(t testing.TB, cfg ui.Config) *httptest.Server {
	t.Helper()
	cfg.Sources = e.sources
	return serveConsole(t, cfg)
}

// serveConsole starts a server of the console of cfg, closed at cleanup.
func serveConsole(t testing.TB, cfg ui.Config) *httptest.Server {
	t.Helper()
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// mount starts a server with the console over e under /console/ (as a
// program mounts it in its own server) and returns the console's base URL.
func (e *env) mount(t testing.TB, cfg ui.Config) string {
	t.Helper()
	cfg.Sources = e.sources
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/console"
}

// count returns the number of rows of table in status, read with GORM
// (not through the console).
func (e *env) count(t testing.TB, table, status string) int64 {
	t.Helper()
	var n int64
	if err := e.db.Table(table).Where("status = ?", status).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// status returns the status of schedule key, read with GORM.
func (e *env) status(t testing.TB, key string) string {
	t.Helper()
	var s string
	if err := e.db.Table(e.schedT).Select("status").Where("schedule_key = ?", key).Scan(&s).Error; err != nil {
		t.Fatal(err)
	}
	return s
}
