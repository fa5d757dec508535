package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/jobadmin"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// cliArgs is the args of the command tests' jobs: the first Fail
// attempts fail with "boom <b>".
type cliArgs struct {
	N    int `json:"n"`
	Fail int `json:"fail,omitempty"`
}

func (cliArgs) Kind() string { return "cli_note" }

// cliJobs is a seeded job table: failed (discarded after its one attempt
// failed), mail (available in queue mail, tagged), later (scheduled an
// hour ahead).
type cliJobs struct {
	store               *dao.Table[jobs.Row]
	c                   *jobs.Client
	failed, mail, later int64
	table, queueT       string
	flags               []string // --backend, --dsn and the table flags
}

// seedCLIJobs creates the job and queue tables table and queueT on db
// (dropped at cleanup), inserts the jobs of cliJobs and runs the failing
// one to its end. flags reach the tables from the command line.
func seedCLIJobs(t *testing.T, db *gorm.DB, table, queueT string, flags ...string) *cliJobs {
	t.Helper()
	ctx := context.Background()
	s := &cliJobs{table: table, queueT: queueT, flags: flags}
	var err error
	if s.store, err = sqlstore.New[jobs.Row](db, sqlstore.WithTable(table)); err != nil {
		t.Fatal(err)
	}
	qs, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(queueT))
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, s.store, qs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := jobs.Drop(context.Background(), s.store, qs); err != nil {
			t.Errorf("drop job tables: %v", err)
		}
	})
	ws := jobs.NewWorkers()
	if err := jobs.AddWorker(ws, jobs.WorkFunc[cliArgs](func(_ context.Context, j *jobs.Job[cliArgs]) error {
		if j.Attempt <= j.Args.Fail {
			return errors.New("boom <b>")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if s.c, err = jobs.NewClient(jobs.Config{Store: s.store, QueueStore: qs, Workers: ws, PollInterval: 50 * time.Millisecond,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 2}}}); err != nil {
		t.Fatal(err)
	}
	insert := func(a cliArgs, o *jobs.InsertOpts) int64 {
		res, err := s.c.Insert(ctx, a, o)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	s.failed = insert(cliArgs{N: 1, Fail: 1}, &jobs.InsertOpts{MaxAttempts: 1})
	s.mail = insert(cliArgs{N: 2}, &jobs.InsertOpts{Queue: "mail", Tags: []string{"x", "y"}, Metadata: []byte(`{"tenant":{"id":7},"team":"a"}`)})
	s.later = insert(cliArgs{N: 3}, &jobs.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.c.Run(runCtx) }()
	deadline := time.Now().Add(30 * time.Second)
	for s.state(t, s.failed) != jobs.StateDiscarded {
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after 30 s, want discarded", s.failed, s.state(t, s.failed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return s
}

// state returns the state of job id, "" when it does not exist.
func (s *cliJobs) state(t *testing.T, id int64) jobs.State {
	t.Helper()
	r, err := s.c.Get(context.Background(), id)
	if errors.Is(err, dao.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// cli runs the command line with args and the tables' flags.
func (s *cliJobs) cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, errOut, err := execFresh(t, append(args, s.flags...)...)
	if err != nil {
		t.Logf("%v: %v\n%s", args, err, errOut)
	}
	return out, err
}

// must runs the command line and fails t on an error.
func (s *cliJobs) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.cli(t, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return out
}

// TestJobsCommands: jobs list, get, retry, cancel and delete, and queues
// list, pause and resume, on an SQLite file (default table names),
// PostgreSQL and MariaDB (tables named by flags).
func TestJobsCommands(t *testing.T) {
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			var s *cliJobs
			if b.Name == "sqlite" {
				path := filepath.Join(t.TempDir(), "app.db")
				db, err := sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(path))
				if err != nil {
					t.Fatal(err)
				}
				testdb.CloseAtCleanup(t, db)
				s = seedCLIJobs(t, db, jobs.DefaultTable, jobs.DefaultQueueTable, "--backend", "sqlite", "--dsn", path)
			} else {
				db := b.Open(t)
				dsn := testdb.PostgresDSN()
				if b.Name != "postgres" {
					dsn = testdb.MySQLDSN()
				}
				table := testdb.Table(t, db, "cli_jobs")
				s = seedCLIJobs(t, db, table, table+"_q", "--backend", b.Name, "--dsn", dsn, "--table", table)
			}
			testJobsCommands(t, s)
		})
	}
}

