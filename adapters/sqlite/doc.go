// Package sqlite is the SQLite backend of claimstore: it links
// github.com/ncruces/go-sqlite3 and its GORM dialector gormlite (SQLite
// translated to Go, no cgo), and nothing of the other databases.
//
// [New] returns the portable store ([dao.Table]) over the shared SQL core
// of package sqlstore, which documents the claim on SQLite. [Open] opens a
// handle from a DSN. Importing the package also registers the backend, so
// sqlstore.New and sqlstore.Open accept an SQLite handle or DSN.
package sqlite
