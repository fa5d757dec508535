package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	daodriver "github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Locker is the try-lock of the SQL backends over a *gorm.DB: each
// attempt pins one connection of the pool, tries the dialect's lock
// without waiting (see dialects.Renderer.TryLock for the statement and
// the key mapping), and runs the unit of work in a transaction on that
// connection:
//
//   - PostgreSQL: BEGIN; SELECT pg_try_advisory_xact_lock(class, hash);
//     the lock ends with the transaction.
//   - SQL Server: BEGIN; sp_getapplock with @LockOwner = 'Transaction'
//     and @LockTimeout = 0; the lock ends with the transaction.
//   - MySQL and MariaDB: SELECT GET_LOCK(name, 0) on the connection, then
//     the transaction on the same connection, then SELECT
//     RELEASE_LOCK(name) once the transaction has ended: also when fn
//     panics and when ctx ends (the release runs detached from ctx's
//     cancellation, bounded by [LockReleaseTimeout]). A named lock
//     belongs to the session, so a connection whose release fails is
//     closed rather than returned to the pool: ending the session
//     releases its locks (MySQL manual, "Locking Functions"). No
//     session-scoped lock is ever left on a pooled connection.
//   - SQLite: the lock is the database write lock. The attempt sets the
//     connection's busy timeout to 0, begins an immediate transaction
//     (BEGIN IMMEDIATE, which takes the write lock at once or fails with
//     SQLITE_BUSY at once instead of waiting), restores the busy timeout,
//     and writes the key's row in claimstore_locks (created on first
//     use) in that transaction. The lock excludes every other writer of
//     the database while fn runs, whatever its key, and an attempt made
//     while any other connection writes returns not acquired: SQLite has
//     one writer at a time (SQLite manual, "BEGIN TRANSACTION", "PRAGMA
//     busy_timeout").
//
// A crash of the holder rolls its transaction back and ends its session,
// which releases the lock once the server notices the dead connection
// (SQLite: when the process's file locks go).
//
// fn's tx is a *gorm.DB whose statements run inside the transaction:
// write with it, or bind a store with dao.Table.WithTx(tx); do not commit
// or roll it back. A Locker is safe for concurrent use.
type Locker struct {
	db    *gorm.DB
	sqlDB *sql.DB

	// mu guards dialect and r, which a Locker made by NewLocker over
	// GORM's PostgreSQL dialector reads from the server on its first
	// attempt (detect).
	mu      sync.Mutex
	detect  bool
	dialect dialects.Name
	r       dialects.Renderer
}

var _ daodriver.Locker = (*Locker)(nil)

// LockReleaseTimeout bounds the release of a MySQL or MariaDB named lock
// after the unit of work, which runs detached from the caller's
// cancellation; a release that does not finish in it closes the
// connection instead.
const LockReleaseTimeout = 5 * time.Second

// NewLocker returns the try-lock over db's pool, for coord.WithLock. The
// dialect is read from db's GORM dialector; it does no I/O. GORM's
// PostgreSQL dialector also serves CockroachDB and YugabyteDB, which have
// no advisory locks: such a Locker reads the server's version on its
// first TryLock (dialects.Detect, one SELECT VERSION()), and on those two
// every TryLock returns an error wrapping errors.ErrUnsupported. So does
// every TryLock on a node of a MariaDB Galera Cluster, read once per pool
// on the first attempt (dialects.DetectGalera): GET_LOCK holds on one
// node only there (MariaDB Galera Cluster docs, "Known Limitations"), so
// it would let a holder on each node run at once; coord.NewElector over
// a lease table gives one leader across the nodes instead. Errors:
// a nil db or an unknown dialector wraps [dao.ErrInvalidArgument]; a db
// inside a transaction wraps [dao.ErrInTransaction] (the lock needs a
// transaction of its own on a pinned connection).
func NewLocker(db *gorm.DB) (*Locker, error) {
	if db == nil || db.Dialector == nil {
		return nil, fmt.Errorf("claimstore: new locker: %w: nil *gorm.DB", dao.ErrInvalidArgument)
	}
	var name dialects.Name
	switch db.Dialector.Name() {
	case "postgres":
		// CockroachDB and YugabyteDB use the same dialector and have no
		// advisory locks: the first attempt reads the server's version.
		l, err := newLocker(db, dialects.Postgres)
		if err != nil {
			return nil, err
		}
		l.detect = true
		return l, nil
	case "mysql":
		name = dialects.MySQL // MariaDB's lock statements are the same
	case "sqlite", "sqlite3":
		name = dialects.SQLite
	case "sqlserver":
		name = dialects.SQLServer
	default:
		return nil, fmt.Errorf("claimstore: new locker: %w: unsupported GORM dialector %q", dao.ErrInvalidArgument, db.Dialector.Name())
	}
	return newLocker(db, name)
}

