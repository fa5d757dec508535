package sqlstore_test

import (
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/hooktest"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// GORM runs a model's hooks around the statements it runs itself. On the
// SQL backends that is Create (GORM's Create, in batches): BeforeSave and
// BeforeCreate run for each item before the INSERT, AfterCreate and
// AfterSave after it, and a change BeforeCreate makes is written. Every other operation runs SQL rendered
// by package dialects on the connection pool, and no hook runs: no
// AfterFind after Get, Find or Claim, no BeforeUpdate for Update or
// Claim, no BeforeDelete for Delete.
func TestHooks(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			table := testdb.Table(t, db, "hooks")
			s, err := sqlstore.New[hooktest.Job](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			hooks, note := hooktest.Run(t, s)
			hooktest.Check(t, hooks, map[string][]string{"Create": hooktest.CreateHooks(2)})
			if note != hooktest.NoteSetByBeforeCreate {
				t.Errorf("stored Note = %q; want %q, set by BeforeCreate", note, hooktest.NoteSetByBeforeCreate)
			}

			// A hook's error fails Create, wrapped, and nothing is written.
			refusedTable := testdb.Table(t, db, "refused")
			r, err := sqlstore.New[hooktest.Refused](db, sqlstore.WithTable(refusedTable))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.Create(t.Context(), &hooktest.Refused{Status: "ready"}); !errors.Is(err, hooktest.ErrRefused) {
				t.Errorf("Create with a failing BeforeCreate: %v; want the hook's error", err)
			}
			if n, err := r.Count(t.Context(), dao.Eq("status", "ready")); err != nil || n != 0 {
				t.Errorf("rows after the refused Create: %d, %v; want 0", n, err)
			}
		})
	}
}
