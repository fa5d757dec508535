// Package tool runs the conformance suite of package conformance as a
// command-line check of one database a user points it at, and prints a
// report of what held there. It has no API: everything is in its test,
// TestConformanceTool, which the Makefile's conformance target runs:
//
//	make conformance DB=postgres DSN='postgres://user@host:5432/db?sslmode=disable'
//
// or, equivalently,
//
//	CLAIMSTORE_CONFORMANCE_DB=postgres CLAIMSTORE_CONFORMANCE_DSN='postgres://...' \
//		go test -count=1 -timeout 30m -v -run TestConformanceTool ./conformance/tool/
//
// CLAIMSTORE_CONFORMANCE_DB is one of postgres, mysql, mariadb, sqlite,
// sqlserver, cockroach, yugabyte, elasticsearch or memory; without it the test skips, so a plain
// go test ./... does not run the suite a second time. CLAIMSTORE_CONFORMANCE_DSN
// is the database to test:
//
//   - postgres: a pgx connection string or URL; default the local test
//     database (CLAIMSTORE_POSTGRES_DSN, else
//     postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
//   - cockroach, yugabyte (also cockroachdb, crdb, yugabytedb): a pgx
//     DSN; default CLAIMSTORE_COCKROACH_DSN or CLAIMSTORE_YUGABYTE_DSN, else
//     the docker-compose.yml service (make up-distributed):
//     postgres://root@127.0.0.1:26257/defaultdb?sslmode=disable,
//     postgres://yugabyte@127.0.0.1:5433/yugabyte?sslmode=disable. The
//     server must be the one named (detected from SELECT version()). These
//     two are verified by users with compose, not in this repository's CI.
//   - mysql, mariadb: a go-sql-driver DSN; default CLAIMSTORE_MYSQL_DSN,
//     else root@tcp(127.0.0.1:3306)/test.
//   - sqlite: a database file path (opened with the settings of
//     sqlstore.SQLiteDSN) or a full github.com/ncruces/go-sqlite3 DSN;
//     default a new file in a temporary directory.
//   - sqlserver: a go-mssqldb URL; default CLAIMSTORE_SQLSERVER_DSN; none
//     is an error that says how to start one.
//   - elasticsearch: the server URL; default CLAIMSTORE_ELASTICSEARCH_URL;
//     none is an error (the in-process fake server is internal to package
//     esstore and runs in that package's own tests).
//   - memory: no DSN.
//
// CLAIMSTORE_CONFORMANCE_STRATEGY chooses the claim strategy of the SQL
// stores: unset or "default" (the dialect's default), "portable", or
// "fastpath" (the fast path: the default of PostgreSQL and SQLite, opt-in
// on MySQL, MariaDB and SQL Server); another value fails the test.
//
// Every test of the suite gets a table (an index on Elasticsearch) of its
// own with a fresh random name, dropped when the test ends; nothing else
// in the database is read or written.
//
// The suite runs in a child process (the test binary again), so that the
// parent can read each group's outcome from the child's verbose output.
// The parent then forces one lost race itself and, on SQL backends, counts
// the round trips of one claim with the counting driver of package
// internal/testutil/roundtrip, and prints the report: every top-level group of the suite
// with pass, fail or skip; the lost-race behaviour observed next to the
// one the store declares in its Capabilities; the round trips per claim
// declared and measured. The test fails when any group fails or the
// observed lost race differs from the declared one.
package tool
