package esstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/internal/testutil/difftest"
)

// TestDifferential runs random call sequences on a store over the
// in-process fake server and on the memory store, and compares results
// and documents after every call (see internal/testutil/difftest). The fake
// evaluates the query DSL and the write script in Go, so the test checks
// the translation of criteria, orderings and sets, not Elasticsearch
// itself. CLAIMSTORE_DIFF_SEED and
// CLAIMSTORE_DIFF_ITERATIONS change the seed and the number of cases.
func TestDifferential(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 50
	}
	s := newStore[difftest.Row](t, newFake(t).URL(), esstore.WithRefresh(esstore.RefreshTrue))
	difftest.Run(t, difftest.Target{Store: s}, difftest.ConfigFromEnv(t, n))
}
