package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/ui"
)

// benchRows is the size of the tables of BenchmarkOverview:
// CLAIMSTORE_UI_BENCH_ROWS, default 1,000,000.
func benchRows(b *testing.B) int {
	n := 1_000_000
	if v := os.Getenv("CLAIMSTORE_UI_BENCH_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("CLAIMSTORE_UI_BENCH_ROWS=%q: want a positive integer", v)
		}
	}
	return n
}

// BenchmarkOverview measures the console's overview (the page's JSON
// endpoint, api/overview, without HTTP) of one large table on PostgreSQL:
//
//   - outbox-tail and outbox-scattered: a message table of
//     CLAIMSTORE_UI_BENCH_ROWS rows (default 1,000,000): 98.9 % published,
//     1 % pending (the newest rows, or every 100th row), 0.1 % abandoned;
//     its overview, and its outbox page (counts, topics, abandoned
//     messages);
//   - schedules: a schedule table of as many rows: all active cron
//     schedules, 1,000 of them due;
//   - jobs: a job table (jobs.Migrate) of as many rows: 98.9 % completed,
//     the newest 1 % available (1 in 100 of them running), 0.1 %
//     discarded with an attempt error, one in ten in queue mail; its
//     overview, the jobs page (all, discarded, mail's available) and a
//     job's page.
//
// The tables are analyzed after the load, as autovacuum does after a
// large change (statistics missing make the console count every status
// exactly: slower, never wrong). Run:
//
//	go test -run '^$' -bench Overview -benchtime 20x ./ui/
func BenchmarkOverview(b *testing.B) {
	db := testdb.Postgres(b)
	rows := benchRows(b)
	ctx := context.Background()
	// pending: the newest 1 % (the relay publishes in order, so what waits
	// is the tail of the table), or every 100th row (scattered: the worst
	// case, one heap page per pending row).
	for _, layout := range []struct{ name, pending string }{
		{"outbox-tail", "g > ? * 0.99"},
		{"outbox-scattered", "g % 100 = 0 AND ? > 0"},
	} {
		b.Run(layout.name, func(b *testing.B) {
			table := testdb.Table(b, db, "ui_bench_outbox")
			if err := outbox.Migrate(ctx, db, table); err != nil {
				b.Fatal(err)
			}
			load(b, db, `INSERT INTO `+table+` (message_id, topic, type, payload, target_broker, partition_key, priority, status,
  retry_count, max_retries, locked_by, last_error, created_at, published_at, correlation_id, causation_id)
SELECT 'm-' || g, 'orders', 'order.created', '{"order":1}', 'nats', '', 0,
  CASE WHEN `+layout.pending+` THEN 'pending' WHEN g % 1000 = 1 THEN 'abandoned' ELSE 'published' END,
  0, 5, '', CASE WHEN g % 1000 = 1 THEN 'broker down' ELSE '' END,
  now() - (? - g) * interval '1 millisecond',
  CASE WHEN `+layout.pending+` OR g % 1000 = 1 THEN NULL ELSE now() END, '', ''
FROM generate_series(1, ?) g`, table, rows, rows, rows, rows)
			store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			repo, err := outbox.New(store)
			if err != nil {
				b.Fatal(err)
			}
			src, err := ui.Outbox(table, repo)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("overview", func(b *testing.B) { overview(b, src) })
			b.Run("outbox-page", func(b *testing.B) { servePage(b, src, "/outbox") })
		})
	}
	b.Run("schedules", func(b *testing.B) {
		table := testdb.Table(b, db, "ui_bench_sched")
		if err := dispatch.MigrateSchedules(ctx, db, table); err != nil {
			b.Fatal(err)
		}
		load(b, db, `INSERT INTO `+table+` (schedule_key, kind, cron, time_zone, next_fire_at, status, failure_count,
  max_failures, last_error, lease_owner, created_at, updated_at)
SELECT 'job-' || g, 'cron', '@hourly', '', CASE WHEN g <= 1000 THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END,
  'active', 0, 5, '', '', now(), now()
FROM generate_series(1, ?) g`, table, rows)
		store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable(table))
		if err != nil {
			b.Fatal(err)
		}
		src, err := ui.Schedules(table, store)
		if err != nil {
			b.Fatal(err)
		}
		overview(b, src)
	})
	b.Run("jobs", func(b *testing.B) {
		table := testdb.Table(b, db, "ui_bench_jobs")
		store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
		if err != nil {
			b.Fatal(err)
		}
		queues, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(table+"_q"))
		if err != nil {
			b.Fatal(err)
		}
		if err := jobs.Migrate(ctx, store, queues); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = jobs.Drop(context.Background(), store, queues) })
		tail := "g > ? * 0.99"
		load(b, db, `INSERT INTO `+table+` (kind, queue, state, priority, args, metadata, tags, attempt, max_attempts, errors,
  scheduled_at, attempted_at, finalized_at, unique_states, lease_owner, lease_until, created_at)
SELECT 'email', CASE WHEN g % 10 = 0 THEN 'mail' ELSE 'default' END,
  CASE WHEN `+tail+` THEN 'available' WHEN g % 1000 = 1 THEN 'discarded' ELSE 'completed' END, 1,
  '{"to":"user' || g || '@example.com"}', '', '', CASE WHEN `+tail+` AND g % 100 <> 0 THEN 0 ELSE 1 END, 25,
  CASE WHEN g % 1000 = 1 AND NOT `+tail+` THEN '[{"attempt":1,"at":"2026-01-01T00:00:00Z","error":"smtp: 550 mailbox unavailable"}]' ELSE '' END,
  now() - (? - g) * interval '1 millisecond',
  CASE WHEN `+tail+` AND g % 100 <> 0 THEN NULL ELSE now() END,
  CASE WHEN `+tail+` THEN NULL ELSE now() END,
  0, CASE WHEN `+tail+` AND g % 100 = 0 THEN 'bench-worker' ELSE '' END,
  CASE WHEN `+tail+` AND g % 100 = 0 THEN now() + interval '1 hour' END,
  now() - (? - g) * interval '1 millisecond'
FROM generate_series(1, ?) g`, table, rows, rows, rows, rows, rows, rows, rows, rows, rows, rows)
		c, err := jobs.NewClient(jobs.Config{Store: store, QueueStore: queues})
		if err != nil {
			b.Fatal(err)
		}
		src, err := ui.Jobs(table, c)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("overview", func(b *testing.B) { overview(b, src) })
		b.Run("jobs-page", func(b *testing.B) { servePage(b, src, "/jobs") })
		b.Run("jobs-page-discarded", func(b *testing.B) { servePage(b, src, "/jobs?state=discarded") })
		b.Run("jobs-page-mail-available", func(b *testing.B) { servePage(b, src, "/jobs?queue=mail&state=available") })
		b.Run("job-page", func(b *testing.B) { servePage(b, src, "/job?id=1") })
	})
}

