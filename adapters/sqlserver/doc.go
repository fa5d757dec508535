// Package sqlserver is the SQL Server backend of claimstore: it links
// gorm.io/driver/sqlserver and microsoft/go-mssqldb, and nothing of the
// other databases.
//
// Importing the package, usually as
//
//	import _ "github.com/claimstore/claimstore/adapters/sqlserver"
//
// registers the backend, so that sqlstore.Open(ctx, "sqlserver", dsn)
// opens a handle on dsn, a go-mssqldb URL
// ("sqlserver://sa:pass@127.0.0.1:1433?database=test"), with
// gorm.io/driver/sqlserver; sqlstore.New[T](db) returns the store of T
// over it and sqlstore.NewLocker(db) its try-lock (sp_getapplock with
// @LockOwner = 'Transaction' and @LockTimeout = 0). Package sqlstore
// documents the claim on SQL Server.
//
// Claims run the portable default unless the store is built with
// sqlstore.WithStrategy(dao.StrategyFastPath): then each claim is one
// statement, WITH claimed AS (SELECT TOP (@p1) * FROM t WITH (ROWLOCK,
// READPAST, UPDLOCK) WHERE ... ORDER BY ...) UPDATE claimed SET ... OUTPUT
// INSERTED.* (dialects.Renderer.Claim), whose claimers skip each other's
// locked rows. Run it under READ COMMITTED (READPAST is refused under
// SNAPSHOT) on a table without enabled triggers (OUTPUT without INTO is
// refused there). Verify it on your server with the conformance suite,
// for example with the repository's compose file:
//
//	docker compose up -d sqlserver
//	CLAIMSTORE_CONFORMANCE_STRATEGY=fastpath make conformance DB=sqlserver \
//	    DSN='sqlserver://sa:Claimstore-Passw0rd@127.0.0.1:1433?database=master'
//
// The repository's own tests check its statement and error mapping over
// go-sqlmock; they run the suite on a real server only when
// CLAIMSTORE_SQLSERVER_DSN is set. Importing the package also registers the
// backend, so sqlstore.New and sqlstore.Open accept a SQL Server handle
// or DSN.
package sqlserver
