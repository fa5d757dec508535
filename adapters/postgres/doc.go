// Package postgres is the PostgreSQL backend of claimstore: it links
// gorm.io/driver/postgres and pgx, and nothing of the other databases.
//
// The package has no functions to call: importing it, usually as
//
//	import _ "github.com/claimstore/claimstore/adapters/postgres"
//
// registers the backend, so that sqlstore.Open(ctx, "postgres", dsn) opens
// a handle on dsn, a pgx connection string or URL
// ("postgres://user@127.0.0.1:5432/db?sslmode=disable" or "host=… user=…
// dbname=…"), with gorm.io/driver/postgres over pgx (jackc/pgx/v5 stdlib);
// sqlstore.New[T](db) returns the store of T over it and
// sqlstore.NewLocker(db) its try-lock (pg_try_advisory_xact_lock). Package
// sqlstore documents the claim on PostgreSQL: one UPDATE … FOR UPDATE SKIP
// LOCKED … RETURNING statement per claim, in autocommit under READ
// COMMITTED (the fast path, the default here).
//
// # CockroachDB and YugabyteDB
//
// The same backend serves CockroachDB and YugabyteDB, distributed SQL
// databases that speak the PostgreSQL wire protocol: sqlstore.Open accepts
// "cockroachdb" and "yugabytedb" (aliases "cockroach", "crdb", "yugabyte",
// "ysql") with a pgx DSN, and [New] detects them from SELECT version()
// ("CockroachDB CCL v…", "PostgreSQL 11.2-YB-…"), see dialects.FromVersion.
// Their claim is PostgreSQL's FOR UPDATE SKIP LOCKED statement (on
// YugabyteDB without MATERIALIZED, which its PostgreSQL 11 layer lacks);
// it is opt-in (dao.StrategyFastPath), the portable claim being the
// default, as for every dialect but PostgreSQL.
//
// Both need READ COMMITTED to be enabled on the server, which is off by
// default on CockroachDB before 24.1 and on YugabyteDB before 2025.2:
//
//   - CockroachDB 23.2 or later: SET CLUSTER SETTING
//     sql.txn.read_committed_isolation.enabled = true. When it is off, a
//     READ COMMITTED transaction runs as SERIALIZABLE, where SKIP LOCKED
//     still passes over locked rows but a row another claimer committed
//     meanwhile fails the claim with a retryable serialization error
//     (dao.ErrConflict) instead of being skipped.
//   - YugabyteDB: the YB-TServer flag yb_enable_read_committed_isolation=true.
//     When it is off, READ COMMITTED falls back to Snapshot isolation, with
//     the same serialization errors; SERIALIZABLE does not support SKIP
//     LOCKED.
//
// sqlstore.New checks it (a READ COMMITTED transaction that reads the level it
// really runs at, then rolls back) and refuses a server on which it is off
// with an error wrapping dao.ErrInvalidArgument that names the setting.
// Make READ COMMITTED the session default as well (for example ALTER ROLE
// … SET default_transaction_isolation = 'read committed') so that the
// portable claim's statements run at that level too and the fast path
// needs no explicit transaction (one round trip instead of three).
//
// This repository's CI runs neither server: they are verified by users
// with the docker-compose.yml services and make conformance DB=cockroach
// or DB=yugabyte (docs/distributed-sql.md).
package postgres
