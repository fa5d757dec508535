// Package coord holds the coordination primitives that programs running
// on several servers need on top of a claimstore database.
//
// [WithLock] runs one unit of work under a transaction-scoped,
// non-blocking try-lock ("only one server runs this cycle"): the caller
// that does not get the lock skips at once (ran == false) and never
// waits; the holder's work runs inside the lock's transaction, and the
// lock is released when that transaction commits or rolls back, or by
// the server when the holder's connection or process dies. A key is a
// string in a claimstore namespace, mapped to each backend's lock in a
// stable way:
//
//	PostgreSQL      pg_try_advisory_xact_lock(class, hash): class LockClassID, hash FNV-1a 32 of the key as int4
//	MySQL, MariaDB  GET_LOCK(name, 0) on a pinned connection, released before it returns to the pool
//	SQL Server      sp_getapplock @LockOwner = 'Transaction', @LockTimeout = 0
//	SQLite          the database write lock of an immediate transaction, tried with a busy timeout of 0
//	memory          a mutex per key, TryLock
//	Elasticsearch   a lease document guarded by seq_no and primary_term, renewed while fn runs
//
// See docs/coordination.md for the names each backend sees, what happens
// on a crash and the pooled-connection rule of MySQL.
//
// Other primitives of the package, such as leader election, are
// documented with their types.
package coord
