package postgres

import (
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"gorm.io/gorm"
)

// NewLocker returns the try-lock over db's pool for coord.WithLock (PostgreSQL: pg_try_advisory_xact_lock in the lock's transaction):
// see sqlstore.Locker for the semantics and sqlstore.NewLocker, which it
// calls, for the errors. Stores of [New] are lockers too (their TryLock).
func NewLocker(db *gorm.DB) (*sqlstore.Locker, error) { return sqlstore.NewLocker(db) }
