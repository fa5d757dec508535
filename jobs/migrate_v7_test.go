package jobs_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// TestMigrateV7 makes a job table of schema version 6 on SQLite,
// PostgreSQL and MariaDB, with the lock row of a limited queue in its
// limit table, on which Limits fails (the columns it reads are
// missing); then runs Migrate twice and checks that the limit table
// gained the columns of the recorded Limit (settings, settings_at), that
// the row is kept, that versions 1 to jobs.SchemaVersion are recorded,
// that Limits lists the queue with no Limit known, and that a limited
// claim then records its Limit, which Limits gives.
func TestMigrateV7(t *testing.T) {
	for _, be := range testdb.SQLBackends {
		t.Run(be.Name, func(t *testing.T) {
			ctx := context.Background()
			db := be.Open(t)
			js, table := newJobStore(t, db, "mig7_jobs")
			if err := jobs.MigrateTo(ctx, js, nil, 6); err != nil {
				t.Fatal(err)
			}
			g := db.Session(&gorm.Session{NewDB: true}).WithContext(ctx)
			lt := jobs.LimitTable(table)
			now := time.Now().UTC().Truncate(time.Millisecond)
			if err := g.Exec("INSERT INTO ? (queue, part, claims, tokens, refilled_at) VALUES (?, ?, ?, ?, ?)",
				gorm.Expr(g.Statement.Quote(lt)), "old_q", "", 7, 0, now).Error; err != nil {
				t.Fatal(err)
			}
			hasCols := func() (bool, bool) {
				return g.Migrator().HasColumn(lt, "settings"), g.Migrator().HasColumn(lt, "settings_at")
			}
			if s, a := hasCols(); s || a {
				t.Fatalf("version 6: settings %v, settings_at %v; want neither", s, a)
			}
			c, err := jobs.NewClient(jobs.Config{Store: js})
			if err != nil {
				t.Fatal(err)
			}
			check := func(when string) {
				t.Helper()
				got, err := c.Limits(ctx, jobs.LimitParams{})
				if err != nil {
					t.Fatalf("%s: Limits: %v", when, err)
				}
				t.Logf("%s: Limits: %+v", when, got)
				if len(got) != 1 || got[0].Queue != "old_q" || got[0].Limit != nil || got[0].RecordedAt != nil || got[0].Running != 0 || len(got[0].Partitions) != 0 {
					t.Errorf("%s: Limits %+v, want old_q alone, no limit known, nothing running", when, got)
				}
			}
			if got, err := c.Limits(ctx, jobs.LimitParams{}); err == nil {
				t.Errorf("version 6: Limits %+v, want the error of the missing columns", got)
			} else {
				t.Logf("version 6: Limits: %v", err)
			}
			for run := range 2 {
				if err := jobs.Migrate(ctx, js, nil); err != nil {
					t.Fatalf("Migrate %d: %v", run+1, err)
				}
				s, a := hasCols()
				var claims []int64
				if err := g.Table(lt).Where("queue = ?", "old_q").Pluck("claims", &claims).Error; err != nil {
					t.Fatal(err)
				}
				var versions []int
				if err := g.Table(jobs.MigrationTable(table)).Order("version").Pluck("version", &versions).Error; err != nil {
					t.Fatal(err)
				}
				t.Logf("after Migrate %d: settings %v, settings_at %v, old_q claims %v, versions %v", run+1, s, a, claims, versions)
				if !s || !a || !slices.Equal(claims, []int64{7}) {
					t.Errorf("after Migrate %d: settings %v, settings_at %v, claims %v; want both columns and claims [7]", run+1, s, a, claims)
				}
				var all []int
				for v := 1; v <= jobs.SchemaVersion; v++ {
					all = append(all, v)
				}
				if jobs.SchemaVersion != 7 || !slices.Equal(versions, all) {
					t.Errorf("after Migrate %d: versions %v, want 1 to 7 (SchemaVersion %d)", run+1, versions, jobs.SchemaVersion)
				}
				check("after Migrate")
			}
			lim := jobs.Limit{Max: 4, Rate: 10, Period: time.Minute, Burst: 2, ByKind: true}
			claim, err := jobs.NewLimiter(c, "old_q", lim)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := claim(ctx, now, dao.ClaimRequest{
				Where: dao.And(dao.Eq(jobs.ColState, string(jobs.StateAvailable)), dao.Eq(jobs.ColQueue, "old_q")),
				Set:   dao.Set{jobs.ColLeaseOwner: "w", jobs.ColLeaseUntil: now.Add(time.Minute)}, Limit: 1,
				OrderBy: []dao.Order{dao.Asc(jobs.ColID)},
			}); err != nil {
				t.Fatal(err)
			}
			got, err := c.Limits(ctx, jobs.LimitParams{Queue: "old_q"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Limit == nil || !reflect.DeepEqual(*got[0].Limit, lim) || got[0].RecordedAt == nil || got[0].RecordedAt.Sub(now).Abs() > time.Second {
				t.Errorf("after a claim: Limits %+v, want limit %+v recorded at %v", got, lim, now)
			}
		})
	}
}
