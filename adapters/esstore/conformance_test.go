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
		})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		url := realURL(t)
		conformance.Run(t, conformance.Harness{
			NewStore: func(t *testing.T) dao.Store[conformance.Job] {
				return newStore[conformance.Job](t, url, esstore.WithRefresh(esstore.RefreshTrue))
			},
		})
	})
}

// TestStress runs the multi-process no-double-claim check (with
// CLAIMSTORE_STRESS=1): child processes claim from the fake server that
// the parent process serves, or from the real server.
func TestStress(t *testing.T) {
	open := func(t *testing.T, target string) dao.Store[conformance.Job] {
		url, index, _ := strings.Cut(target, "|")
		s, err := esstore.New[conformance.Job](newClient(t, url), esstore.WithIndex(index))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	setup := func(url string, opts ...esstore.Option) func(t *testing.T) string {
		return func(t *testing.T) string {
			s := newStore[conformance.Job](t, url, opts...)
			return url + "|" + s.Index()
		}
	}
	t.Run("fake", func(t *testing.T) {
		conformance.RunStress(t, conformance.StressHarness{
			Setup: func(t *testing.T) string { return setup(newFake(t).URL())(t) },
			Open:  open,
			Rows:  20000,
		})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		conformance.RunStress(t, conformance.StressHarness{
			Setup: func(t *testing.T) string { return setup(realURL(t), esstore.WithRefresh(esstore.RefreshTrue))(t) },
			Open:  open,
			Rows:  20000,
		})
	})
}
