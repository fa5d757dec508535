package conformance_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// This file shows a complete conformance test for a module that keeps its
// claim queue in PostgreSQL: it runs the suite against the module's own
// database, with the module's own connection settings.

var tableSeq atomic.Int64

// postgresHarness returns a harness whose stores live in fresh tables of
// db, each dropped when its test ends.
func postgresHarness(db *gorm.DB) conformance.Harness {
	return conformance.Harness{
		NewStore: func(t *testing.T) dao.Store[conformance.Job] {
			table := fmt.Sprintf("conformance_%d_%d", time.Now().UnixNano(), tableSeq.Add(1))
			s, err := sqlstore.New[conformance.Job](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Migrator().DropTable(table) })
			return s
		},
		// PostgreSQL claims in one statement that skips rows other
		// transactions hold locked. HoldLock lets the suite check that: it
		// locks row id in a transaction of its own until release.
		HoldLock: func(t *testing.T, s dao.Store[conformance.Job], id int64) func() {
			table := s.(*sqlstore.Store[conformance.Job]).Table()
			tx := db.Begin()
			var locked []int64
			err := tx.Table(table).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
				Where("id = ?", id).Pluck("id", &locked).Error
			if err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			return func() { tx.Rollback() }
		},
	}
}

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
	conformance.Run(t, postgresHarness(db))
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
