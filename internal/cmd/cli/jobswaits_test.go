package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestJobsWaitsCommands: jobs sequences, jobs batch, and jobs list
// --sequence and --batch, on each SQL backend, over a sequence of two
// jobs (the first holds it, the second waits) and a batch of two jobs
// (its callback pending).
func TestJobsWaitsCommands(t *testing.T) {
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			db := b.Open(t)
			table := testdb.Table(t, db, "cli_waits")
			store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			qs, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(table+"_q"))
			if err != nil {
				t.Fatal(err)
			}
			if err := jobs.Migrate(ctx, store, qs); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = jobs.Drop(context.Background(), store, qs) })
			c, err := jobs.NewClient(jobs.Config{Store: store, QueueStore: qs})
			if err != nil {
				t.Fatal(err)
			}
			in := func(n int) jobs.InsertParams {
				return jobs.InsertParams{Args: cliArgs{N: n}, Opts: &jobs.InsertOpts{Sequence: jobs.SequenceOpts{Key: "customer-42"}}}
			}
			seq, err := c.InsertMany(ctx, []jobs.InsertParams{in(1), in(2)})
			if err != nil {
				t.Fatal(err)
			}
			head, next := seq[0].Job.ID, seq[1].Job.ID
			batch, err := c.InsertBatch(ctx, []jobs.InsertParams{{Args: cliArgs{N: 3}}, {Args: cliArgs{N: 4}}}, jobs.BatchOpts{Callback: cliArgs{N: 5}})
			if err != nil {
				t.Fatal(err)
			}
			dsn := testdb.PostgresDSN()
			switch b.Name {
			case "mariadb":
				dsn = testdb.MySQLDSN()
			case "sqlite":
				dsn = sqlstoretest.SQLiteFile(t, db)
			}
			s := &cliJobs{flags: []string{"--backend", b.Name, "--dsn", dsn, "--table", table}}
			id := func(n int64) string { return strconv.FormatInt(n, 10) }

			out := s.must(t, "jobs", "sequences")
			if !regexp.MustCompile(`^KEY\s+HEAD\s+HEAD STATE\s+QUEUE\s+WAITING\ncustomer-42\s+` + id(head) + `\s+available\s+default\s+1\n$`).MatchString(out) {
				t.Errorf("jobs sequences:\n%s", out)
			}
			var sv struct{ Sequences []sequenceView }
			if err := json.Unmarshal([]byte(s.must(t, "jobs", "sequences", "--key", "customer-42", "--json")), &sv); err != nil ||
				len(sv.Sequences) != 1 || sv.Sequences[0].Head == nil || sv.Sequences[0].Head.ID != head || !sv.Sequences[0].Head.SequenceHead || sv.Sequences[0].Waiting != 1 {
				t.Errorf("jobs sequences --key --json: %+v, %v", sv, err)
			}
			if out := s.must(t, "jobs", "get", id(head)); !regexp.MustCompile(`(?m)^sequence:\s+customer-42 \(holds it\)$`).MatchString(out) {
				t.Errorf("jobs get of the sequence's head:\n%s", out)
			}

			out = s.must(t, "jobs", "batch", batch.ID)
			want := fmt.Sprintf("batch %s: 2 jobs inserted\n  available:  2\ncallback: job %d (cli_note), pending\n", batch.ID, batch.Callback.ID)
			if out != want {
				t.Errorf("jobs batch: %q, want %q", out, want)
			}
			if out := s.must(t, "jobs", "get", id(batch.Callback.ID)); !regexp.MustCompile(`(?m)^batch:\s+` + batch.ID + ` \(its callback\)$`).MatchString(out) {
				t.Errorf("jobs get of the batch's callback:\n%s", out)
			}
			if _, err := s.cli(t, "jobs", "batch", "no-such-batch"); !errors.Is(err, dao.ErrNotFound) {
				t.Errorf("jobs batch of a missing batch: %v, want dao.ErrNotFound", err)
			}

			for args, want := range map[string][]int64{
				"--sequence customer-42": {next, head},
				"--sequence other":       nil,
				"--batch " + batch.ID:    {batch.Callback.ID, batch.Jobs[1].Job.ID, batch.Jobs[0].Job.ID},
			} {
				var l struct{ Jobs []jobadmin.Job }
				out := s.must(t, append([]string{"jobs", "list", "--json"}, regexp.MustCompile(` `).Split(args, -1)...)...)
				if err := json.Unmarshal([]byte(out), &l); err != nil {
					t.Fatalf("jobs list %s: %v\n%s", args, err, out)
				}
				var got []int64
				for _, j := range l.Jobs {
					got = append(got, j.ID)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("jobs list %s: %v, want %v", args, got, want)
				}
			}
		})
	}
}
