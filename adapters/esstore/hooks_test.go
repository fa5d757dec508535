package esstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/internal/testutil/hooktest"
)

// GORM model hooks are GORM's: they run around the statements GORM runs,
// and the Elasticsearch store runs none, so no operation runs a hook,
// Create included (on the SQL backends Create runs the create hooks).
func TestHooks(t *testing.T) {
	s := newStore[hooktest.Job](t, newFake(t).URL())
	hooks, note := hooktest.Run(t, s)
	hooktest.Check(t, hooks, nil)
	if note != "" {
		t.Errorf("stored Note = %q; want it empty: BeforeCreate does not run", note)
	}
}
