package jobs_test

import (
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// userRow is a user's own model: its store keeps the dialect's default.
type userRow struct {
	ID          int64 `gorm:"primaryKey"`
	Status      string
	LockedUntil int64
}

// TestJobTableClaimsOnFastPath checks the claim strategy of the job
// store on MariaDB: the fast path for jobs.Row, whose table the library
// owns, by default; the portable default for a user's model; the
// portable default for jobs.Row when the store asks for it.
func TestJobTableClaimsOnFastPath(t *testing.T) {
	db := testdb.MySQL(t)
	table := testdb.Table(t, db, "strategy_jobs")
	for _, c := range []struct {
		name string
		new  func() (dao.Capabilities, error)
		want dao.Strategy
	}{
		{"jobs.Row", func() (dao.Capabilities, error) {
			s, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
			if err != nil {
				return dao.Capabilities{}, err
			}
			return s.Capabilities(), nil
		}, dao.StrategyFastPath},
		{"jobs.Row with StrategyPortable", func() (dao.Capabilities, error) {
			s, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table), sqlstore.WithStrategy(dao.StrategyPortable))
			if err != nil {
				return dao.Capabilities{}, err
			}
			return s.Capabilities(), nil
		}, dao.StrategyPortable},
		{"user model", func() (dao.Capabilities, error) {
			s, err := sqlstore.New[userRow](db, sqlstore.WithTable(table+"_user"))
			if err != nil {
				return dao.Capabilities{}, err
			}
			return s.Capabilities(), nil
		}, dao.StrategyPortable},
	} {
		caps, err := c.new()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s on %s: strategy %v, %v round trips per claim", c.name, caps.Backend, caps.Strategy, caps.ClaimRoundTrips)
		if caps.Strategy != c.want {
			t.Errorf("%s on %s: strategy %v, want %v", c.name, caps.Backend, caps.Strategy, c.want)
		}
	}
}
