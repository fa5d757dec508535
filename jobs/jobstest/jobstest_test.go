package jobstest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/testdb"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobstest"
)

type welcomeArgs struct {
	To string `json:"to"`
}

func (welcomeArgs) Kind() string { return "welcome" }

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, so that a test can check that a helper fails.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fails runs f with a recorder and returns its failure message ("" when
// f did not fail).
func fails(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestRequireInsertedInsideTheTransaction(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLite(t)
	table := testdb.Table(t, db, "jobs")
	store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Drop(context.Background(), store, nil) })
	if err := jobs.Migrate(ctx, store, nil); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewClient(jobs.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	tx := db.Begin()
	defer tx.Rollback()
	if _, err := client.InsertTx(ctx, tx, welcomeArgs{To: "ada@example.com"}, &jobs.InsertOpts{Queue: "mail", Tags: []string{"signup"}}); err != nil {
		t.Fatal(err)
	}
	job := jobstest.RequireInsertedTx(ctx, t, store, tx, welcomeArgs{To: "ada@example.com"}, &jobstest.Opts{Queue: "mail", Tags: []string{"signup"}})
	if job.Args.To != "ada@example.com" || job.ID == 0 {
		t.Errorf("found job %+v", job)
	}
	// Outside the transaction, the job does not exist yet.
	msg := fails(t, func(tb testing.TB) { jobstest.RequireInserted(ctx, tb, store, welcomeArgs{To: "ada@example.com"}, nil) })
	if !strings.Contains(msg, "no job of kind welcome") {
		t.Errorf("RequireInserted outside the transaction: failure %q", msg)
	}
	// Other args, or another queue, are not the job.
	msg = fails(t, func(tb testing.TB) {
		jobstest.RequireInsertedTx(ctx, tb, store, tx, welcomeArgs{To: "bob@example.com"}, nil)
	})
	if !strings.Contains(msg, "ada@example.com") {
		t.Errorf("RequireInsertedTx with other args: failure %q, want it to list the job found", msg)
	}
	msg = fails(t, func(tb testing.TB) {
		jobstest.RequireInsertedTx(ctx, tb, store, tx, welcomeArgs{To: "ada@example.com"}, &jobstest.Opts{Queue: "default"})
	})
	if msg == "" {
		t.Error("RequireInsertedTx with another queue did not fail")
	}
	msg = fails(t, func(tb testing.TB) { jobstest.RequireNotInserted(ctx, tb, store.WithTx(tx), "welcome") })
	if !strings.Contains(msg, "want no job of kind welcome") {
		t.Errorf("RequireNotInserted: failure %q", msg)
	}
	jobstest.RequireNotInserted(ctx, t, store, "welcome")
}
