package sqlstoretest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// TestHarnessTables checks that each store of the harness has a fresh,
// migrated table of its own, dropped when its test ends, and that HoldLock
// holds a row lock a fast-path claim skips where the lost race is a
// skipped row.
func TestHarnessTables(t *testing.T) {
	for name, open := range map[string]func(testing.TB) *gorm.DB{
		"sqlite": testdb.SQLite, "postgres": testdb.Postgres, "mysql": testdb.MySQL,
	} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			h := sqlstoretest.Harness(db)
			var tables []string
			t.Run("store", func(t *testing.T) {
				for range 2 {
					s := h.NewStore(t).(*dao.Table[conformance.Job])
					var table dialects.Table
					if !s.As(&table) {
						t.Fatal("a SQL store gives its table to As")
					}
					tables = append(tables, table.Name)
					if err := s.Create(context.Background(), &conformance.Job{Status: "ready", Payload: "p"}); err != nil {
						t.Fatal(err)
					}
					if caps := s.Capabilities(); caps.Strategy != dao.StrategyFastPath || caps.LostRace != dao.LostRaceSkip {
						continue
					}
					// The suite's LostRace/HeldLock covers the other
					// backends, whose claims wait out a lock timeout
					// (SQLite's fast path: the busy timeout, then ErrBusy).
					release := h.HoldLock(t, s, 1)
					got, err := s.Claim(context.Background(), dao.ClaimRequest{Set: dao.Set{"status": "claimed"}, Limit: 1})
					release()
					if len(got) != 0 || err != nil {
						t.Errorf("fast-path claim of the locked row = %d rows, %v; want none and no error", len(got), err)
					}
				}
			})
			if len(tables) != 2 || tables[0] == tables[1] {
				t.Fatalf("tables %v, want two distinct ones", tables)
			}
			for _, table := range tables {
				if db.Migrator().HasTable(table) {
					t.Errorf("table %s still exists after its test ended", table)
				}
			}
		})
	}
}

// envSnippet makes TestHandWrittenHarnessChild run in a child process.
const envSnippet = "SQLSTORETEST_SNIPPET_CHILD"

// TestHandWrittenHarnessChild is a hand-written harness without HoldLock
// on PostgreSQL, the shape the documentation's snippet used to have. It
// runs only as the child process of TestHandWrittenHarnessFails.
func TestHandWrittenHarnessChild(t *testing.T) {
	if os.Getenv(envSnippet) == "" {
		t.Skip("run as a child process only")
	}
	db := testdb.Postgres(t)
	full := sqlstoretest.Harness(db)
	conformance.Run(t, conformance.Harness{NewStore: full.NewStore})
}

// TestHandWrittenHarnessFails checks that the suite, run on PostgreSQL's
// fast path with a harness that has no HoldLock, fails its HeldLock check
// instead of skipping it and passing.
func TestHandWrittenHarnessFails(t *testing.T) {
	testdb.Postgres(t) // skips, or fails when required, if the server is down
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHandWrittenHarnessChild$/^LostRace$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envSnippet+"=1")
	out, err := cmd.CombinedOutput()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatal(err)
	}
	if err == nil || !strings.Contains(string(out), "--- FAIL: TestHandWrittenHarnessChild/LostRace/HeldLock") {
		t.Errorf("the suite on PostgreSQL without HoldLock passed (%v); want LostRace/HeldLock to fail. Output:\n%s", err, out)
	}
}
