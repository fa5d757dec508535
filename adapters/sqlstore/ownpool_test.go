package sqlstore_test

import (
	"errors"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// The log and lease stores commit their own statements: a handle bound to
// a transaction is refused with ErrInvalidArgument, saying what to do
// instead, and so is a nil handle.
func TestOwnPoolStoresRefuseATransaction(t *testing.T) {
	db := testdb.SQLite(t)
	tx := db.Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	defer tx.Rollback()
	if _, err := sqlstore.NewLog(tx, "own_log"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewLog in a transaction: %v; want ErrInvalidArgument", err)
	}
	if _, err := sqlstore.NewLeases(tx, ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewLeases in a transaction: %v; want ErrInvalidArgument", err)
	}
	if _, err := sqlstore.NewLog(nil, "own_log"); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("NewLog(nil): %v; want ErrInvalidArgument", err)
	}
	if _, err := sqlstore.NewLeases(db, ""); err != nil {
		t.Errorf("NewLeases on the pool: %v", err)
	}
}
