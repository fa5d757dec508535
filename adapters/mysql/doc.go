// Package mysql is the MySQL and MariaDB backend of claimstore: it links
// gorm.io/driver/mysql and go-sql-driver/mysql, and nothing of the other
// databases.
//
// Importing the package, usually as
//
//	import _ "github.com/claimstore/claimstore/adapters/mysql"
//
// registers the backend, so that sqlstore.Open(ctx, "mysql", dsn) (or
// "mariadb") opens a handle on dsn, a go-sql-driver/mysql DSN
// ("root:@tcp(127.0.0.1:3306)/test") completed by [DSN], with
// gorm.io/driver/mysql; sqlstore.New[T](db) returns the store of T over it
// and sqlstore.NewLocker(db) its try-lock (GET_LOCK(name, 0) on a pinned
// connection). Package sqlstore documents the claim on MySQL and MariaDB:
// the portable guarded per-row claim by default, and with
// sqlstore.WithStrategy(dao.StrategyFastPath) a SKIP LOCKED read (MySQL
// 8.0.1+, MariaDB 10.6+) and one UPDATE in a READ COMMITTED transaction.
package mysql
