package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// ClaimInTx claims inside the caller's transaction: the rows come back in
// the claim's order and post-claim state, other connections see them
// unclaimed until the commit (and a PostgreSQL claim passes over them),
// a rollback gives them back and a commit keeps them. A store not bound
// to a transaction is refused with ErrInvalidArgument, nothing claimed.
func TestClaimInTx(t *testing.T) {
	each(t, func(t *testing.T, s *store) {
		ctx := context.Background()
		items := seed(t, s, 6) // priorities 0,1,2,0,1,2
		if rows, err := s.ClaimInTx(ctx, claimReq("w0", 1)); !errors.Is(err, dao.ErrInvalidArgument) || rows != nil {
			t.Fatalf("ClaimInTx outside a transaction = %v, %v; want ErrInvalidArgument", ids(rows), err)
		}
		want := []int64{items[2].ID, items[5].ID}
		pending := func(what string, n int64) {
			t.Helper()
			if got, err := s.Count(ctx, dao.Eq("status", "pending")); err != nil || got != n {
				t.Fatalf("%s: %d pending, %v; want %d", what, got, err, n)
			}
		}
		pending("before", 6)
		var opts []*sql.TxOptions
		if s.Dialect() != dialects.SQLite {
			opts = append(opts, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		}
		for _, commit := range []bool{false, true} {
			errRollback := errors.New("roll back")
			err := s.DB().Transaction(func(tx *gorm.DB) error {
				got, err := s.WithTx(tx).ClaimInTx(ctx, claimReq("w1", 2))
				if err != nil {
					return err
				}
				if !equal(ids(got), want) {
					t.Errorf("claimed %v, want %v", ids(got), want)
				}
				for _, r := range got {
					if r.Status != "processing" || r.Owner == nil || *r.Owner != "w1" || r.Attempts != 1 {
						t.Errorf("row %d: status %q owner %v attempts %d; want the post-claim state", r.ID, r.Status, r.Owner, r.Attempts)
					}
				}
				// Another connection sees the last commit (on SQLite a
				// reader of the WAL file).
				pending("outside the open transaction", 6)
				if s.Dialect() == dialects.Postgres {
					other, err := s.Claim(ctx, dao.ClaimRequest{Where: dao.In("id", want[0], want[1]), Set: dao.Set{"owner": "w2"}, Limit: 2})
					if err != nil || len(other) != 0 {
						t.Errorf("claim of the locked rows from another connection = %v, %v; want none (SKIP LOCKED)", ids(other), err)
					}
				}
				if !commit {
					return errRollback
				}
				return nil
			}, opts...)
			if commit && err != nil || !commit && !errors.Is(err, errRollback) {
				t.Fatalf("transaction (commit %v): %v", commit, err)
			}
			if commit {
				pending("after the commit", 4)
			} else {
				pending("after the rollback", 6)
			}
		}
		rows, err := s.Find(ctx, dao.Query{Where: dao.Eq("owner", "w1")})
		if err != nil || !equal(ids(rows), want) {
			t.Fatalf("rows owned after the commit: %v, %v; want %v", ids(rows), err, want)
		}
	})
}
