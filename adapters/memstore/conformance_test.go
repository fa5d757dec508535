package memstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
	"gorm.io/gorm/schema"
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
		Models: &conformance.ModelStores{
			Ticket:         modelStore[conformance.Ticket],
			PrefixedTicket: prefixedStore,
			TablePrefix:    "claimstore_p_",
			UUIDTicket:     modelStore[conformance.UUIDTicket],
			V7Ticket:       modelStore[conformance.V7Ticket],
			SoftJob:        modelStore[conformance.SoftJob],
		},
		Leases: func(t *testing.T) coord.LeaseStore { return memstore.NewLeases() },
		// No connection to kill: the holder runs in the test's process.
		Skip: []string{conformance.CheckLockHolderKilled},
	})
}

// prefixedStore returns a new, empty memory store of conformance.Ticket
// whose model is parsed with the table prefix claimstore_p_.
func prefixedStore(t *testing.T) dao.Store[conformance.Ticket] {
	s, err := memstore.New[conformance.Ticket](memstore.WithNamer(schema.NamingStrategy{TablePrefix: "claimstore_p_"}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// modelStore returns a new, empty memory store of T.
func modelStore[T any](t *testing.T) dao.Store[T] {
	s, err := memstore.New[T]()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformanceJobs runs the conformance suite's jobs group on memory
// stores: no transactions and no other process can reach them.
func TestConformanceJobs(t *testing.T) {
	conformance.RunJobs(t, conformance.JobsHarness{
		NewStores: func(t *testing.T) conformance.JobStores {
			return conformance.JobStores{
				Jobs:      modelStore[jobs.Row](t),
				Queues:    modelStore[jobs.Queue](t),
				Schedules: modelStore[dispatch.Schedule](t),
			}
		},
		Skip: []string{conformance.CheckJobsTx, conformance.CheckJobsProcesses},
	})
}
