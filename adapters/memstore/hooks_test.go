package memstore_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/internal/testutil/hooktest"
)

// GORM model hooks are GORM's: they run around the statements GORM runs,
// and the memory store runs none, so no operation runs a hook, Create
// included (on the SQL backends Create runs the create hooks). A model
// that sets fields in BeforeCreate gets them set only on SQL.
func TestHooks(t *testing.T) {
	s, err := memstore.New[hooktest.Job]()
	if err != nil {
		t.Fatal(err)
	}
	hooks, note := hooktest.Run(t, s)
	hooktest.Check(t, hooks, nil)
	if note != "" {
		t.Errorf("stored Note = %q; want it empty: BeforeCreate does not run", note)
	}
}
