package mysql

import (
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"gorm.io/gorm"
)

// NewLocker returns the try-lock over db's pool for coord.WithLock (MySQL and MariaDB: GET_LOCK(name, 0) on a pinned connection, released before the connection returns to the pool):
// see sqlstore.Locker for the semantics and sqlstore.NewLocker, which it
// calls, for the errors. Stores of [New] are lockers too (their TryLock).
func NewLocker(db *gorm.DB) (*sqlstore.Locker, error) { return sqlstore.NewLocker(db) }
