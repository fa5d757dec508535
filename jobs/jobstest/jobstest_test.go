package jobstest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobstest"
	"gorm.io/gorm"
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

// sqliteClient returns a SQLite database with a job table migrated on it
// (dropped at the test's end), its store, and an insert-only client over
// it.
func sqliteClient(t *testing.T) (*gorm.DB, *dao.Table[jobs.Row], *jobs.Client) {
	t.Helper()
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
	return db, store, client
}

func TestRequireInsertedInsideTheTransaction(t *testing.T) {
	ctx := context.Background()
	db, store, client := sqliteClient(t)
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

type reportArgs struct {
	Month int `json:"month"`
}

func (reportArgs) Kind() string { return "report" }

func TestRequireManyInserted(t *testing.T) {
	ctx := context.Background()
	_, store, client := sqliteClient(t)
	if _, err := client.InsertMany(ctx, []jobs.InsertParams{
		{Args: welcomeArgs{To: "ada"}},
		{Args: reportArgs{Month: 1}, Opts: &jobs.InsertOpts{Queue: "reports"}},
		{Args: welcomeArgs{To: "bob"}},
	}); err != nil {
		t.Fatal(err)
	}
	got := jobstest.RequireManyInserted(ctx, t, store, []jobstest.ExpectedJob{
		{Args: welcomeArgs{To: "ada"}},
		{Args: reportArgs{Month: 1}, Opts: &jobstest.Opts{Queue: "reports"}},
		{Args: welcomeArgs{To: "bob"}},
	})
	if len(got) != 3 || got[0].ID >= got[1].ID || got[1].ID >= got[2].ID {
		t.Errorf("jobs found: %+v", got)
	}
	// Jobs of kinds not expected are not looked at.
	jobstest.RequireManyInserted(ctx, t, store, []jobstest.ExpectedJob{{Args: reportArgs{Month: 1}}})
	for name, tc := range map[string]struct {
		want     []jobstest.ExpectedJob
		contains string
	}{
		"order":   {[]jobstest.ExpectedJob{{Args: welcomeArgs{To: "bob"}}, {Args: reportArgs{Month: 1}}, {Args: welcomeArgs{To: "ada"}}}, `want {"to":"bob"}`},
		"missing": {[]jobstest.ExpectedJob{{Args: welcomeArgs{To: "ada"}}}, "want 1 jobs of kinds [welcome], found 2"},
		"extra":   {[]jobstest.ExpectedJob{{Args: welcomeArgs{To: "ada"}}, {Args: welcomeArgs{To: "bob"}}, {Args: welcomeArgs{To: "cy"}}}, "want 3 jobs"},
		"opts":    {[]jobstest.ExpectedJob{{Args: reportArgs{Month: 1}, Opts: &jobstest.Opts{Queue: "default"}}}, "lacks"},
		"any args": {[]jobstest.ExpectedJob{{Args: welcomeArgs{}, Opts: &jobstest.Opts{AnyArgs: true}}, {Args: reportArgs{}, Opts: &jobstest.Opts{AnyArgs: true, Queue: "reports"}}, {Args: welcomeArgs{}, Opts: &jobstest.Opts{AnyArgs: true, Queue: "elsewhere"}}},
			"lacks"},
	} {
		msg := fails(t, func(tb testing.TB) { jobstest.RequireManyInserted(ctx, tb, store, tc.want) })
		if !strings.Contains(msg, tc.contains) {
			t.Errorf("%s: failure %q, want it to contain %q", name, msg, tc.contains)
		}
	}
}

func TestWorkRunsAWorkFunctionWithoutADatabase(t *testing.T) {
	ctx := context.Background()
	ws := jobs.NewWorkers()
	err := jobs.AddWorker(ws, jobs.WorkFunc[welcomeArgs](func(ctx context.Context, j *jobs.Job[welcomeArgs]) error {
		switch j.Args.To {
		case "":
			return jobs.Cancel(errors.New("no address"))
		case "later":
			return jobs.Snooze(time.Minute)
		case "boom":
			panic("boom")
		case "slow":
			<-ctx.Done()
			return context.Cause(ctx)
		case "flaky":
			if j.Attempt < 3 {
				return errors.New("busy")
			}
		}
		return nil
	}), jobs.WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		to      string
		opts    *jobstest.WorkOpts
		state   jobs.State
		errWant func(error) bool
	}{
		{"ada", nil, jobs.StateCompleted, func(err error) bool { return err == nil }},
		{"", nil, jobs.StateCancelled, func(err error) bool { var c *jobs.CancelError; return errors.As(err, &c) }},
		{"later", nil, jobs.StateScheduled, func(err error) bool { var s *jobs.SnoozeError; return errors.As(err, &s) && s.Duration == time.Minute }},
		{"boom", nil, jobs.StateRetryable, func(err error) bool { var p *jobs.PanicError; return errors.As(err, &p) && p.Value == "boom" }},
		{"boom", &jobstest.WorkOpts{MaxAttempts: 1}, jobs.StateDiscarded, func(err error) bool { return err != nil }},
		{"slow", nil, jobs.StateRetryable, func(err error) bool { return errors.Is(err, jobs.ErrTimeout) }},
		{"flaky", &jobstest.WorkOpts{Attempt: 2}, jobs.StateRetryable, func(err error) bool { return err != nil }},
		{"flaky", &jobstest.WorkOpts{Attempt: 3}, jobs.StateCompleted, func(err error) bool { return err == nil }},
	} {
		res := jobstest.Work(ctx, t, ws, welcomeArgs{To: tc.to}, tc.opts)
		if res.State != tc.state || !tc.errWant(res.Err) {
			t.Errorf("work for %q with %+v: state %s, err %v; want state %s", tc.to, tc.opts, res.State, res.Err, tc.state)
		}
	}
	msg := fails(t, func(tb testing.TB) { jobstest.Work(ctx, tb, ws, reportArgs{}, nil) })
	if !strings.Contains(msg, "report") || !strings.Contains(msg, jobs.ErrUnknownKind.Error()) {
		t.Errorf("Work of a kind without worker: failure %q", msg)
	}
}