func newLocker(db *gorm.DB, name dialects.Name) (*Locker, error) {
	if inTransaction(connPool(db)) {
		return nil, fmt.Errorf("claimstore: new locker: %w: the lock takes a transaction of its own", dao.ErrInTransaction)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("claimstore: new locker: %w: %w", dao.ErrInvalidArgument, err)
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		return nil, fmt.Errorf("claimstore: new locker: %w", err)
	}
	return &Locker{db: db.Session(&gorm.Session{NewDB: true}), sqlDB: sqlDB, dialect: name, r: r}, nil
}

// TryLock runs fn under the try-lock named key, as the type's
// documentation describes: (false, nil) at once when another holder has
// it; (true, err) once fn has run, err wrapping fn's error or the
// commit's. Errors: a key dao.CheckLockKey refuses or a nil fn wraps
// [dao.ErrInvalidArgument]; a failed attempt is (false, err) with err
// mapped like every database error.
func (l *Locker) TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (ran bool, err error) {
	if err := daodriver.CheckLockKey(key); err != nil {
		return false, err
	}
	if fn == nil {
		return false, fmt.Errorf("%w: nil fn", dao.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	dialect, r, err := l.renderer(ctx)
	if err != nil {
		return false, err
	}
	if dialect == dialects.MySQL || dialect == dialects.MariaDB {
		galera, err := onGalera(ctx, l.db, l.sqlDB)
		if err != nil {
			return false, fmt.Errorf("attempt: %w", mapCtxError(ctx, err))
		}
		if galera {
			return false, fmt.Errorf("claimstore: try-lock %q: %w: GET_LOCK is local to one node of a MariaDB Galera Cluster, so it excludes no holder on another node; elect a leader over a lease table instead (coord.NewElector)", key, errors.ErrUnsupported)
		}
	}
	try, err := r.TryLock(key)
	if err != nil {
		return false, err
	}
	conn, err := l.sqlDB.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("attempt: %w", mapCtxError(ctx, err))
	}
	healthy := true
	defer func() {
		if !healthy {
			// Discard the connection: whatever it holds ends with it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()

	var opts *sql.TxOptions
	restore := "" // SQLite: the statement that restores the busy timeout
	switch {
	case r.SessionLock():
		acquired, err := scanLock(conn.QueryRowContext(ctx, try.SQL, try.Args...))
		if err != nil || !acquired {
			return false, lockErr(ctx, key, err)
		}
		defer func() {
			if !l.release(ctx, conn, key) {
				healthy = false
			}
		}()
	case dialect == dialects.SQLite:
		var prev int64
		if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&prev); err != nil {
			return false, lockErr(ctx, key, err)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
			healthy = false
			return false, lockErr(ctx, key, err)
		}
		restore = "PRAGMA busy_timeout = " + strconv.FormatInt(prev, 10)
		// The driver begins a serializable transaction with BEGIN
		// IMMEDIATE, whatever the DSN's _txlock.
		opts = &sql.TxOptions{Isolation: sql.LevelSerializable}
	}

	tx, err := conn.BeginTx(ctx, opts)
	if restore != "" {
		// The write lock is taken or refused: waits are the DSN's again.
		var rerr error
		if err == nil {
			_, rerr = tx.ExecContext(ctx, restore)
		} else {
			_, rerr = conn.ExecContext(context.WithoutCancel(ctx), restore)
		}
		if rerr != nil {
			healthy = false
			if err == nil {
				_ = tx.Rollback()
				return false, lockErr(ctx, key, rerr)
			}
		}
	}
	if err != nil {
		if dialect == dialects.SQLite && errors.Is(mapError(err), dao.ErrBusy) && ctx.Err() == nil {
			return false, nil // another connection holds the write lock
		}
		return false, lockErr(ctx, key, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	created := false
	switch dialect {
	case dialects.SQLite:
		if created, err = l.lockRow(ctx, tx, try); err != nil {
			return false, lockErr(ctx, key, err)
		}
	case dialects.Postgres, dialects.SQLServer:
		acquired, err := scanLock(tx.QueryRowContext(ctx, try.SQL, try.Args...))
		if err != nil || !acquired {
			return false, lockErr(ctx, key, err)
		}
	}

	g := l.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	g.Statement.ConnPool = tx
	if err := fn(ctx, g); err != nil {
		return true, fmt.Errorf("unit of work: %w", err)
	}
	done = true
	if err := tx.Commit(); err != nil {
		return true, fmt.Errorf("commit: %w", mapCtxError(ctx, err))
	}
	if created {
		lockTables.Store(l.sqlDB, struct{}{})
	}
	return true, nil
}

// galeraPools caches, per pool (*sql.DB), whether its server is a node
// of a MariaDB Galera Cluster (dialects.DetectGalera), read once.
var galeraPools sync.Map

// onGalera reports whether sqlDB's server is a Galera node, asking it
// (through db, a session over sqlDB) on the pool's first call; a failed
// read is returned and tried again on the next call.
func onGalera(ctx context.Context, db *gorm.DB, sqlDB *sql.DB) (bool, error) {
	if v, ok := galeraPools.Load(sqlDB); ok {
		return v.(bool), nil
	}
	on, err := dialects.DetectGalera(ctx, db)
	if err != nil {
		return false, err
	}
	galeraPools.Store(sqlDB, on)
	return on, nil
}

// renderer returns the Locker's dialect and renderer, reading the
// dialect from the server (dialects.Detect, one SELECT VERSION()) on the
// first call of a Locker that asks for it; a failed read is returned and
// tried again on the next call.
func (l *Locker) renderer(ctx context.Context) (dialects.Name, dialects.Renderer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detect {
		name, err := dialects.Detect(ctx, l.db)
		if err != nil {
			return "", dialects.Renderer{}, fmt.Errorf("attempt: %w", mapCtxError(ctx, err))
		}
		if name != l.dialect {
			r, err := dialects.NewRenderer(name)
			if err != nil {
				return "", dialects.Renderer{}, err
			}
			l.dialect, l.r = name, r
		}
		l.detect = false
	}
	return l.dialect, l.r, nil
}

// lockErr wraps the error of an attempt; nil stays nil (not acquired).
func lockErr(ctx context.Context, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("attempt: %w", mapCtxError(ctx, err))
}

// scanLock reads the one integer of a try-lock statement: 1 taken, 0
// held by another, anything else an error.
func scanLock(row *sql.Row) (bool, error) {
	var v sql.NullInt64
	if err := row.Scan(&v); err != nil {
		return false, err
	}
	switch {
	case v.Valid && v.Int64 == 1:
		return true, nil
	case v.Valid && v.Int64 == 0:
		return false, nil
	case v.Valid:
		return false, fmt.Errorf("lock request failed with code %d", v.Int64)
	}
	return false, errors.New("lock request returned NULL (an error on the server)")
}

// release ends a session-scoped lock on conn and reports whether the
// connection may go back to the pool.
func (l *Locker) release(ctx context.Context, conn *sql.Conn, key string) bool {
	st, err := l.r.ReleaseLock(key)
	if err != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LockReleaseTimeout)
	defer cancel()
	var v sql.NullInt64
	if err := conn.QueryRowContext(rctx, st.SQL, st.Args...).Scan(&v); err != nil {
		return false
	}
	return v.Valid && v.Int64 == 1
}

// lockTables remembers the databases whose SQLite lock table exists.
var lockTables sync.Map // *sql.DB -> struct{}

// lockRow writes the key's row in SQLite's lock table, creating the
// table until a transaction that created it has committed, and reports
// whether it ran the creation.
func (l *Locker) lockRow(ctx context.Context, tx *sql.Tx, try dialects.Statement) (created bool, err error) {
	if _, ok := lockTables.Load(l.sqlDB); !ok {
		st, err := l.r.LockTable()
		if err != nil {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return false, err
		}
		created = true
	}
	_, err = tx.ExecContext(ctx, try.SQL, try.Args...)
	return created, err
}

// TryLock is the store's try-lock: a [Locker] over the handle the store
// was built on (see Locker for each dialect). A store bound to a caller's
// transaction is refused with dao.ErrInTransaction.
func (s *sqlDriver[T]) TryLock(ctx context.Context, key string, fn func(ctx context.Context, tx any) error) (bool, error) {
	if s.inTx {
		return false, fmt.Errorf("%w: the lock takes a transaction of its own", dao.ErrInTransaction)
	}
	l, err := newLocker(s.db, s.dialect)
	if err != nil {
		return false, err
	}
	return l.TryLock(ctx, key, fn)
}
