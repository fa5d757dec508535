package sqlserver

import (
	"errors"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	mssql "github.com/microsoft/go-mssqldb"
	gormmssql "gorm.io/driver/sqlserver"
	"gorm.io/gorm"
)

func init() {
	sqlstore.Register(sqlstore.Backend{
		Dialector: func(dsn string) (gorm.Dialector, error) { return gormmssql.Open(dsn), nil },
		Classify:  classify,
	}, dialects.SQLServer)
}

// classify maps the errors of microsoft/go-mssqldb to dao sentinels (SQL
// Server "Database engine events and errors"): 2627 (unique constraint)
// and 2601 (unique index) -> ErrDuplicate; 1205 (deadlock victim) ->
// ErrConflict; 1222 (lock request time out period exceeded, LOCK_TIMEOUT)
// -> ErrBusy; the connection-limit and resource errors a later try can
// escape, 17809 (the maximum number of user connections reached), 10928
// and 10929 (Azure SQL resource limits), 40501 (service busy) and 40613
// (database not currently available) -> ErrUnavailable. Other errors are
// nil.
func classify(err error) error {
	n, ok := ErrorNumber(err)
	if !ok {
		return nil
	}
	switch n {
	case 2627, 2601:
		return dao.ErrDuplicate
	case 1205:
		return dao.ErrConflict
	case 1222:
		return dao.ErrBusy
	case 17809, 10928, 10929, 40501, 40613:
		return dao.ErrUnavailable
	}
	return nil
}

// ErrorNumber returns the number of the SQL Server error err wraps (the
// driver returns an mssql.Error by value or by pointer), and whether it
// wraps one.
func ErrorNumber(err error) (int32, bool) {
	var v mssql.Error
	if errors.As(err, &v) {
		return v.Number, true
	}
	var p *mssql.Error
	if errors.As(err, &p) && p != nil {
		return p.Number, true
	}
	return 0, false
}
