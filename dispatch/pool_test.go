package dispatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestPoolWarnings: a worker over a pool of 2 connections that keeps none
// idle warns, once each, that the pool is too small and that it churns
// connections, naming the fix.
func TestPoolWarnings(t *testing.T) {
	store, db := sqlBackend("postgres", testdb.Postgres).open(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(2)
	sqlDB.SetMaxIdleConns(0)
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	const n = 200
	specs := make([]dispatch.Spec, n)
	for i := range specs {
		specs[i] = dispatch.Spec{Key: fmt.Sprintf("k%03d", i)}
	}
	if _, err := sc.AddMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	w := newScheduleWorker(t, store, func(context.Context, dispatch.Fire) error { return nil }, dispatch.Policy{},
		dispatch.Config[dispatch.Schedule]{Concurrency: 2, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	stop := runWorker(t, w.Run)
	// Every fire opens connections anew; on a loaded machine that is slow.
	waitFor(t, time.Minute, "the idle-connection warning", func() bool { return strings.Contains(logs.String(), "SetMaxIdleConns") })
	stop()
	out := logs.String()
	for _, want := range []string{"SetMaxOpenConns", "SetMaxIdleConns"} {
		if c := strings.Count(out, want); c != 1 {
			t.Errorf("%d warnings naming %s, want 1:\n%s", c, want, out)
		}
	}
}

// TestPoolWarningsSQLite: on SQLite, whose one writer at a time makes a
// small pool the intended one (sqlstore.OpenSQLiteConns), a worker over
// a pool of 2 connections does not warn that the pool allows too few.
func TestPoolWarningsSQLite(t *testing.T) {
	store, db := sqlBackend("sqlite", testdb.SQLite).open(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(2)
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	if _, err := sc.AddMany(context.Background(), []dispatch.Spec{{Key: "a"}, {Key: "b"}}); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	fired := make(chan struct{}, 2)
	w := newScheduleWorker(t, store, func(context.Context, dispatch.Fire) error { fired <- struct{}{}; return nil }, dispatch.Policy{},
		dispatch.Config[dispatch.Schedule]{Concurrency: 2, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	stop := runWorker(t, w.Run)
	for range 2 {
		select {
		case <-fired:
		case <-time.After(time.Minute):
			t.Fatal("the schedules did not fire within a minute")
		}
	}
	stop()
	if out := logs.String(); strings.Contains(out, "SetMaxOpenConns") {
		t.Errorf("a worker on SQLite over a pool of 2 warned of too few connections:\n%s", out)
	}
}
