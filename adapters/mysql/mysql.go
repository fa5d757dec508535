package mysql

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	gomysql "github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
)

func init() {
	sqlstore.Register(sqlstore.Backend{
		Dialector: func(dsn string) (gorm.Dialector, error) {
			full, err := DSN(dsn)
			if err != nil {
				return nil, err
			}
			return gormmysql.Open(full), nil
		},
		Classify:    classify,
		MatchedRows: matchedRows,
		Interrupter: interrupter,
	}, dialects.MySQL, dialects.MariaDB)
}

// DSN returns dsn (a go-sql-driver/mysql DSN) with three parameters added
// unless dsn sets them:
//
//   - parseTime=true, so DATETIME columns scan into time.Time;
//   - interpolateParams=true, so a statement with arguments is one round
//     trip (text protocol with client-side escaping) instead of three
//     exchanges (prepare, execute, close) of the binary protocol.
//     Interpolation is unsafe with the multibyte character sets big5, gbk,
//     sjis and cp932 (go-sql-driver documentation, "interpolateParams");
//     keep the default utf8mb4;
//   - clientFoundRows=true, so an UPDATE reports the rows it matched, not
//     only those it changed: Update then returns the matched count in one
//     statement, and a guarded claim update of a row whose values it leaves
//     unchanged still counts (the store is correct without the flag too,
//     at the cost of extra queries in those cases).
//
// A dsn that sets parseTime=false, or a loc that sets its clocks back
// (daylight saving time), keeps it here and is refused by [New] (see
// sqlstore.New). A DSN the driver cannot parse is [dao.ErrInvalidArgument].
func DSN(dsn string) (string, error) {
	if _, err := gomysql.ParseDSN(dsn); err != nil {
		return "", fmt.Errorf("%w: mysql dsn: %w", dao.ErrInvalidArgument, err)
	}
	var query string
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 {
		if j := strings.IndexByte(dsn[i:], '?'); j >= 0 {
			query = dsn[i+j+1:]
		}
	}
	params, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("%w: mysql dsn parameters: %w", dao.ErrInvalidArgument, err)
	}
	out := dsn
	for _, p := range []string{"parseTime", "interpolateParams", "clientFoundRows"} {
		if _, ok := params[p]; ok {
			continue
		}
		sep := "&"
		if !strings.Contains(out[strings.LastIndexByte(out, '/')+1:], "?") {
			sep = "?"
		}
		out += sep + p + "=true"
	}
	return out, nil
}

// matchedRows reports whether an UPDATE's affected-row count on db is the
// number of rows it matched. MySQL and MariaDB count changed rows unless
// the client sets CLIENT_FOUND_ROWS (DSN parameter clientFoundRows=true,
// which [DSN] adds; MySQL manual, "mysql_affected_rows()"); the setting is
// read from the GORM dialector's parsed DSN, and taken as off when the
// dialector has none (a handle built over an existing connection pool).
func matchedRows(db *gorm.DB) bool {
	var cfg *gormmysql.Config
	switch d := db.Dialector.(type) {
	case *gormmysql.Dialector:
		cfg = d.Config
	case gormmysql.Dialector:
		cfg = d.Config
	}
	return cfg != nil && cfg.DSNConfig != nil && cfg.DSNConfig.ClientFoundRows
}

// classify maps the errors of go-sql-driver/mysql to dao sentinels (MySQL
// "Server Error Message Reference", MariaDB "Error Codes"): 1062
// ER_DUP_ENTRY and 1586 ER_DUP_ENTRY_WITH_KEY_NAME -> ErrDuplicate; 1213
// ER_LOCK_DEADLOCK -> ErrConflict; 1205 ER_LOCK_WAIT_TIMEOUT
// (innodb_lock_wait_timeout), MariaDB's 1969 ER_STATEMENT_TIMEOUT
// (max_statement_time) and MySQL's 3024 ER_QUERY_TIMEOUT
// (max_execution_time) -> ErrBusy; the connection-limit and server
// resource errors a later try can escape, 1040 ER_CON_COUNT_ERROR ("Too
// many connections", max_connections), 1041 ER_OUT_OF_RESOURCES, 1203
// ER_TOO_MANY_USER_CONNECTIONS (max_user_connections), 1226
// ER_USER_LIMIT_REACHED (a user's MAX_USER_CONNECTIONS and the other
// account resource limits), and the client codes 2006 CR_SERVER_GONE_ERROR
// and 2013 CR_SERVER_LOST, which a proxy may send, and 1047
// ER_UNKNOWN_COM_ERROR, which a MariaDB Galera Cluster node returns
// ("WSREP has not yet prepared node for application use") while it is not
// Synced in the primary component, joining or cut off from the others
// (MariaDB Galera Cluster docs, "wsrep_reject_queries" and "Galera Cluster
// Status Variables": wsrep_ready), and 1180 ER_ERROR_DURING_COMMIT, a
// commit the server failed and rolled back, which a Galera node returns
// when it lost the primary component at commit ("Not connected to
// Primary Component") -> ErrUnavailable;
// mysql.ErrInvalidConn -> ErrUnavailable. Other errors are nil (an access
// denied error among them: no retry cures it).
func classify(err error) error {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1062, 1586:
			return dao.ErrDuplicate
		case 1213:
			return dao.ErrConflict
		case 1205, 1969, 3024:
			return dao.ErrBusy
		case 1040, 1041, 1047, 1180, 1203, 1226, 2006, 2013:
			return dao.ErrUnavailable
		}
		return nil
	}
	if errors.Is(err, gomysql.ErrInvalidConn) {
		return dao.ErrUnavailable
	}
	return nil
}