// load runs the insert statement with args and analyzes table.
func load(b testing.TB, db *gorm.DB, insert, table string, args ...any) {
	b.Helper()
	if err := db.Exec(insert, args...).Error; err != nil {
		b.Fatal(err)
	}
	if err := db.Exec("ANALYZE " + table).Error; err != nil {
		b.Fatal(err)
	}
}

// servePage times the console's page at path over src, without HTTP.
func servePage(b *testing.B, src ui.Source, path string) {
	h, err := ui.New(ui.Config{Sources: []ui.Source{src}})
	if err != nil {
		b.Fatal(err)
	}
	get := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `class="error"`) {
			b.Fatalf("GET %s: %d\n%s", path, w.Code, w.Body.String())
		}
	}
	get()
	for b.Loop() {
		get()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
}

// overview times the overview of src and reports its counts once.
func overview(b *testing.B, src ui.Source) {
	h, err := ui.New(ui.Config{Sources: []ui.Source{src}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	o := h.Overview(ctx)[0]
	if o.Error != "" {
		b.Fatal(o.Error)
	}
	for _, c := range o.Counts {
		b.Logf("%s: %s", c.Status, c)
	}
	b.Logf("due %s, failures %s", o.Due, o.Failures)
	b.ResetTimer()
	for b.Loop() {
		if o := h.Overview(ctx)[0]; o.Error != "" {
			b.Fatal(o.Error)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/overview")
}
