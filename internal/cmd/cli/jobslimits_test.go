package cli

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobstest"
)

// limitCLIArgs is the args of the jobs limits test's jobs, whose work
// blocks until the test releases it.
type limitCLIArgs struct {
	Part int `json:"part"`
}

func (limitCLIArgs) Kind() string { return "cli_limit" }

// TestJobsLimitsCommand: jobs limits on each SQL backend, with a client
// running a queue limited to 2 running and 1 start an hour from a bucket
// of 5, its work blocked: of 3 jobs 2 run, and the command prints the
// queue's one partition with 2 running, Max 2, 3 tokens and the rate,
// as a table and as JSON; --queue of another queue prints none, a bad
// --queue or --partitions is dao.ErrInvalidArgument.
func TestJobsLimitsCommand(t *testing.T) {
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			db := b.Open(t)
			table := testdb.Table(t, db, "cli_limits")
			store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if err := jobs.Migrate(ctx, store, nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = jobs.Drop(context.Background(), store, nil) })
			gate := jobstest.NewGate(10)
			started := gate.Started()
			ws := jobs.NewWorkers()
			if err := jobs.AddWorker(ws, jobs.WorkFunc[limitCLIArgs](func(ctx context.Context, j *jobs.Job[limitCLIArgs]) error {
				return gate.Wait(ctx, j.ID)
			})); err != nil {
				t.Fatal(err)
			}
			c, err := jobs.NewClient(jobs.Config{Store: store, Workers: ws, PollInterval: 50 * time.Millisecond, Lease: 30 * time.Second,
				Queues: map[string]jobs.QueueConfig{"lim": {MaxWorkers: 5, Limit: &jobs.Limit{Max: 2, Rate: 1, Period: time.Hour, Burst: 5}}}})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- c.Run(runCtx) }()
			defer func() {
				gate.Open()
				stop()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			for i := range 3 {
				if _, err := c.Insert(ctx, limitCLIArgs{Part: i}, &jobs.InsertOpts{Queue: "lim"}); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				select {
				case <-started:
				case <-time.After(time.Minute):
					t.Fatal("2 jobs did not start within a minute")
				}
			}
			dsn := testdb.PostgresDSN()
			switch b.Name {
			case "mariadb":
				dsn = testdb.MySQLDSN()
			case "sqlite":
				dsn = sqlstoretest.SQLiteFile(t, db)
			}
			s := &cliJobs{flags: []string{"--backend", b.Name, "--dsn", dsn, "--table", table}}

			out := s.must(t, "jobs", "limits")
			t.Logf("jobs limits:\n%s", out)
			if !regexp.MustCompile(`^QUEUE\s+PARTITION\s+RUNNING\s+MAX\s+TOKENS\s+RATE\nlim\s+\(queue\)\s+2\s+2\s+3\.0\s+1 per 1h0m0s, burst 5\n$`).MatchString(out) {
				t.Errorf("jobs limits:\n%s", out)
			}
			var v struct{ Limits []jobadmin.Limit }
			out = s.must(t, "jobs", "limits", "--queue", "lim", "--json")
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("jobs limits --json: %v\n%s", err, out)
			}
			if len(v.Limits) != 1 {
				t.Fatalf("jobs limits --json: %s", out)
			}
			l := v.Limits[0]
			if l.Queue != "lim" || l.Running != 2 || !l.Known || l.Max != 2 || l.Rate != 1 || l.Period != "1h0m0s" || l.Burst != 5 ||
				l.RecordedAt == nil || len(l.Partitions) != 1 || l.Partitions[0].Key != "" || l.Partitions[0].Running != 2 ||
				l.Partitions[0].Tokens == nil || *l.Partitions[0].Tokens < 2.99 || *l.Partitions[0].Tokens > 3.01 {
				t.Errorf("jobs limits --json:\n%s", out)
			}
			if out := s.must(t, "jobs", "limits", "--queue", "other"); out != "QUEUE  PARTITION  RUNNING  MAX  TOKENS  RATE\n" {
				t.Errorf("jobs limits --queue other: %q, want the header alone", out)
			}
			for _, args := range [][]string{{"--queue", "no spaces"}, {"--partitions", "0"}} {
				if _, err := s.cli(t, append([]string{"jobs", "limits"}, args...)...); !errors.Is(err, dao.ErrInvalidArgument) {
					t.Errorf("jobs limits %v: %v, want dao.ErrInvalidArgument", args, err)
				}
			}
		})
	}
}
