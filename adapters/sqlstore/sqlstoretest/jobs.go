package sqlstoretest

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/jobs"
)

// JobsHarness returns a complete [conformance.JobsHarness] over db
// (PostgreSQL, MySQL, MariaDB or SQLite as [sqlstore.New] accepts):
//
//   - NewStores creates, for each check, a job table and its queue table
//     with fresh names (claimstore_conf_<16 hex digits>, and _q) with
//     jobs.Migrate, and a schedule table (_s) for periodic jobs with
//     dispatch.MigrateSchedules; Begin opens a transaction on db. All of
//     it is removed when the check ends (jobs.Drop), also when it fails.
//   - Setup creates the same tables for the multi-process check and
//     names them in its target, with the database file of an SQLite db;
//     Open, in the child processes too, opens stores over them: on db, or
//     for SQLite on the file the target names.
//
// Stores are built with opts (a WithTable among them is overridden).
func JobsHarness(db *gorm.DB, opts ...sqlstore.Option) conformance.JobsHarness {
	return conformance.JobsHarness{
		NewStores: func(t *testing.T) conformance.JobStores {
			t.Helper()
			base := tableName(t)
			return jobStores(t, db, base, true, opts)
		},
		Setup: func(t *testing.T) string {
			t.Helper()
			base := tableName(t)
			jobStores(t, db, base, true, opts)
			path := ""
			if db.Dialector.Name() == "sqlite" {
				path = SQLiteFile(t, db)
			}
			return base + "@" + path
		},
		Open: func(t *testing.T, target string) conformance.JobStores {
			t.Helper()
			base, path, _ := strings.Cut(target, "@")
			odb := db
			if path != "" {
				var err error
				if odb, err = sqlstore.Open(context.Background(), "sqlite", sqlstore.SQLiteDSN(path)); err != nil {
					t.Fatalf("sqlstoretest: open %s: %v", path, err)
				}
				t.Cleanup(func() {
					if sqlDB, err := odb.DB(); err == nil {
						_ = sqlDB.Close()
					}
				})
			}
			return jobStores(t, odb, base, false, opts)
		},
	}
}

// jobStores returns the stores of the job, queue and schedule tables
// named after base, creating them first (and removing them when t ends)
// when create is set.
func jobStores(t *testing.T, db *gorm.DB, base string, create bool, opts []sqlstore.Option) conformance.JobStores {
	t.Helper()
	ctx := context.Background()
	with := func(table string) []sqlstore.Option {
		return append(opts[:len(opts):len(opts)], sqlstore.WithTable(table))
	}
	js, err := sqlstore.New[jobs.Row](db, with(base)...)
	if err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	qs, err := sqlstore.New[jobs.Queue](db, with(base+"_q")...)
	if err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	if create {
		t.Cleanup(func() {
			if err := jobs.Drop(context.Background(), js, qs); err != nil {
				t.Errorf("sqlstoretest: %v", err)
			}
			if err := db.Migrator().DropTable(base + "_s"); err != nil {
				t.Errorf("sqlstoretest: drop table %s_s: %v", base, err)
			}
		})
		if err := jobs.Migrate(ctx, js, qs); err != nil {
			t.Fatalf("sqlstoretest: %v", err)
		}
		if err := dispatch.MigrateSchedules(ctx, db, base+"_s"); err != nil {
			t.Fatalf("sqlstoretest: %v", err)
		}
	}
	ss, err := sqlstore.New[dispatch.Schedule](db, with(base+"_s")...)
	if err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	return conformance.JobStores{
		Jobs: js, Queues: qs, Schedules: ss,
		Begin: func(t *testing.T) (any, func() error, func() error) {
			tx := db.Begin()
			if tx.Error != nil {
				t.Fatalf("sqlstoretest: begin: %v", tx.Error)
			}
			return tx, func() error { return tx.Commit().Error }, func() error { return tx.Rollback().Error }
		},
		NotTx: db,
	}
}

// SQLiteFile returns the file of the SQLite database db opens (its main
// database, PRAGMA database_list), failing t when it is not a file (an
// in-memory database) or the pragma fails.
func SQLiteFile(t testing.TB, db *gorm.DB) string {
	t.Helper()
	var rows []struct {
		Seq  int
		Name string
		File string
	}
	if err := db.Raw("PRAGMA database_list").Scan(&rows).Error; err != nil {
		t.Fatalf("sqlstoretest: database_list: %v", err)
	}
	for _, r := range rows {
		if r.Name == "main" && r.File != "" {
			return r.File
		}
	}
	t.Fatalf("sqlstoretest: the SQLite database is not a file: a second pool or another process needs one")
	return ""
}

// JobsNode returns a function for [conformance.JobsHarness].Nodes that
// opens, through db (another way into the database of a JobsHarness of
// this package: for a cluster, a pool on another node), stores over the
// tables of st, built with opts; Begin opens its transactions on db. It
// creates and drops nothing. Stores of another kind fail t.
func JobsNode(db *gorm.DB, opts ...sqlstore.Option) func(t *testing.T, st conformance.JobStores) conformance.JobStores {
	return func(t *testing.T, st conformance.JobStores) conformance.JobStores {
		t.Helper()
		base := tableOf(t, st.Jobs)
		return jobStores(t, db, base, false, opts)
	}
}
