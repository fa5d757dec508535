package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestMigrateV2 makes a job table of schema version 1 on
// SQLite and MariaDB, with jobs in it, runs Migrate and checks that on
// SQLite the schedule index is now partial, that the fetch index is
// unchanged, that the jobs are kept, that every version to jobs.SchemaVersion is recorded (version 5 with its
// workflow index), and that a second
// Migrate changes nothing. It prints the index's columns before and after.
func TestMigrateV2(t *testing.T) {
	for _, be := range []testdb.Backend{{Name: "sqlite", Open: testdb.SQLite}, {Name: "mariadb", Open: testdb.MySQL}} {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			db := be.Open(t)
			js, table := newJobStore(t, db, "mig_jobs")
			if err := jobs.MigrateTo(ctx, js, nil, 1); err != nil {
				t.Fatal(err)
			}
			g := db.Session(&gorm.Session{NewDB: true}).WithContext(ctx)
			fetch, _, _ := jobs.IndexNames(db, table)
			v1 := []string{jobs.ColState, jobs.ColQueue, jobs.ColPriority, jobs.ColScheduledAt, jobs.ColID}
			before := indexColumns(t, g, table, fetch)
			t.Logf("version 1: %s (%s)", fetch, strings.Join(before, ", "))
			if !slices.Equal(before, v1) {
				t.Fatalf("version 1 fetch index: got %v, want %v", before, v1)
			}
			c, err := jobs.NewClient(jobs.Config{Store: js})
			if err != nil {
				t.Fatal(err)
			}
			const n = 10
			params := make([]jobs.InsertParams, n)
			for i := range params {
				params[i] = jobs.InsertParams{Args: benchArgs{Seq: int64(i)}}
			}
			if _, err := c.InsertMany(ctx, params); err != nil {
				t.Fatal(err)
			}
			want := v1
			for run := range 2 {
				if err := jobs.Migrate(ctx, js, nil); err != nil {
					t.Fatalf("Migrate %d: %v", run+1, err)
				}
				after := indexColumns(t, g, table, fetch)
				t.Logf("after Migrate %d: %s (%s)", run+1, fetch, strings.Join(after, ", "))
				if !slices.Equal(after, want) {
					t.Errorf("after Migrate %d: fetch index %v, want %v", run+1, after, want)
				}
				if be.Name == "sqlite" {
					_, schedule, _ := jobs.IndexNames(db, table)
					var def string
					if err := g.Raw("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", schedule).Scan(&def).Error; err != nil {
						t.Fatal(err)
					}
					t.Logf("after Migrate %d: %s", run+1, def)
					if !strings.Contains(def, "WHERE") {
						t.Errorf("after Migrate %d: the schedule index is not partial: %s", run+1, def)
					}
				}
				var versions []int
				if err := g.Table(jobs.MigrationTable(table)).Order("version").Pluck("version", &versions).Error; err != nil {
					t.Fatal(err)
				}
				var all []int
				for v := 1; v <= jobs.SchemaVersion; v++ {
					all = append(all, v)
				}
				if !slices.Equal(versions, all) {
					t.Errorf("after Migrate %d: versions recorded %v, want %v", run+1, versions, all)
				}
				// Version 5: the workflow index, which no earlier step
				// creates.
				wfIdx := jobs.WorkflowIndexName(db, table)
				if !slices.Contains(versions, 5) || !g.Migrator().HasIndex(table, wfIdx) {
					t.Errorf("after Migrate %d: version 5 recorded %v, workflow index %s present %v; want both",
						run+1, slices.Contains(versions, 5), wfIdx, g.Migrator().HasIndex(table, wfIdx))
				}
				kept, err := js.Count(ctx, dao.Eq(jobs.ColQueue, jobs.DefaultQueue))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("after Migrate %d: %d of %d jobs", run+1, kept, n)
				if kept != n {
					t.Errorf("after Migrate %d: %d jobs, want %d", run+1, kept, n)
				}
			}
		})
	}
}

// indexColumns returns the columns of index name of table, in order, or
// nil when table has no such index.
func indexColumns(t *testing.T, db *gorm.DB, table, name string) []string {
	t.Helper()
	idx, err := db.Migrator().GetIndexes(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, ix := range idx {
		if ix.Name() == name {
			return ix.Columns()
		}
	}
	return nil
}
