package esstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/esstore"
	"github.com/claimstore/claimstore/internal/testutil/difftest"
)

// Criteria with compound operands, an Or wrapped in a single-operand Or
// among them, select what the tree says in the query DSL (Find, Count,
// Update, Delete, the candidate read of Claim).
func TestCriteriaPrecedence(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		difftest.Precedence(t, newStore[difftest.Row](t, b.url, append(b.opts, esstore.WithRefresh(esstore.RefreshTrue))...))
	})
}