func testJobsCommands(t *testing.T, s *cliJobs) {
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	qflags := []string{}
	if s.queueT != jobs.DefaultQueueTable {
		qflags = []string{"--queue-table", s.queueT}
	}

	out := s.must(t, "jobs", "list")
	for _, re := range []string{
		`(?m)^ID\s+KIND\s+QUEUE\s+STATE\s+ATTEMPT\s+PRIORITY\s+SCHEDULED\s+CREATED\s+TAGS\s+LAST ERROR$`,
		`(?m)^` + id(s.later) + `\s+cli_note\s+default\s+scheduled\s+0/25\s+1\s+\S+Z\s+\S+Z\s+-\s+-$`,
		`(?m)^` + id(s.mail) + `\s+cli_note\s+mail\s+available\s+0/25\s+1\s+\S+\s+\S+\s+x,y\s+-$`,
		`(?m)^` + id(s.failed) + `\s+cli_note\s+default\s+discarded\s+1/1\s+1\s+\S+\s+\S+\s+-\s+boom <b>$`,
		`(?s)` + id(s.later) + `.*\n` + id(s.mail) + `.*\n` + id(s.failed),
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("jobs list does not match %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "older jobs") {
		t.Errorf("jobs list of every job offers older ones:\n%s", out)
	}
	for args, want := range map[string][]int64{
		"--state discarded":                {s.failed},
		"--state discarded,scheduled":      {s.later, s.failed},
		"--state discarded,available":      {s.mail, s.failed},
		"--queue mail":                     {s.mail},
		"--kind cli_note --queue default":  {s.later, s.failed},
		"--kind other":                     {},
		"--limit 2":                        {s.later, s.mail},
		"--limit 2 --before " + id(s.mail): {s.failed},
		"--tag x":                          {s.mail},
		"--tag x,y":                        {s.mail},
		"--tag x,z":                        {},
		"--priority 1 --queue mail":        {s.mail},
		"--priority 2":                     {},
		`--metadata {"tenant":{"id":7}}`:   {s.mail},
		`--metadata {"tenant":{"id":8}}`:   {},
	} {
		var l struct {
			Jobs       []jobadmin.Job
			NextBefore int64
		}
		out := s.must(t, append([]string{"jobs", "list", "--json"}, strings.Fields(args)...)...)
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("jobs list %s --json: %v\n%s", args, err, out)
		}
		var got []int64
		for _, j := range l.Jobs {
			got = append(got, j.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("jobs list %s: %v, want %v", args, got, want)
		}
		if wantNext := map[string]int64{"--limit 2": s.mail}[args]; l.NextBefore != wantNext {
			t.Errorf("jobs list %s: next before %d, want %d", args, l.NextBefore, wantNext)
		}
	}
	if out := s.must(t, "jobs", "list", "--limit", "2"); !strings.HasSuffix(out, "older jobs: --before "+id(s.mail)+"\n") {
		t.Errorf("jobs list --limit 2 does not say how to page on:\n%s", out)
	}

	out = s.must(t, "jobs", "get", id(s.failed))
	for _, re := range []string{
		`(?m)^state:\s+discarded$`, `(?m)^attempt:\s+1 of 1$`, `(?m)^finalized:\s+\S+Z$`, `(?m)^lease:\s+-$`,
		"(?m)^args:\n    \\{\n      \"n\": 1,\n      \"fail\": 1\n    \\}$",
		`(?m)^attempts: 1 started, 1 failed$`, "(?m)^  attempt 1, ended \\S+Z:\n    boom <b>$",
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("jobs get does not match %s:\n%s", re, out)
		}
	}
	var j jobadmin.Job
	if err := json.Unmarshal([]byte(s.must(t, "jobs", "get", id(s.mail), "--json")), &j); err != nil || j.State != jobs.StateAvailable || j.Queue != "mail" || fmt.Sprint(j.Tags) != "[x y]" {
		t.Errorf("jobs get --json: %+v, %v", j, err)
	}
	if _, err := s.cli(t, "jobs", "get", "999999"); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("jobs get of a missing job: %v", err)
	}

	if out := s.must(t, "jobs", "retry", id(s.failed)); out != "job "+id(s.failed)+": retried, now available\n" {
		t.Errorf("jobs retry: %q", out)
	}
	if st := s.state(t, s.failed); st != jobs.StateAvailable {
		t.Fatalf("after jobs retry: %s", st)
	}
	if out := s.must(t, "jobs", "cancel", id(s.mail), id(s.later)); out != fmt.Sprintf("job %d: cancelled\njob %d: cancelled\n", s.mail, s.later) {
		t.Errorf("jobs cancel: %q", out)
	}
	if s.state(t, s.mail) != jobs.StateCancelled || s.state(t, s.later) != jobs.StateCancelled {
		t.Fatalf("after jobs cancel: %s, %s", s.state(t, s.mail), s.state(t, s.later))
	}
	var outcomes []jobadmin.Outcome
	if err := json.Unmarshal([]byte(s.must(t, "jobs", "delete", id(s.later), "--json")), &outcomes); err != nil || len(outcomes) != 1 || !outcomes[0].Changed || outcomes[0].State != jobs.StateCancelled {
		t.Errorf("jobs delete --json: %+v, %v", outcomes, err)
	}
	if st := s.state(t, s.later); st != "" {
		t.Fatalf("after jobs delete: %s", st)
	}
	// A running job is not deleted: the command fails and says why;
	// the other job of the call is deleted.
	if n, err := s.store.Update(context.Background(), dao.Eq(jobs.ColID, s.failed), dao.Set{jobs.ColLeaseOwner: "cli-test", jobs.ColLeaseUntil: time.Now().UTC().Add(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("hold job: %d, %v", n, err)
	}
	out, err := s.cli(t, "jobs", "delete", id(s.failed), id(s.mail))
	if !errors.Is(err, jobs.ErrRunning) || out != fmt.Sprintf("job %d: running, not deleted: cancel it first\njob %d: deleted (was cancelled)\n", s.failed, s.mail) {
		t.Errorf("jobs delete of a running job: %v\n%s", err, out)
	}
	if s.state(t, s.failed) != jobs.StateRunning || s.state(t, s.mail) != "" {
		t.Errorf("after the delete: running job %s, other %s", s.state(t, s.failed), s.state(t, s.mail))
	}

	// The client that ran the seed's jobs recorded queue default; mail
	// is not in the queue table, and its job was deleted: it cannot be
	// paused or resumed (not found) until it has a job again.
	out = s.must(t, append([]string{"queues", "list"}, qflags...)...)
	if !regexp.MustCompile(`^QUEUE\s+STATUS\s+PENDING\s+AVAILABLE\s+SCHEDULED\s+RUNNING\s+RETRYABLE\s+COMPLETED\s+CANCELLED\s+DISCARDED\n` +
		`default\s+active\s+0\s+0\s+0\s+1\s+0\s+0\s+0\s+0\n$`).MatchString(out) {
		t.Errorf("queues list:\n%s", out)
	}
	for _, op := range []string{"pause", "resume"} {
		if out, err := s.cli(t, append([]string{"queues", op, "mail"}, qflags...)...); !errors.Is(err, dao.ErrNotFound) || out != "" {
			t.Errorf("queues %s of a queue without row or job: %q, %v; want no output and dao.ErrNotFound", op, out, err)
		}
	}
	if _, err := s.c.Insert(context.Background(), cliArgs{N: 9}, &jobs.InsertOpts{Queue: "mail", ScheduledAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if out := s.must(t, append([]string{"queues", "pause", "mail"}, qflags...)...); out != "paused: mail\n" {
		t.Errorf("queues pause: %q", out)
	}
	if out := s.must(t, append([]string{"queues", "list"}, qflags...)...); !regexp.MustCompile(`(?m)^mail\s+paused since \S+Z\s+0\s+0\s+1\s+0\s+0\s+0\s+0\s+0$`).MatchString(out) {
		t.Errorf("queues list after the pause:\n%s", out)
	}
	s.must(t, append([]string{"queues", "pause", "default"}, qflags...)...)
	s.must(t, append([]string{"queues", "resume", "mail"}, qflags...)...)
	var qs []queueInfo
	if err := json.Unmarshal([]byte(s.must(t, append([]string{"queues", "list", "--json"}, qflags...)...)), &qs); err != nil ||
		len(qs) != 2 || qs[0].Name != "default" || !qs[0].Paused || qs[0].Counts[jobs.StateRunning] != 1 || qs[1].Name != "mail" || qs[1].Paused {
		t.Errorf("queues list --json: %+v, %v", qs, err)
	}
	// "*": every queue.
	if out := s.must(t, append([]string{"queues", "pause", "*"}, qflags...)...); out != "paused: *\n" {
		t.Errorf("queues pause *: %q", out)
	}
	qs = nil
	if err := json.Unmarshal([]byte(s.must(t, append([]string{"queues", "list", "--json"}, qflags...)...)), &qs); err != nil ||
		len(qs) != 2 || !qs[0].Paused || !qs[1].Paused {
		t.Errorf("queues list --json after pause *: %+v, %v", qs, err)
	}
	s.must(t, append([]string{"queues", "resume", "*"}, qflags...)...)
	// A job of a queue no client runs waits with a kind no running
	// client knows.
	if out := s.must(t, append([]string{"queues", "unknown-kinds"}, qflags...)...); out != "no kind waits without a client that knows it\n" {
		t.Errorf("queues unknown-kinds: %q", out)
	}
	if _, err := s.c.Insert(context.Background(), cliArgs{N: 10}, &jobs.InsertOpts{Queue: "nobody"}); err != nil {
		t.Fatal(err)
	}
	if out := s.must(t, append([]string{"queues", "unknown-kinds"}, qflags...)...); !regexp.MustCompile(`^QUEUE\s+KIND\s+JOBS\nnobody\s+cli_note\s+1\n$`).MatchString(out) {
		t.Errorf("queues unknown-kinds:\n%s", out)
	}
	var uk []unknownKind
	if err := json.Unmarshal([]byte(s.must(t, append([]string{"queues", "unknown-kinds", "--json"}, qflags...)...)), &uk); err != nil ||
		len(uk) != 1 || uk[0] != (unknownKind{Queue: "nobody", Kind: "cli_note", Jobs: 1}) {
		t.Errorf("queues unknown-kinds --json: %+v, %v", uk, err)
	}
	qs = nil
	if err := json.Unmarshal([]byte(s.must(t, append([]string{"queues", "list", "--json"}, qflags...)...)), &qs); err != nil ||
		len(qs) != 2 || qs[0].Paused || qs[1].Paused {
		t.Errorf("queues list --json after resume *: %+v, %v", qs, err)
	}
}

// Bad flags and arguments fail with ErrInvalidArgument before the
// database is opened; a missing table is named.
func TestJobsCommandsRefuse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"jobs", "list", "--state", "done"},
		{"jobs", "list", "--limit", "0"},
		{"jobs", "list", "--before", "-1"},
		{"jobs", "list", "--queue", "bad queue"},
		{"jobs", "list", "--priority", "9"},
		{"jobs", "list", "--metadata", "[1]"},
		{"jobs", "list", "--kind", "<b>"},
		{"jobs", "list", "--table", "bad;name"},
		{"jobs", "get", "x"},
		{"jobs", "retry", "0"},
		{"jobs", "cancel", "1", "two"},
		{"queues", "pause", "bad queue"},
		{"queues", "list", "--queue-table", "bad name"},
	} {
		if _, _, err := execFresh(t, append(args, "--backend", "sqlite", "--dsn", path)...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: err %v, want ErrInvalidArgument", args, err)
		}
	}
	for _, args := range [][]string{
		{"jobs", "list", "--backend", "memory"},
		{"jobs", "list", "--backend", "sqlite", "--dsn", ""},
	} {
		if _, _, err := execFresh(t, args...); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%v: err %v, want ErrInvalidArgument", args, err)
		}
	}
	if _, _, err := execFresh(t, "jobs", "list", "--backend", "sqlite", "--dsn", path); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("jobs list on a missing SQLite file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused command created the database file: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := execFresh(t, "jobs", "list", "--backend", "sqlite", "--dsn", path)
	var missing *missingTableError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), `table "claimstore_jobs" does not exist`) || !strings.Contains(err.Error(), "jobs.Migrate") {
		t.Errorf("jobs list without a job table: %v", err)
	}
}
