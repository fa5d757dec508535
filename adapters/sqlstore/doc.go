// Package sqlstore is the shared SQL core of claimstore's backends: one
// driver (package dao/driver) over a GORM handle for PostgreSQL, MySQL,
// MariaDB, SQLite and SQL Server, which [New] wraps in the portable
// [dao.Table]. It imports GORM and no database driver: programs import the
// backend package of their database (adapters/postgres, adapters/mysql,
// adapters/sqlite, adapters/sqlserver), which links that driver, maps its
// errors and registers itself here ([Register]).
//
// # Statements
//
// Every read and write except Create runs SQL rendered by package dialects
// (golden-tested text with the dialect's native placeholders), executed
// directly on GORM's connection pool (QueryContext / ExecContext), so the
// SQL that runs is exactly the rendered text. Result rows are scanned into
// T by the model's GORM schema: on PostgreSQL, for a model without
// serializer fields, straight into the fields with database/sql's
// conversions (far fewer allocations, which matters for a 100-row claim);
// on SQLite, for such a model, with the same conversions applied to
// SQLite's dynamically typed values through a scan plan per result shape
// (NULL reads as the zero value, as with GORM); otherwise with
// gorm.DB.ScanRows. GORM hooks (AfterFind and the like) do not run for
// these reads.
//
// The PostgreSQL fast-path claim (the one statement in autocommit) goes one
// step further when the handle's connections are pgx's own database/sql
// driver (jackc/pgx/v5/stdlib, which gorm.io/driver/postgres opens): it
// takes the connection from database/sql, runs the statement with pgx on
// it ((*sql.Conn).Raw, then pgx.Conn.Query in the connection's query exec
// mode, by default the cached prepared statement, as database/sql's
// statements on it run) and scans each column with pgx straight into the
// field of T that the model schema names, through a column-to-field plan
// New builds once; database/sql's conversion of every value to a
// driver.Value and back is skipped. Same statement, same single round trip,
// same connection pool and error mapping. When the connection is not
// pgx's (a driver middleware that wraps it, such as a tracing or counting
// sqlmw driver), the model has serializer fields, or the claim runs in the
// READ COMMITTED transaction of a stricter server default, the claim runs
// through database/sql as above. Create goes through GORM, which writes a
// multi-row INSERT and fills generated primary keys back into the items;
// Migrate is GORM's AutoMigrate on the store's table.
//
// # Claim routing and round trips
//
// [New] detects the dialect (dialects.Detect); the claim strategy
// ([WithStrategy], dao.Strategy) says how to claim, by default the
// dialect's fast path when it is on the allow-list
// (dialects.DefaultFastPath: PostgreSQL and SQLite), else the portable
// default. A model whose table a library owns (dao.LibraryTable: the job
// table, jobs.Row) has an allow-list of its own
// (dialects.LibraryTableFastPath), which adds MySQL 8.0.1+ and MariaDB
// 10.6+; the table below is that of a user's model:
//
//	dialect      claim path                         round trips   lost race
//	postgres     one statement (FOR UPDATE SKIP     1             row skipped, no error
//	             LOCKED in a MATERIALIZED CTE,
//	             UPDATE ... RETURNING, ordered)
//	mysql        portable default                   1 + N         guarded update matches 0 rows: skipped
//	mariadb      portable default                   1 + N         as mysql
//	sqlserver    portable default                   1 + N         as mysql
//	cockroachdb  portable default                   1 + N         as mysql
//	yugabytedb   portable default                   1 + N         as mysql
//	sqlite       one statement (UPDATE ... WHERE    1             writers serialize; a claim that cannot get
//	             pk IN (ranked ids) RETURNING *,                  the lock within busy_timeout is ErrBusy,
//	             sorted by rank)                                  with no rows
//
// On SQLite the one statement is an UPDATE ... WHERE pk IN (the ranked ids
// of a materialized CTE) RETURNING *, each row with its rank in the
// claim's order, by which the store sorts the rows (dialects.Renderer.Claim);
// WithStrategy(dao.StrategyPortable) claims with the portable default
// instead (1 + N statements; the lost race is ErrBusy too). With the
// github.com/ncruces/go-sqlite3 driver the statement runs in a BEGIN
// IMMEDIATE transaction on a statement the store keeps prepared: the
// driver itself prepares, runs and finalizes a statement for each query
// with arguments, and parsing and planning the claim took 40% of its CPU
// time. The store keeps up to 128 statements (the claim's and
// UpdateKeys'), each prepared once on each connection that runs it
// (database/sql's sql.Stmt) and finalized when the connection closes or
// the least recently used is evicted. A store built on a transaction
// prepares none; one bound to a transaction with WithTx runs those its
// store prepared.
//
// SQL Server can be opted in with WithStrategy(dao.StrategyFastPath): one
// statement (dialects.Renderer.Claim), an UPDATE through a TOP (n) common
// table expression read WITH (ROWLOCK, READPAST, UPDLOCK), OUTPUT
// INSERTED.*, the rows sorted by OrderBy in Go; a locked row is skipped.
//
// CockroachDB and YugabyteDB (PostgreSQL wire protocol, detected from
// SELECT version()) can be opted in with WithStrategy(dao.StrategyFastPath):
// PostgreSQL's statement (YugabyteDB's without MATERIALIZED), one round
// trip when the session's default isolation is READ COMMITTED, three
// otherwise. [New] refuses either server when READ COMMITTED is not
// enabled on it (dialects.RequiredIsolation); they are verified by users
// with the compose services, not in this repository's CI.
//
// MySQL and MariaDB can be opted in with
// WithStrategy(dao.StrategyFastPath): a READ COMMITTED transaction with a
// SELECT ... FOR UPDATE SKIP LOCKED and one UPDATE ... WHERE pk IN (...),
// four round trips whatever the number of rows, and concurrent claimers
// skip each other's rows instead of racing for the same candidates. The
// job table (jobs.Row, a dao.LibraryTable) claims so by default on MySQL
// 8.0.1+ and MariaDB 10.6+ ([New] reads the server's version; an older
// server keeps the portable default), and WithStrategy(dao.StrategyPortable)
// still turns it off.
//
// # Locking on the MySQL and MariaDB fast path
//
// What InnoDB locks, and why the fast path is the default for the job
// table and not for a user's table:
//
//   - A locking read sets a record lock on every index record it scans,
//     whether or not the row satisfies the WHERE clause: InnoDB knows the
//     index range it scanned, not the condition (MySQL manual, "Locks Set
//     by Different SQL Statements in InnoDB"). On a secondary index it
//     also locks the row's clustered (primary key) record.
//   - Under READ COMMITTED, which the claim's transaction sets whatever
//     the session's default, InnoDB takes record locks only: no gap and no
//     next-key locks, except for foreign-key and duplicate-key checks; the
//     locks of scanned rows that do not match are released once the WHERE
//     clause has been evaluated (MySQL manual, "Transaction Isolation
//     Levels", READ COMMITTED; MariaDB Knowledge Base, "InnoDB Lock
//     Modes", on gap locks and the isolation levels that take them). So
//     the claim blocks no INSERT into the index range it read, and an
//     INSERT blocks no claim. Under REPEATABLE READ, the servers' default,
//     the same read would hold next-key locks on the range (each record
//     and the gap before it) until COMMIT, and every new job of the queue
//     would wait for the claim.
//   - SKIP LOCKED (MySQL manual, "Locking Reads" (section 15.7.2.4 in 8.0,
//     17.7.2.4 in 8.4), "Locking Read Concurrency with NOWAIT and SKIP
//     LOCKED", 8.0.1 and later; MariaDB Knowledge Base, "SELECT ... SKIP
//     LOCKED", 10.6 and later) leaves out of the result, without waiting,
//     the rows whose lock another transaction holds: those another claimer
//     is taking and those whose outcome is being written. It applies to
//     row locks only; a table lock (DDL) is still waited for, bounded by
//     the lock-wait limit ([WithLockWaitLimit] on MariaDB, the session's
//     innodb_lock_wait_timeout on MySQL).
//   - The scan still examines, locks and (under READ COMMITTED) releases
//     each committed row it passes over before it finds Limit eligible
//     ones. On the job table the read is a range scan of the fetch index
//     jobs.Migrate creates, (state, queue, priority, scheduled_at, id),
//     in the claim's order with no sort (EXPLAIN on MariaDB 10.11: type
//     range on the fetch index, key parts state and queue, no filesort; see
//     jobs' TestClaimReadsFetchIndexOnMariaDB): it examines the queue's
//     running jobs (stored available, with a lease) and then the jobs it
//     claims, 200 rows for a claim of 100 behind 100 running jobs. On a
//     user's table whose indexes do not serve the claim's criteria in its
//     order, the same read would scan, and lock in turn, far more rows,
//     and sort them; such a table keeps the portable default unless its
//     store opts in.
//   - Deadlocks: the job table's claim changes no column of a secondary
//     index (it writes the lease and attempt columns), so its UPDATE by
//     primary key only writes rows its read already holds, and with SKIP
//     LOCKED the read waits for no row lock. An outcome write that moves a
//     job out of the fetch index locks the row and then its index entries;
//     the claim skips both. A claim that is nonetheless chosen as a
//     deadlock victim (error 1213, its transaction rolled back, nothing
//     claimed; MySQL manual, "Deadlocks in InnoDB") is run again, up to
//     three attempts, and then returns no rows and no error, as a lost
//     race. On MariaDB Galera Cluster a certification conflict between
//     nodes comes back the same way (1213) and is run again the same
//     way. Each such victim, and each guarded update of the portable
//     default so ended, is reported to the dao.ClaimTrace of the claim's
//     context (Conflict), which dispatch and jobs count in their
//     Stats.ConflictRetries. A user's Set that changes an indexed column adds index entries
//     under the claim's locks, which can wait for the gap locks of a
//     REPEATABLE READ transaction.
//
// The PostgreSQL claim runs in autocommit: one statement, one round trip,
// in the server's default isolation, which is READ COMMITTED unless an
// administrator changed default_transaction_isolation. READ COMMITTED is
// required: there a row that a concurrent claimer changed is re-checked
// and skipped, whereas REPEATABLE READ and SERIALIZABLE raise SQLSTATE
// 40001. Opening a READ COMMITTED transaction for every claim would make
// it three round trips (BEGIN, statement, COMMIT), so [New] reads the
// server's setting once, and only when it is not READ COMMITTED does the
// claim run in an explicit READ COMMITTED transaction; Capabilities then
// reports three round trips.
//
// The portable default (dao.StrategyPortable) reads up to Limit candidates
// and writes each with a guarded UPDATE ... WHERE pk = ? AND <where>,
// keeping the rows whose update affected one row. Each statement runs on
// a context detached from the caller's cancellation, bounded by the claim
// timeout ([WithClaimTimeout]) and by a server-side lock-wait limit set for
// that statement alone ([WithLockWaitLimit]): a statement once sent always
// has its outcome learned, a cancelled claim sends nothing more and
// returns the rows it committed with the context's error. Its outcome at
// each edge is dao.Table.Claim's; what each backend adds (how a lost race
// shows, how a lock wait is interrupted) is in the driver's ClaimBatch
// (claim.go).
//
// # Cancellation, lost connections and lock waits
//
// A fast-path claim returns rows only once they are committed: the one
// PostgreSQL statement once its whole result was read and the server
// reported it complete (no rows read before a failure are returned: the
// server may have rolled the statement back, and returning them would hand
// out rows that others claim again); a transaction once COMMIT succeeded.
// Otherwise the call returns no rows and the error.
//
// Once a claim statement has been sent its outcome is learned, never
// abandoned: the statements run on a context detached from the caller's
// cancellation (context.WithoutCancel) and bounded by the claim timeout
// ([WithClaimTimeout], default 30 s). The caller's context is checked
// before anything is sent and, in a claim transaction, before each further
// statement: once it has ended no further claim statement is sent and the
// transaction is rolled back. Committed rows come back with an error
// wrapping ctx.Err(). Every error of a call whose context ended wraps that
// context's error, whatever words the driver used for it.
//
// Server-side limits make a stuck claim statement fail before the claim
// timeout, with [dao.ErrBusy] (a fast-path claim then claims nothing; a
// portable claim returns the rows it committed before). On MariaDB every
// claim statement runs under SET STATEMENT max_statement_time = a third of
// the claim timeout FOR ..., and those that lock rows (the portable
// default's guarded updates, the fast path's locking read and UPDATE) also
// under innodb_lock_wait_timeout = the lock-wait limit ([WithLockWaitLimit],
// default 5 s, rounded up to whole seconds); this bounds the wait a
// REPEATABLE READ transaction holding next-key locks on the claim's index
// imposes on the claim's UPDATE (SKIP LOCKED skips locked records, not gap
// locks). On PostgreSQL the portable default's guarded update sets
// lock_timeout to the lock-wait limit for itself (set_config in its own
// WHERE clause); in a READ COMMITTED claim transaction, SET LOCAL
// lock_timeout and statement_timeout go with BEGIN in one exchange. The
// one PostgreSQL statement in autocommit carries no
// server-side limit: it waits for no row lock (SKIP LOCKED), only for
// table locks of DDL or LOCK TABLE and for a unique-index conflict when
// Set writes a unique column; PostgreSQL takes the table locks when it
// binds the statement, before anything in it could set a limit, and a
// limit set beforehand needs a statement of its own in the same
// transaction (two more round trips) or a session setting that would stay
// on the caller's pooled connection. Such a wait is bounded by the claim
// timeout; a DSN may set lock_timeout for the whole session. On MySQL the
// fast path relies on the session's innodb_lock_wait_timeout (default
// 50 s; set it below the claim timeout, e.g. DSN parameter
// innodb_lock_wait_timeout=5).
//
// When the connection is lost, or the claim timeout passes, before the
// commit is confirmed, the call returns no rows and [dao.ErrUnavailable]:
// the server rolled the claim back, or committed it and lost the
// acknowledgement. Rows of a lost acknowledgement are claimed in the
// database but returned to nobody. Claim with a lease (a locked_until
// column set by the claim, and criteria that accept rows whose lease has
// expired) so that they are claimed again once the lease expires.
//
// # Affected rows on MySQL and MariaDB
//
// MySQL and MariaDB report the rows an UPDATE changed, not the rows it
// matched, unless the client sets CLIENT_FOUND_ROWS (go-sql-driver DSN
// parameter clientFoundRows=true). The mysql backend's Open and DSN add
// the parameter; [New] reads it from the GORM MySQL dialector's parsed
// DSN. Without it the store stays
// correct at a cost only where the two counts can differ: a guarded claim
// update whose Set would leave the row exactly as it was (no new owner,
// lease or status) is followed by one SELECT COUNT(*) for that row, so the
// row still counts as claimed when the guard matched; and Update
// counts the matched rows with a locking read in a transaction before it
// updates them (four round trips instead of one).
//
// # Transactions
//
// Claim commits its own work and must not run inside a caller's
// transaction: the claimed rows would stay locked and invisible to other
// workers until that transaction ends, and a rollback would undo a claim
// the caller may already have acted on. A store bound to a transaction,
// by dao.Table.WithTx or because the *gorm.DB given to [New] is inside one,
// returns [dao.ErrInTransaction] from Claim and changes nothing; its other
// methods run in the transaction.
//
// # Errors
//
// Driver errors are mapped to dao sentinels in one function (see the
// rules in errors.go): unique violations are dao.ErrDuplicate; deadlocks
// and serialization failures dao.ErrConflict (except in the portable
// claim, where a deadlocked guarded update is a lost race); lock-wait and
// statement timeouts (PostgreSQL lock_timeout and statement_timeout, InnoDB
// innodb_lock_wait_timeout, MariaDB max_statement_time) and SQLite's
// SQLITE_BUSY and SQLITE_LOCKED dao.ErrBusy; refused, reset or closed
// connections dao.ErrUnavailable. The native error stays reachable with
// errors.As. An error returned after the call's context ended also wraps
// that context's error.
//
// # Opening databases
//
// [Open] with a backend name opens the GORM dialector of that backend for
// a DSN and pings it; [SQLiteDSN] builds a SQLite DSN with WAL, a busy
// timeout, synchronous=NORMAL and BEGIN IMMEDIATE transactions, the settings
// concurrent claimers need. [New] refuses a handle, opened anywhere, that
// would break later, with an error wrapping dao.ErrInvalidArgument that
// names the DSN parameter to add: MySQL or MariaDB without parseTime=true
// or with a loc that sets its clocks back, and SQLite without a busy
// timeout on a pool of several connections.
package sqlstore
