package sqlserver

import (
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"gorm.io/gorm"
)

// NewLocker returns the try-lock over db's pool for coord.WithLock (SQL Server: sp_getapplock with @LockOwner = 'Transaction' and @LockTimeout = 0):
// see sqlstore.Locker for the semantics and sqlstore.NewLocker, which it
// calls, for the errors. Stores of [New] are lockers too (their TryLock).
func NewLocker(db *gorm.DB) (*sqlstore.Locker, error) { return sqlstore.NewLocker(db) }
