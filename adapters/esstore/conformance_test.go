package esstore_test

import (
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"gorm.io/gorm/schema"
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
				PrefixedTicket: func(t *testing.T) dao.Store[conformance.Ticket] { return prefixedStore(t, newFake(t).URL()) },
				UUIDTicket:     fakeModelStore[conformance.UUIDTicket],
				V7Ticket:       fakeModelStore[conformance.V7Ticket],
				SoftJob:        fakeModelStore[conformance.SoftJob],
			},
			Leases: func(t *testing.T) coord.LeaseStore { return newLeases(t, newFake(t).URL()) },
			// A lease has no connection to kill: a dead holder's lease
			// expires after esstore.DefaultLockLease (see TestTryLockExpired).
			Skip: []string{conformance.CheckLockHolderKilled},
		})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		url := realURL(t)
		conformance.Run(t, conformance.Harness{
			NewStore: func(t *testing.T) dao.Store[conformance.Job] {
				return newStore[conformance.Job](t, url, esstore.WithRefresh(esstore.RefreshTrue))
			},
			Models: &conformance.ModelStores{
				Ticket: realModelStore[conformance.Ticket](url),
				PrefixedTicket: func(t *testing.T) dao.Store[conformance.Ticket] {
					return prefixedStore(t, url, esstore.WithRefresh(esstore.RefreshTrue))
				},
				UUIDTicket: realModelStore[conformance.UUIDTicket](url),
				V7Ticket:   realModelStore[conformance.V7Ticket](url),
				SoftJob:    realModelStore[conformance.SoftJob](url),
			},
			Leases: func(t *testing.T) coord.LeaseStore { return newLeases(t, url) },
			Skip:   []string{conformance.CheckLockHolderKilled},
		})
	})
}

// fakeModelStore returns a store of T over a fresh index of a new fake
// server.
func fakeModelStore[T any](t *testing.T) dao.Store[T] {
	return newStore[T](t, newFake(t).URL())
}

// prefixedStore returns a store of conformance.Ticket over a fresh index
// named by a naming strategy with a fresh table prefix (no WithIndex).
func prefixedStore(t *testing.T, url string, opts ...esstore.Option) dao.Store[conformance.Ticket] {
	prefix := indexName() + "-"
	s := newStore[conformance.Ticket](t, url, append(opts, esstore.WithIndex(""), esstore.WithNamer(schema.NamingStrategy{TablePrefix: prefix}))...)
	if got := indexOf(s); got != prefix+"tickets" {
		t.Fatalf("index %q, want %q", got, prefix+"tickets")
	}
	return s
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
