package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// nullableRow has plain (non-pointer) fields over nullable columns, as
// most GORM models do: GORM's scanner reads a NULL into the zero value.
type nullableRow struct {
	ID     int64 `gorm:"primaryKey"`
	Status string
	Note   string
	Count  int
	Done   bool
	At     time.Time
	Data   []byte
}

// Rows with NULL in every nullable column read as zero values through
// Get, Find and Claim on every SQL backend and strategy, as GORM's own
// scanner reads them, instead of failing the read.
func TestNullIntoPlainFields(t *testing.T) {
	ctx := context.Background()
	for _, b := range []struct {
		name string
		db   func(testing.TB) *gorm.DB
	}{{"postgres", testdb.Postgres}, {"sqlite", testdb.SQLite}, {"mysql", testdb.MySQL}} {
		for _, strategy := range []dao.Strategy{dao.StrategyFastPath, dao.StrategyPortable} {
			t.Run(b.name+"/"+strategy.String(), func(t *testing.T) {
				db := b.db(t)
				table := testdb.Table(t, db, "nullscan")
				s, err := sqlstore.New[nullableRow](db, sqlstore.WithTable(table), sqlstore.WithStrategy(strategy))
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				for id := 1; id <= 3; id++ {
					if err := db.Exec("INSERT INTO "+table+" (id, status) VALUES (?, ?)", id, "pending").Error; err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("id", 3), Set: dao.Set{"status": "pending"}, Limit: 1, OrderBy: []dao.Order{dao.Asc("id")}}); err != nil {
					t.Fatalf("Claim of one row: %v", err)
				}
				got, err := s.Get(ctx, int64(1))
				if err != nil || got.Note != "" || got.Count != 0 || got.Done || !got.At.IsZero() || got.Data != nil {
					t.Fatalf("Get: %+v, %v; want zero values", got, err)
				}
				if rows, err := s.Find(ctx, dao.Query{Where: dao.Eq("status", "pending")}); err != nil || len(rows) != 3 {
					t.Fatalf("Find: %d rows, %v", len(rows), err)
				}
				rows, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.Eq("status", "pending"), Set: dao.Set{"status": "claimed"}, Limit: 3, OrderBy: []dao.Order{dao.Asc("id")}})
				if err != nil || len(rows) != 3 {
					t.Fatalf("Claim: %d rows, %v", len(rows), err)
				}
				for _, r := range rows {
					if r.Status != "claimed" || r.Note != "" || r.Count != 0 {
						t.Errorf("claimed %+v", r)
					}
				}
			})
		}
	}
}
