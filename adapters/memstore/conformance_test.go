package memstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(t *testing.T) dao.Store[conformance.Job] {
			s, err := memstore.New[conformance.Job]()
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		// Every memory claim scans and sorts all rows under one mutex, so
		// the concurrency test uses fewer rows than the default 5,000 to
		// stay fast under the race detector; the mutex, not the row count,
		// is what it exercises here.
		Rows: 1000,
		// No connection to kill: the holder runs in the test's process.
		Skip: []string{conformance.CheckLockHolderKilled},
	})
}
