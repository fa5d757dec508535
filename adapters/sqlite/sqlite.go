package sqlite

import (
	"context"
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

// New returns the store of T over db, an SQLite handle opened with
// github.com/ncruces/go-sqlite3/gormlite (by [Open] or by the caller): see
// sqlstore.New, which it calls, for what it reads at start, the options
// and the errors. Claims run one UPDATE ... RETURNING statement each (the
// fast path, see dialects.Renderer.Claim), or with
// sqlstore.WithStrategy(dao.StrategyPortable) the portable default (one
// SELECT, then one guarded UPDATE per row); either way writers serialize,
// so a claimer that cannot get the write lock within the busy timeout gets
// dao.ErrBusy.
func New[T any](db *gorm.DB, opts ...sqlstore.Option) (*dao.Table[T], error) {
	return sqlstore.New[T](db, opts...)
}

// Open opens a GORM handle on dsn with gormlite over the
// github.com/ncruces/go-sqlite3 driver (SQLite translated to Go, no cgo),
// and checks it with ctx. dsn is a database file's path ("app.db"), a
// "file:" URI, or a DSN built with sqlstore.SQLiteDSN; all three open the
// file with the same settings, those the claim and its documented bounds
// assume (sqlstore.SQLiteDefaults): a 5 s busy timeout set first, WAL,
// synchronous NORMAL, immediate transactions and times stored as
// sortable text (sqlstore.SQLiteTimeLayout). A PRAGMA or parameter the
// URI sets itself wins, e.g. "file:app.db?_pragma=journal_mode(delete)".
// An in-memory database (":memory:" or mode=memory) gets no WAL and is
// limited to one open connection, since each connection would see its own
// database. Errors: a file that cannot be opened is mapped like every
// database error (SQLITE_BUSY is [dao.ErrBusy]); on error nothing stays
// open.
func Open(ctx context.Context, dsn string) (*gorm.DB, error) {
	return sqlstore.Open(ctx, string(dialects.SQLite), dsn)
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
