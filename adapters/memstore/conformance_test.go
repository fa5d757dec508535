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
		Models: &conformance.ModelStores{
			Ticket:         modelStore[conformance.Ticket],
			PrefixedTicket: modelStore[conformance.Ticket],
			UUIDTicket:     modelStore[conformance.UUIDTicket],
			V7Ticket:       modelStore[conformance.V7Ticket],
			SoftJob:        modelStore[conformance.SoftJob],
		},
	})
}

// modelStore returns a new, empty memory store of T.
func modelStore[T any](t *testing.T) dao.Store[T] {
	s, err := memstore.New[T]()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
