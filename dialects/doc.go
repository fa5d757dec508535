// Package dialects knows the SQL dialects claimstore speaks: their names,
// how to tell them apart on a live connection ([Detect]: MariaDB from MySQL
// by the server version, CockroachDB and YugabyteDB from PostgreSQL), the
// server variants named beside them ([Galera], MariaDB Galera Cluster,
// whose SQL is MariaDB's: [DetectVariant], [DetectGalera], a node's
// state ([GaleraStatus]), and its documented behaviours with their
// sources, [Behaviours]), which of them
// claim on the one-statement fast
// path (the explicit allow-list, [DefaultFastPath] = PostgreSQL, checked by
// [FastPathAllowed]), and the SQL text of every statement the SQL adapter
// runs ([Renderer]).
//
// Statements are data: text with the dialect's native placeholders ($1 for
// PostgreSQL; ? for MySQL, MariaDB and SQLite; @p1 for SQL Server) plus the
// bound values, rendered from checked dao.Criteria, dao.Order and dao.Set
// values. No input ever becomes SQL text: identifiers come from the model
// schema and are quoted; values are bound parameters. The adapter
// executes exactly the rendered text.
//
// The dialects themselves are data too. One table holds, per dialect, its
// identifier quotes, its placeholder spelling, its bound-value limit, how
// it sorts NULLs, and the skeleton of every statement it has: SQL text
// with holes such as {table}, {where}, {order}, {limit} and {set}, filled
// left to right so bind parameters are numbered in text order. One
// expression writer renders criteria, orderings and SET lists for every
// dialect from that data; adding a dialect or a statement is adding
// skeletons, not code paths. Every statement kind is golden-tested per
// dialect, without a server, against testdata/<dialect>/<kind>.golden
// over a fixed set of representative requests (refusals included); after
// an intended change, rewrite the files with
//
//	go test ./dialects -run TestGolden -update
//
// and review the diff.
//
// Claim SQL is rendered here rather than through GORM's clause builders
// because those do not carry the claim across dialects: the MySQL
// dialector emits UPDATE ... RETURNING for MariaDB 10.5 and later, which
// MariaDB does not support for UPDATE; SQLite dialectors drop
// clause.Locking silently; the SQL Server dialector would print FOR UPDATE,
// which is not T-SQL (SQL Server takes row locks through table hints such
// as UPDLOCK, ROWLOCK and READPAST, "Table Hints (Transact-SQL)").
//
// # Fast path and portable default
//
// On PostgreSQL a claim is one statement ([Renderer.Claim]): a
// MATERIALIZED common table expression that locks up to n eligible rows
// with FOR UPDATE SKIP LOCKED, an UPDATE ... RETURNING over them, and an
// outer SELECT that returns them in claim order. Every other dialect runs
// by default the portable claim (dao.StrategyPortable): a candidate read
// ([Renderer.Select]) and one guarded update per candidate
// ([Renderer.GuardedUpdate]) that re-asserts the eligibility criteria, so
// a row another claimer took meanwhile is not claimed twice.
//
// The other dialects have an opt-in fast path ([HasFastPath]), which a
// store takes when it is built with dao.StrategyFastPath. They are not on
// the default allow-list: the portable default is the correctness floor
// until a benchmark shows what the fast path buys. A table a library owns
// (dao.LibraryTable, the job table) has its own allow-list,
// [LibraryTableFastPath], which adds MySQL and MariaDB on servers that
// run SKIP LOCKED ([SkipLocked]).
//
//   - MySQL 8.0.1+ and MariaDB 10.6+: in one READ COMMITTED transaction, a
//     locking read with SELECT ... FOR UPDATE SKIP LOCKED
//     ([Renderer.LockCandidates]; MySQL manual "Locking Reads": "Locking
//     Read Concurrency with NOWAIT and SKIP LOCKED"; MariaDB "SELECT ...
//     SKIP LOCKED") and one UPDATE ... WHERE pk IN (...)
//     ([Renderer.UpdateByIDs]).
//   - SQLite 3.35+: one UPDATE ... WHERE pk IN (the ranked ids of a
//     materialized common table expression) RETURNING ([Renderer.Claim];
//     SQLite manual "RETURNING").
//   - SQL Server: one UPDATE through a common table expression that reads
//     SELECT TOP (n) ... WITH (ROWLOCK, READPAST, UPDLOCK), with OUTPUT
//     INSERTED.* ([Renderer.Claim]; "Table Hints (Transact-SQL)").
//
// # Fan-out
//
// [Renderer.FanOut] renders, on PostgreSQL and YugabyteDB, the statement
// with which the Watermill subscriber claims a batch of outbox messages,
// copies each into a delivery table once per consumer group of its topic
// (some copies already claimed by the caller) and writes the caller's
// acks, all in one round trip. The claim criteria, order and marks are
// the outbox's own (dao values the outbox package exports), and the
// source of every delivery column is given by the caller, so the
// statement follows the outbox's columns; its golden file is
// testdata/<dialect>/fan-out.golden.
package dialects
