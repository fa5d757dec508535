package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestUIFindsJobTable runs `claimstore ui` on a database holding two job
// tables and a schedule table: the job table of the default name is
// shown next to the schedule table, another one when
// --jobs-table names it; a --jobs-table that names no table, or a table
// that is not a job table, is an error.
func TestUIFindsJobTable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	testdb.CloseAtCleanup(t, db)
	s := seedCLIJobs(t, db, jobs.DefaultTable, jobs.DefaultQueueTable)
	other := seedCLIJobs(t, db, "shop_jobs", "shop_job_queues")
	if err := db.Exec("CREATE TABLE not_jobs (id INTEGER PRIMARY KEY, state TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	if err := dispatch.MigrateSchedules(ctx, db, ""); err != nil {
		t.Fatal(err)
	}
	g := Globals{Backend: "sqlite", DSN: path}

	serve := func(o uiOptions, check func(read func(string) string)) {
		t.Helper()
		o.addr, o.pool = "127.0.0.1:0", 2
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		addrs := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- runUI(runCtx, g, o, func(a string) { addrs <- a }) }()
		var addr string
		select {
		case addr = <-addrs:
		case err := <-done:
			t.Fatalf("ui %+v: %v", o, err)
		}
		check(func(p string) string {
			t.Helper()
			resp, err := http.Get("http://" + addr + p)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d\n%s", p, resp.StatusCode, b)
			}
			return string(b)
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("ui ended with %v", err)
		}
	}

	serve(uiOptions{}, func(read func(string) string) {
		if page := read("/"); !strings.Contains(page, `data-table="claimstore_jobs"`) || strings.Contains(page, "shop_jobs") || !strings.Contains(page, dispatch.DefaultScheduleTable) {
			t.Errorf("the overview does not show exactly the default job table:\n%s", page)
		}
		if page := read("/jobs?state=discarded"); !strings.Contains(page, `<tr data-id="`+itoa(s.failed)+`">`) {
			t.Errorf("the jobs page does not list the discarded job:\n%s", page)
		}
		if page := read("/queues"); strings.Contains(page, "no queue table") {
			t.Errorf("the queue table was not found:\n%s", page)
		}
	})
	serve(uiOptions{jobs: "shop_jobs", queues: "shop_job_queues", jobsNamed: true, readOnly: true}, func(read func(string) string) {
		if page := read("/jobs"); !strings.Contains(page, `data-table="shop_jobs"`) || !strings.Contains(page, `<tr data-id="`+itoa(other.mail)+`">`) || strings.Contains(page, `action="do"`) {
			t.Errorf("--jobs-table shop_jobs --read-only:\n%s", page)
		}
	})
	// --tables leaves the job table out unless it names it.
	serve(uiOptions{tables: dispatch.DefaultScheduleTable}, func(read func(string) string) {
		if page := read("/"); strings.Contains(page, "claimstore_jobs") || !strings.Contains(page, dispatch.DefaultScheduleTable) {
			t.Errorf("--tables %s:\n%s", dispatch.DefaultScheduleTable, page)
		}
	})

	for _, o := range []uiOptions{
		{jobs: "missing_jobs", jobsNamed: true},
		{jobs: "not_jobs"},
		{jobs: "bad-name"},
	} {
		o.addr, o.pool = "127.0.0.1:0", 2
		runCtx, cancel := context.WithCancel(ctx)
		err := runUI(runCtx, g, o, func(string) { t.Errorf("ui %+v served", o); cancel() })
		cancel()
		if !errors.Is(err, dao.ErrNotFound) && !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("ui %+v: %v, want a refusal", o, err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
