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
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestJobsWorkflowCommand: jobs workflow ID prints a diamond workflow as
// a tree (d in full under b, named again under c) with the states of an
// insert nobody ran yet, --json lists the tasks with their
// dependencies, and an unknown id is dao.ErrNotFound, on each SQL
// backend.
func TestJobsWorkflowCommand(t *testing.T) {
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) { testJobsWorkflowCommand(t, b) })
	}
}

// testJobsWorkflowCommand is TestJobsWorkflowCommand on backend b, the
// job table named by --table.
func testJobsWorkflowCommand(t *testing.T, b testdb.Backend) {
	ctx := context.Background()
	db := b.Open(t)
	table := testdb.Table(t, db, "cli_flow")
	store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Drop(context.Background(), store, nil) })
	if err := jobs.Migrate(ctx, store, nil); err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.InsertWorkflow(ctx, jobs.Workflow{Tasks: []jobs.WorkflowTask{
		{Name: "a", Args: cliArgs{N: 1}},
		{Name: "b", Args: cliArgs{N: 2}, Deps: []string{"a"}},
		{Name: "c", Args: cliArgs{N: 3}, Deps: []string{"a"}},
		{Name: "d", Args: cliArgs{N: 4}, Deps: []string{"b", "c"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) int64 { return res.Tasks[i].Job.ID }
	dsn := testdb.PostgresDSN()
	switch b.Name {
	case "mariadb":
		dsn = testdb.MySQLDSN()
	case "sqlite":
		dsn = sqlstoretest.SQLiteFile(t, db)
	}
	flags := []string{"--backend", b.Name, "--dsn", dsn, "--table", table}
	out, errOut, err := execFresh(t, append([]string{"jobs", "workflow", res.ID}, flags...)...)
	if err != nil {
		t.Fatalf("jobs workflow: %v\n%s", err, errOut)
	}
	want := fmt.Sprintf(`workflow %s: 4 tasks
  a  available  job %d
    b  pending  job %d
      d  pending  job %d
    c  pending  job %d
      d (above)
`, res.ID, id(0), id(1), id(3), id(2))
	if out != want {
		t.Errorf("jobs workflow printed\n%s\nwant\n%s", out, want)
	}
	out, errOut, err = execFresh(t, append([]string{"jobs", "workflow", res.ID, "--json"}, flags...)...)
	if err != nil {
		t.Fatalf("jobs workflow --json: %v\n%s", err, errOut)
	}
	var tasks []workflowTaskJSON
	if err := json.Unmarshal([]byte(out), &tasks); err != nil {
		t.Fatalf("jobs workflow --json: %v\n%s", err, out)
	}
	if len(tasks) != 4 || tasks[3].Name != "d" || tasks[3].JobID != id(3) || tasks[3].State != jobs.StatePending ||
		len(tasks[3].Deps) != 2 || tasks[3].Deps[0] != "b" || tasks[3].Deps[1] != "c" || len(tasks[0].Deps) != 0 {
		t.Errorf("jobs workflow --json: %+v", tasks)
	}
	out, errOut, err = execFresh(t, append([]string{"jobs", "get", strconv.FormatInt(id(3), 10)}, flags...)...)
	if err != nil {
		t.Fatalf("jobs get: %v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`(?m)^workflow:\s+` + regexp.QuoteMeta(res.ID) + `, task d$`).MatchString(out) {
		t.Errorf("jobs get of a workflow's task printed\n%s\nwant a line \"workflow: %s, task d\"", out, res.ID)
	}
	if _, _, err := execFresh(t, append([]string{"jobs", "workflow", "no-such-workflow"}, flags...)...); !errors.Is(err, dao.ErrNotFound) {
		t.Errorf("jobs workflow of an unknown id: %v, want dao.ErrNotFound", err)
	}
}
