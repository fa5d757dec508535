package dispatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dispatch"
)

// A once schedule fired by a worker over an SQLite file, so the example
// needs nothing installed. In a service, Run gets the context of
// dispatch.ShutdownContext and the worker's Ready and Live handlers are
// mounted on /readyz and /livez.
func Example() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	dir, _ := os.MkdirTemp("", "dispatch-example")
	defer os.RemoveAll(dir)
	db, _ := sqlite.Open(ctx, sqlstore.SQLiteDSN(filepath.Join(dir, "app.db")))
	_ = dispatch.MigrateSchedules(ctx, db, "")
	store, _ := sqlite.New[dispatch.Schedule](db)

	schedules, _ := dispatch.NewSchedules(store, dispatch.SchedulesConfig{})
	_, _, _ = schedules.Add(ctx, dispatch.Spec{Key: "invoice-42-reminder", Payload: []byte("invoice 42")})
	_, _, _ = schedules.Add(ctx, dispatch.Spec{Key: "nightly-report", Cron: "0 3 * * *", TimeZone: "Europe/Berlin"})

	fired := make(chan string, 1)
	worker, _ := dispatch.NewScheduleWorker(store, func(ctx context.Context, f dispatch.Fire) error {
		fired <- string(f.Schedule.Payload)
		return nil
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		Tick:   50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	runCtx, drain := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- worker.Run(runCtx) }()
	fmt.Println("fired:", <-fired)
	drain() // as on SIGTERM: readiness 503, stop claiming, finish in-flight
	<-done

	s, _ := schedules.Get(ctx, "invoice-42-reminder")
	fmt.Println(s.Key, s.Status)
	n, _ := schedules.Get(ctx, "nightly-report")
	fmt.Println(n.Key, n.Status, n.NextFireAt.In(mustLoad("Europe/Berlin")).Format("15:04"))
	// Output:
	// fired: invoice 42
	// invoice-42-reminder fired
	// nightly-report active 03:00
}

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}
