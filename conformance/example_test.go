package conformance_test

import (
	"context"
	"os"
	"testing"

	_ "github.com/claimstore/claimstore/adapters/postgres"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
)

// This file shows a complete conformance test for a module that keeps its
// claim queue in PostgreSQL: it runs the suite against the module's own
// database, with the module's own connection settings.
// sqlstoretest.Harness gives every test a fresh table, dropped when the
// test ends, and the HoldLock the suite needs to force the fast path's
// lost race; a harness without HoldLock fails the run on PostgreSQL.

// testConformance is the test; in your module, name it TestConformance.
func testConformance(t *testing.T) {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		t.Skip("set DATABASE_URL to a PostgreSQL database the test may create tables in")
	}
	db, err := sqlstore.Open(context.Background(), "postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	conformance.Run(t, sqlstoretest.Harness(db))
}

func Example() {
	// In a _test.go file of your module:
	//
	//	func TestConformance(t *testing.T) { testConformance(t) }
	//
	// Run it with the race detector:
	//
	//	DATABASE_URL=postgres://... go test -race -run TestConformance
	_ = testConformance
}
