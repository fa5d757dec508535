package sqlstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// Several servers starting at once each migrate the lease table: every
// Migrate succeeds and the table exists once, on every SQL backend. (On
// PostgreSQL two concurrent CREATE TABLE IF NOT EXISTS of one new table
// can fail with a unique violation on pg_type; Migrate runs the statement
// again then.)
func TestLeasesMigrateConcurrently(t *testing.T) {
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			if sqlDB, err := db.DB(); err == nil {
				sqlDB.SetMaxOpenConns(16)
			}
			const tables, migrators = 20, 8
			failed := 0
			for range tables {
				table := testdb.Table(t, db, "leases_mig")
				var wg sync.WaitGroup
				errs := make(chan error, migrators)
				for range migrators {
					wg.Go(func() {
						l, err := sqlstore.NewLeases(db, table)
						if err == nil {
							err = l.Migrate(context.Background())
						}
						errs <- err
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						failed++
						t.Logf("%s: %v", table, err)
					}
				}
			}
			t.Logf("%d tables, %d concurrent migrations each: %d failed", tables, migrators, failed)
			if failed > 0 {
				t.Errorf("%d of %d concurrent migrations failed", failed, tables*migrators)
			}
		})
	}
}
