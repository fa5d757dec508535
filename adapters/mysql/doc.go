// Package mysql is the MySQL and MariaDB backend of claimstore: it links
// gorm.io/driver/mysql and go-sql-driver/mysql, and nothing of the other
// databases.
//
// [New] returns the portable store ([dao.Table]) over the shared SQL core
// of package sqlstore, which documents the claim on MySQL and MariaDB: the
// portable guarded per-row claim by default, and with
// sqlstore.WithStrategy(dao.StrategyFastPath) a SKIP LOCKED read and one
// UPDATE in a READ COMMITTED transaction. [Open] opens a handle from a DSN
// completed by [DSN]. Importing the package also registers the backend,
// so sqlstore.New and sqlstore.Open accept a MySQL or MariaDB handle or
// DSN.
package mysql
