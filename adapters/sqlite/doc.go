// Package sqlite is the SQLite backend of claimstore: it links
// github.com/ncruces/go-sqlite3 and its GORM dialector gormlite (SQLite
// translated to Go, no cgo), and nothing of the other databases.
//
// Importing the package, usually as
//
//	import _ "github.com/claimstore/claimstore/adapters/sqlite"
//
// registers the backend, so that sqlstore.Open(ctx, "sqlite", dsn) opens a
// handle with gormlite; dsn is a database file's path ("app.db"), a
// "file:" URI, or a DSN built with sqlstore.SQLiteDSN. All three open the
// file with the settings the claim and its documented bounds assume
// (sqlstore.SQLiteDefaults): a 5 s busy timeout set first, WAL,
// synchronous NORMAL, immediate transactions and times stored as sortable
// text (sqlstore.SQLiteTimeLayout); a PRAGMA or parameter the URI sets
// itself wins, e.g. "file:app.db?_pragma=journal_mode(delete)". An
// in-memory database (":memory:" or mode=memory) gets no WAL and is
// limited to one open connection, since each connection would see its own
// database; a file is limited to two
// (sqlstore.OpenSQLiteConns), since SQLite admits one writer at a time
// and a small pool queues a process's writes in order instead of in the
// busy handler.
//
// sqlstore.New[T](db) returns the store of T over the handle: claims run
// one UPDATE ... RETURNING statement each (the fast path, see
// dialects.Renderer.Claim), or with
// sqlstore.WithStrategy(dao.StrategyPortable) one SELECT, then one guarded
// UPDATE per row; either way writers serialize, so a claimer that cannot
// get the write lock within the busy timeout gets dao.ErrBusy.
// sqlstore.NewLocker(db) returns its try-lock (the database write lock of
// an immediate transaction, tried with a busy timeout of 0).
package sqlite
