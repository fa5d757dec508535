package esstore_test

import (
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
)

// TestConformance runs the whole suite against the in-process fake server,
// and against a real server when CLAIMSTORE_ELASTICSEARCH_URL is set.
func TestConformance(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		conformance.Run(t, conformance.Harness{
			NewStore: func(t *testing.T) dao.Store[conformance.Job] {
				return newStore[conformance.Job](t, newFake(t).URL())
			},
			// Every fake search scans all documents under one lock; fewer
			// rows keep the race-detector run short.
			Rows: 1000,
			Models: &conformance.ModelStores{
				Ticket:         fakeModelStore[conformance.Ticket],
				PrefixedTicket: fakeModelStore[conformance.Ticket],
				UUIDTicket:     fakeModelStore[conformance.UUIDTicket],
				V7Ticket:       fakeModelStore[conformance.V7Ticket],
				SoftJob:        fakeModelStore[conformance.SoftJob],
			},
		})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		url := realURL(t)
		conformance.Run(t, conformance.Harness{
			NewStore: func(t *testing.T) dao.Store[conformance.Job] {
				return newStore[conformance.Job](t, url, esstore.WithRefresh(esstore.RefreshTrue))
			},
			Models: &conformance.ModelStores{
				Ticket:         realModelStore[conformance.Ticket](url),
				PrefixedTicket: realModelStore[conformance.Ticket](url),
				UUIDTicket:     realModelStore[conformance.UUIDTicket](url),
				V7Ticket:       realModelStore[conformance.V7Ticket](url),
				SoftJob:        realModelStore[conformance.SoftJob](url),
			},
		})
	})
}

// fakeModelStore returns a store of T over a fresh index of a new fake
// server.
func fakeModelStore[T any](t *testing.T) dao.Store[T] {
	return newStore[T](t, newFake(t).URL())
}

// realModelStore returns a function that opens a store of T over a fresh
// index of the server at url.
func realModelStore[T any](url string) func(t *testing.T) dao.Store[T] {
	return func(t *testing.T) dao.Store[T] {
		return newStore[T](t, url, esstore.WithRefresh(esstore.RefreshTrue))
	}
}

// TestStress runs the multi-process no-double-claim check (with
// CLAIMSTORE_STRESS=1): child processes claim from the fake server that
// the parent process serves, or from the real server.
func TestStress(t *testing.T) {
	// A target is "url|index|refresh".
	open := func(t *testing.T, target string) dao.Store[conformance.Job] {
		parts := strings.SplitN(target, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("bad stress target %q", target)
		}
		s, err := esstore.New[conformance.Job](newClient(t, parts[0]),
			esstore.WithIndex(parts[1]), esstore.WithRefresh(esstore.Refresh(parts[2])))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	setup := func(t *testing.T, url string, refresh esstore.Refresh) string {
		s := newStore[conformance.Job](t, url, esstore.WithRefresh(refresh))
		return url + "|" + indexOf(s) + "|" + string(refresh)
	}
	t.Run("fake", func(t *testing.T) {
		conformance.RunStress(t, conformance.StressHarness{
			Setup: func(t *testing.T) string { return setup(t, newFake(t).URL(), esstore.RefreshWaitFor) },
			Open:  open,
			Rows:  2000,
		})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		conformance.RunStress(t, conformance.StressHarness{
			Setup: func(t *testing.T) string { return setup(t, realURL(t), esstore.RefreshTrue) },
			Open:  open,
			Rows:  2000,
		})
	})
}
