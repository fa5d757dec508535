package memstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/internal/testutil/difftest"
)

// Criteria with compound operands, an Or wrapped in a single-operand Or
// among them, select what the tree says in every call.
func TestCriteriaPrecedence(t *testing.T) {
	s, err := memstore.New[difftest.Row]()
	if err != nil {
		t.Fatal(err)
	}
	difftest.Precedence(t, s)
}
