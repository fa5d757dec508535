package sqlite

import (
	"errors"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/gormlite"
	"gorm.io/gorm"
)

func init() {
	sqlstore.Register(sqlstore.Backend{
		Dialector: func(dsn string) (gorm.Dialector, error) {
			return gormlite.Open(sqlstore.SQLiteDefaults(dsn)), nil
		},
		Classify:    classify,
		Interrupter: interrupter,
	}, dialects.SQLite)
}

// classify maps the errors of the SQLite driver to dao sentinels (SQLite
// "Result and Error Codes"): SQLITE_BUSY and SQLITE_LOCKED with their
// extended codes -> ErrBusy; SQLITE_CONSTRAINT_UNIQUE and
// SQLITE_CONSTRAINT_PRIMARYKEY -> ErrDuplicate. The driver returns a
// *sqlite3.Error, or a bare result code when SQLite gave no message; both
// convert to the extended code, whose Code() is the primary code. Other
// errors are nil.
func classify(err error) error {
	var code sqlite3.ExtendedErrorCode
	if !errors.As(err, &code) {
		return nil
	}
	switch {
	case code.Code() == sqlite3.BUSY, code.Code() == sqlite3.LOCKED:
		return dao.ErrBusy
	case code == sqlite3.CONSTRAINT_UNIQUE, code == sqlite3.CONSTRAINT_PRIMARYKEY:
		return dao.ErrDuplicate
	}
	return nil
}
