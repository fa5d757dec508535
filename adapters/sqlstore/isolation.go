package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// checkIsolation verifies, for a dialect with an isolation requirement
// (dialects.RequiredIsolation: CockroachDB, YugabyteDB), that the server
// really runs a READ COMMITTED transaction at READ COMMITTED: it begins a
// transaction with ISOLATION LEVEL READ COMMITTED on pool, runs the
// dialect's probe query (SHOW transaction_isolation on CockroachDB, SHOW
// yb_effective_transaction_isolation_level on YugabyteDB) and rolls back:
// three round trips, nothing written. The other dialects send nothing.
//
// A server whose switch is off is refused with dialects.CheckIsolation's
// error, which wraps dao.ErrInvalidArgument and names the setting. When
// pool is already a transaction (a store bound to a caller's transaction,
// which cannot claim) nothing is checked. A failed probe is mapped like
// every database error.
func checkIsolation(ctx context.Context, pool gorm.ConnPool, name dialects.Name) error {
	iso, ok := dialects.RequiredIsolation(name)
	if !ok || inTransaction(pool) {
		return nil
	}
	beginner, ok := pool.(gorm.TxBeginner)
	if !ok {
		return fmt.Errorf("check %s isolation: the connection pool %T cannot begin a transaction", name, pool)
	}
	tx, err := beginner.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("check %s isolation: begin: %w", name, mapError(err))
	}
	var level string
	err = tx.QueryRowContext(ctx, iso.Probe).Scan(&level)
	if rbErr := tx.Rollback(); err == nil && rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
		err = rbErr
	}
	if err != nil {
		return fmt.Errorf("check %s isolation: %s: %w", name, iso.Probe, mapError(err))
	}
	return dialects.CheckIsolation(name, level)
}
