package dispatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
)

// A once schedule fired by a worker over an SQLite file, so the example
// needs nothing installed. In a service, Run gets the context of
// dispatch.ShutdownContext and the worker's Ready and Live handlers are
// mounted on /readyz and /livez.
func Example() {
	if err := runExample(); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// fired: invoice 42
	// invoice-42-reminder fired
	// nightly-report active 03:00
}

func runExample() error {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	dir, err := os.MkdirTemp("", "dispatch-example")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sqlstore.Open(ctx, "sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	store, err := sqlstore.New[dispatch.Schedule](db) // claimstore_schedules; sqlstore.WithTable names another
	if err != nil {
		return err
	}
	if err := dispatch.MigrateScheduleStore(ctx, store); err != nil {
		return err
	}

	schedules, err := dispatch.NewSchedules(store, dispatch.SchedulesConfig{})
	if err != nil {
		return err
	}
	for _, spec := range []dispatch.Spec{
		{Key: "invoice-42-reminder", Payload: []byte("invoice 42")},
		{Key: "nightly-report", Cron: "0 3 * * *", TimeZone: "Europe/Berlin"},
	} {
		if _, _, err := schedules.Add(ctx, spec); err != nil {
			return err
		}
	}

	fired := make(chan string, 1)
	worker, err := dispatch.NewScheduleWorker(store, func(ctx context.Context, f dispatch.Fire) error {
		fired <- string(f.Schedule.Payload)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		PollInterval: 50 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	runCtx, drain := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- worker.Run(runCtx) }()
	fmt.Println("fired:", <-fired)
	drain() // as on SIGTERM: readiness 503, stop claiming, finish in-flight
	if err := <-done; err != nil {
		return err
	}

	s, err := schedules.Get(ctx, "invoice-42-reminder")
	if err != nil {
		return err
	}
	fmt.Println(s.Key, s.Status)
	n, err := schedules.Get(ctx, "nightly-report")
	if err != nil {
		return err
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		return err
	}
	fmt.Println(n.Key, n.Status, n.NextFireAt.In(berlin).Format("15:04"))
	return nil
}
