// Package postgres is the PostgreSQL backend of claimstore: it links
// gorm.io/driver/postgres and pgx, and nothing of the other databases.
//
// [New] returns the portable store ([dao.Table]) over the shared SQL core
// of package sqlstore, which documents the claim on PostgreSQL: one
// UPDATE … FOR UPDATE SKIP LOCKED … RETURNING statement per claim, in
// autocommit under READ COMMITTED. [Open] opens a handle from a DSN.
// Importing the package also registers the backend, so sqlstore.New and
// sqlstore.Open accept a PostgreSQL handle or DSN.
package postgres
