// Package sqlserver is the SQL Server backend of claimstore: it links
// gorm.io/driver/sqlserver and microsoft/go-mssqldb, and nothing of the
// other databases.
//
// [New] returns the portable store ([dao.Table]) over the shared SQL core
// of package sqlstore, which documents the claim on SQL Server. [Open]
// opens a handle from a DSN. Importing the package also registers the
// backend, so sqlstore.New and sqlstore.Open accept a SQL Server handle
// or DSN.
package sqlserver
