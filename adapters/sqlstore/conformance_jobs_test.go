package sqlstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestConformanceJobs runs the conformance suite's jobs group on SQLite (a
// database file), PostgreSQL and MariaDB, the multi-process checks
// included.
func TestConformanceJobs(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { conformance.RunJobs(t, sqlstoretest.JobsHarness(sqliteFile(t))) })
	t.Run("postgres", func(t *testing.T) { conformance.RunJobs(t, sqlstoretest.JobsHarness(testdb.Postgres(t))) })
	t.Run("mysql", func(t *testing.T) { conformance.RunJobs(t, sqlstoretest.JobsHarness(testdb.MySQL(t))) })
}
