package postgres

import (
	"errors"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/jackc/pgx/v5/pgconn"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"
)

func init() {
	sqlstore.Register(sqlstore.Backend{
		Dialector:   func(dsn string) (gorm.Dialector, error) { return gormpg.Open(dsn), nil },
		Classify:    classify,
		Native:      native,
		Interrupter: interrupter,
		Listen:      listen,
	}, dialects.Postgres, dialects.CockroachDB, dialects.YugabyteDB)
}

// classify maps the errors of pgx to dao sentinels (PostgreSQL manual,
// "Appendix A. PostgreSQL Error Codes"): 23505 unique_violation ->
// ErrDuplicate; 40001 serialization_failure and 40P01 deadlock_detected ->
// ErrConflict; 55P03 lock_not_available (lock_timeout) and 57014
// query_canceled (statement_timeout, or a cancel request) -> ErrBusy;
// class 08 (connection exception), 57P01 admin_shutdown, 57P02
// crash_shutdown and 57P03 cannot_connect_now -> ErrUnavailable; from
// class 53 (insufficient resources) the errors a later try can escape,
// 53000 insufficient_resources, 53200 out_of_memory and 53300
// too_many_connections ("sorry, too many clients already", "too many
// connections for role", "remaining connection slots are reserved") ->
// ErrUnavailable (53100 disk_full and 53400 configuration_limit_exceeded
// need an operator and stay unmapped); pgconn.ConnectError ->
// ErrUnavailable unless it carries a server error, which is mapped by its
// code as above (an authentication failure or a missing database stays
// unmapped: no retry cures it); pgconn.ErrConnClosed (a statement, COMMIT
// included, on a connection pgx had already closed after losing its
// socket; nothing was sent) -> ErrUnavailable. Other errors are nil.
func classify(err error) error {
	if errors.Is(err, pgconn.ErrConnClosed) {
		return dao.ErrUnavailable
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "23505":
			return dao.ErrDuplicate
		case code == "40001" || code == "40P01":
			return dao.ErrConflict
		case code == "55P03", code == "57014":
			return dao.ErrBusy
		case len(code) == 5 && code[:2] == "08", code == "57P01", code == "57P02", code == "57P03",
			code == "53000", code == "53200", code == "53300":
			return dao.ErrUnavailable
		}
		// A server error, at connect time too: its code decides.
		return nil
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return dao.ErrUnavailable
	}
	return nil
}
