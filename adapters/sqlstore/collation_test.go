package sqlstore_test

import (
	"context"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestCollationDeclared checks the collation New reads: the database
// default on each server, and on MariaDB/MySQL the collation of an existing
// table, whatever the database default.
func TestCollationDeclared(t *testing.T) {
	want := map[string]dao.Collation{
		"sqlite":   {Name: "BINARY"},
		"postgres": {Name: "C.UTF-8"}, // the test database's LC_COLLATE
		"mysql":    {Name: "utf8mb4_general_ci", CaseInsensitive: true, AccentInsensitive: true, PadSpace: true},
	}
	each(t, func(t *testing.T, s *store) {
		backend := string(s.Dialect())
		if backend == "mariadb" {
			backend = "mysql"
		}
		if got := s.Capabilities().Collation; got != want[backend] {
			t.Errorf("Capabilities().Collation = %+v, want %+v", got, want[backend])
		}
	})
	t.Run("mysql-tables", func(t *testing.T) {
		db := testdb.MySQL(t)
		for coll, want := range map[string]dao.Collation{
			"utf8mb4_bin":              {PadSpace: true},
			"utf8mb4_nopad_bin":        {},
			"utf8mb4_unicode_ci":       {CaseInsensitive: true, AccentInsensitive: true, PadSpace: true, Linguistic: true},
			"latin1_general_cs":        {PadSpace: true, Linguistic: true}, // a < B
			"utf8mb4_general_ci":       {CaseInsensitive: true, AccentInsensitive: true, PadSpace: true},
			"utf8mb4_unicode_nopad_ci": {CaseInsensitive: true, AccentInsensitive: true, Linguistic: true},
		} {
			table := testdb.Table(t, db, "coll")
			if err := db.Set("gorm:table_options", "COLLATE "+coll).Table(table).AutoMigrate(&conformance.Job{}); err != nil {
				t.Fatal(err)
			}
			s, err := sqlstore.New[conformance.Job](db, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			want.Name = coll
			if got := s.Capabilities().Collation; got != want {
				t.Errorf("table in %s: Capabilities().Collation = %+v, want %+v", coll, got, want)
			}
		}
	})
}

// TestConformanceCollations runs the suite on MariaDB/MySQL tables created
// in collations other than the database default, so that the collation
// checks see a binary store, a PAD SPACE binary one and a linguistic one
// behave as each declares.
func TestConformanceCollations(t *testing.T) {
	for _, coll := range []string{"utf8mb4_nopad_bin", "utf8mb4_bin", "utf8mb4_unicode_ci"} {
		t.Run(coll, func(t *testing.T) {
			db := testdb.MySQL(t)
			conformance.Run(t, conformance.Harness{
				NewStore: func(t *testing.T) dao.Store[conformance.Job] {
					table := testdb.Table(t, db, "conf_coll")
					if err := db.Set("gorm:table_options", "COLLATE "+coll).Table(table).AutoMigrate(&conformance.Job{}); err != nil {
						t.Fatal(err)
					}
					s, err := sqlstore.New[conformance.Job](db, sqlstore.WithTable(table))
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Migrate(context.Background()); err != nil {
						t.Fatal(err)
					}
					return s
				},
				Rows: 200, Workers: 4,
				// The models section and leader election do not depend on
				// the claim table's collation; the other conformance runs
				// cover them.
				Skip:           []string{conformance.CheckModels, conformance.CheckLeader},
				KillLockHolder: func(t *testing.T, tx any) { sqlstoretest.KillSession(t, db, tx) },
			})
		})
	}
}
