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
			// A lease has no connection to kill: a dead holder's lease
			// expires after esstore.DefaultLockTTL (see TestTryLockExpired).
			Skip: []string{conformance.CheckLockHolderKilled},
		})
	})
	t.Run("elasticsearch", func(t *testing.T) {
		url := realURL(t)
		conformance.Run(t, conformance.Harness{
			NewStore: func(t *testing.T) dao.Store[conformance.Job] {
				return newStore[conformance.Job](t, url, esstore.WithRefresh(esstore.RefreshTrue))
			},
			Skip: []string{conformance.CheckLockHolderKilled},
		})
	})
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
