package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
)

// queuedJob is the model of the unique-while tests.
type queuedJob struct {
	ID       int64  `gorm:"primaryKey"`
	DedupKey string `gorm:"size:64;not null"`
	Status   string `gorm:"size:16;not null"`
}

func TestCreateUniqueWhile(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}, {"mysql", testdb.MySQL}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db := c.open(t)
			s, err := sqlstore.New[queuedJob](db, sqlstore.WithTable(testdb.Table(t, db, "uq")))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			u := sqlstore.UniqueWhile{Key: "dedup_key", Status: "status", Value: "queued", Index: "uq_test_queued"}
			for _, bad := range []sqlstore.UniqueWhile{
				{Key: "dedup_key", Status: "status", Value: "queued'; DROP TABLE x; --", Index: "uq_bad"},
				{Key: "nope", Status: "status", Value: "queued", Index: "uq_bad"},
				{Key: "dedup_key", Status: "id", Value: "queued", Index: "uq_bad"},
			} {
				if err := sqlstore.CreateUniqueWhile(ctx, s, bad); !errors.Is(err, dao.ErrInvalidArgument) {
					t.Errorf("CreateUniqueWhile(%+v) = %v, want ErrInvalidArgument", bad, err)
				}
			}
			// Before the index, two queued rows of one key are accepted.
			if err := s.Create(ctx, &queuedJob{DedupKey: "pre", Status: "queued"}, &queuedJob{DedupKey: "pre", Status: "queued"}); err != nil {
				t.Fatal(err)
			}
			if err := sqlstore.CreateUniqueWhile(ctx, s, u); !errors.Is(err, dao.ErrDuplicate) {
				t.Errorf("index over rows that break it: %v, want ErrDuplicate", err)
			}
			if _, err := s.Delete(ctx, dao.Eq("dedup_key", "pre"), 10); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second call finds the index and does nothing
				if err := sqlstore.CreateUniqueWhile(ctx, s, u); err != nil {
					t.Fatalf("CreateUniqueWhile: %v", err)
				}
			}
			if err := s.Create(ctx, &queuedJob{DedupKey: "k1", Status: "queued"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(ctx, &queuedJob{DedupKey: "k1", Status: "queued"}); !errors.Is(err, dao.ErrDuplicate) {
				t.Errorf("second queued row of k1: %v, want ErrDuplicate", err)
			}
			if err := s.Create(ctx, &queuedJob{DedupKey: "k1", Status: "done"}, &queuedJob{DedupKey: "k1", Status: "done"}, &queuedJob{DedupKey: "k2", Status: "queued"}); err != nil {
				t.Errorf("rows of other statuses or keys: %v", err)
			}
			if _, err := s.Update(ctx, dao.And(dao.Eq("dedup_key", "k1"), dao.Eq("status", "done")), dao.Set{"status": "queued"}); !errors.Is(err, dao.ErrDuplicate) {
				t.Errorf("update of done rows of k1 into queued: %v, want ErrDuplicate", err)
			}
			if _, err := s.Update(ctx, dao.And(dao.Eq("dedup_key", "k1"), dao.Eq("status", "queued")), dao.Set{"status": "done"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(ctx, &queuedJob{DedupKey: "k1", Status: "queued"}); err != nil {
				t.Errorf("queued row of k1 once the earlier one is done: %v", err)
			}
			if n, err := s.Count(ctx, dao.Eq("status", "queued")); err != nil || n != 2 {
				t.Errorf("queued rows = %d (%v), want 2", n, err)
			}
		})
	}
}
