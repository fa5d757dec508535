package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/gorm"

	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/readme"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/ui"
)

// mountConsole serves the console under /console/ of mux, over the
// schedule, outbox and job tables of db, read-only, behind a token.
func mountConsole(mux *http.ServeMux, db *gorm.DB, token string) error {
	schedules, err := sqlstore.New[dispatch.Schedule](db)
	if err != nil {
		return err
	}
	messages, err := sqlstore.New[outbox.Message](db)
	if err != nil {
		return err
	}
	repo, err := outbox.New(messages)
	if err != nil {
		return err
	}
	s, err := ui.Schedules("", schedules)
	if err != nil {
		return err
	}
	o, err := ui.Outbox("", repo)
	if err != nil {
		return err
	}
	// The job table is read and changed through a jobs client that runs
	// no queue; with the queue table, the queues page pauses and resumes.
	jobStore, err := sqlstore.New[jobs.Row](db)
	if err != nil {
		return err
	}
	queueStore, err := sqlstore.New[jobs.Queue](db)
	if err != nil {
		return err
	}
	client, err := jobs.NewClient(jobs.Config{Store: jobStore, QueueStore: queueStore})
	if err != nil {
		return err
	}
	j, err := ui.Jobs(jobs.DefaultTable, client)
	if err != nil {
		return err
	}
	console, err := ui.New(ui.Config{
		Sources:  []ui.Source{s, o, j},
		ReadOnly: true,
		Auth:     ui.TokenAuth(token),
	})
	if err != nil {
		return err
	}
	mux.Handle("/console/", http.StripPrefix("/console", console))
	return nil
}

// Example mounts the console in a server of one's own and reads its
// overview as an operator's browser would.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "console")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		fmt.Println(err)
		return
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	_ = dispatch.MigrateSchedules(ctx, db, "")
	_ = outbox.Migrate(ctx, db, "")
	jobStore, _ := sqlstore.New[jobs.Row](db)
	queueStore, _ := sqlstore.New[jobs.Queue](db)
	_ = jobs.Migrate(ctx, jobStore, queueStore)
	mux := http.NewServeMux()
	if err := mountConsole(mux, db, "0123456789abcdef"); err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/console/", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(page), dispatch.DefaultScheduleTable), strings.Contains(string(page), outbox.DefaultTable),
		strings.Contains(string(page), jobs.DefaultTable))
	// Output: 200 true true true
}

func TestDocSnippet(t *testing.T) {
	readme.Holds(t, filepath.Join("..", "docs", "ui.md"), "example_test.go", "func mountConsole(")
}
