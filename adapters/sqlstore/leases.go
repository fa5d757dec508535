package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Leases is the SQL [driver.LeaseStore]: leader leases in one table
// (dialects.DefaultLeaseTable, claimstore_leaders, unless another is
// given), one row per election name, acquired, renewed and taken over in
// one statement whose expiry test uses the database's clock (see
// dialects.Renderer.LeaseAcquire for each dialect's statement). It is
// safe for concurrent use. Create it with [NewLeases] and the table with
// [Leases.Migrate].
type Leases struct {
	db      *sql.DB
	r       dialects.Renderer
	dialect dialects.Name
	table   string
}

// NewLeases returns the lease store over table of db (PostgreSQL, MySQL,
// MariaDB, SQLite or SQL Server; "" means claimstore_leaders; a dotted
// name is schema-qualified). Its statements run on db's connection pool
// and commit on their own. Errors wrap [dao.ErrInvalidArgument] for a nil
// db, a db bound to a transaction, an unknown dialect or a table name
// longer than 128 bytes; a failed detection query is mapped like every
// database error.
func NewLeases(db *gorm.DB, table string) (*Leases, error) {
	if db == nil {
		return nil, fmt.Errorf("claimstore: leases: %w: nil *gorm.DB", dao.ErrInvalidArgument)
	}
	table = cmp.Or(table, dialects.DefaultLeaseTable)
	if len(table) > 128 {
		return nil, fmt.Errorf("claimstore: leases: %w: table name of %d bytes", dao.ErrInvalidArgument, len(table))
	}
	sqlDB, name, err := ownPool(db, "leases", "leases commit on their own")
	if err != nil {
		return nil, err
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		return nil, fmt.Errorf("claimstore: leases: %w", err)
	}
	return &Leases{db: sqlDB, r: r, dialect: name, table: table}, nil
}

// Table returns the name of the lease table.
func (l *Leases) Table() string { return l.table }

// Migrate creates the lease table if it does not exist
// (dialects.Renderer.LeaseCreateTable). Several servers may migrate one
// table at once: each call succeeds. Errors are mapped database errors.
func (l *Leases) Migrate(ctx context.Context) error {
	st, err := l.r.LeaseCreateTable(l.table)
	if err != nil {
		return fmt.Errorf("claimstore: leases: migrate: %w", err)
	}
	if _, err := l.db.ExecContext(ctx, st.SQL, st.Args...); err != nil {
		// Another server may have created the table at the same moment:
		// on PostgreSQL the loser of two concurrent CREATE TABLE IF NOT
		// EXISTS gets a unique violation (SQLSTATE 23505, on pg_type)
		// once the winner commits. The statement run again sees the
		// table.
		if _, err2 := l.db.ExecContext(ctx, st.SQL, st.Args...); err2 != nil {
			return fmt.Errorf("claimstore: leases: migrate %s: %w", l.table, mapCtxError(ctx, err))
		}
	}
	return nil
}

// AcquireLease implements [driver.LeaseStore.AcquireLease] with one
// statement: INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING on
// PostgreSQL and SQLite, MERGE … WITH (HOLDLOCK) … OUTPUT on SQL Server.
// When that statement returns no row, another holder has the unexpired
// lease, and a read reports it. On MySQL and MariaDB the statement is
// INSERT … ON DUPLICATE KEY UPDATE, which returns no row, so it runs
// together with the read of the row in one transaction: the row lock the
// statement takes keeps the row as written until the read. Errors wrap
// [dao.ErrInvalidArgument] for bad arguments (nothing is sent), or the
// sentinel of the database error.
func (l *Leases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (driver.Lease, bool, error) {
	st, err := l.r.LeaseAcquire(l.table, name, holder, ttl)
	if err != nil {
		return driver.Lease{}, false, fmt.Errorf("claimstore: acquire lease: %w", err)
	}
	var lease driver.Lease
	if l.r.LeaseReadBack() {
		lease, err = l.acquireReadBack(ctx, st, name)
	} else {
		lease, err = l.scan(l.db.QueryRowContext(ctx, st.SQL, st.Args...), name)
		if errors.Is(err, sql.ErrNoRows) {
			lease, err = l.get(ctx, name)
		}
	}
	if err != nil {
		return driver.Lease{}, false, fmt.Errorf("claimstore: acquire lease %q for %q: %w", name, holder, mapCtxError(ctx, err))
	}
	return lease, lease.Holder == holder, nil
}

// acquireReadBack runs the acquisition and the read of the lease in one
// transaction.
func (l *Leases) acquireReadBack(ctx context.Context, st dialects.Statement, name string) (lease driver.Lease, err error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return driver.Lease{}, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
		return driver.Lease{}, err
	}
	get, err := l.r.LeaseGet(l.table, name)
	if err != nil {
		return driver.Lease{}, err
	}
	if lease, err = l.scan(tx.QueryRowContext(ctx, get.SQL, get.Args...), name); err != nil {
		return driver.Lease{}, err
	}
	return lease, tx.Commit()
}

// ReleaseLease implements [driver.LeaseStore.ReleaseLease] with one
// UPDATE that sets expires_at to the database's now when holder holds the
// unexpired lease in term. Errors as AcquireLease's.
func (l *Leases) ReleaseLease(ctx context.Context, name, holder string, term int64) (bool, error) {
	st, err := l.r.LeaseRelease(l.table, name, holder, term)
	if err != nil {
		return false, fmt.Errorf("claimstore: release lease: %w", err)
	}
	res, err := l.db.ExecContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return false, fmt.Errorf("claimstore: release lease %q of %q: %w", name, holder, mapCtxError(ctx, err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claimstore: release lease %q of %q: %w", name, holder, mapError(err))
	}
	return n == 1, nil
}

// GetLease implements [driver.LeaseStore.GetLease] with one SELECT.
// Errors wrap [dao.ErrNotFound] when name has no row,
// [dao.ErrInvalidArgument] for a bad name, or the database error's
// sentinel.
func (l *Leases) GetLease(ctx context.Context, name string) (driver.Lease, error) {
	if _, err := l.r.LeaseGet(l.table, name); err != nil {
		return driver.Lease{}, fmt.Errorf("claimstore: get lease: %w", err)
	}
	lease, err := l.get(ctx, name)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return driver.Lease{}, fmt.Errorf("claimstore: get lease %q: %w: %w", name, dao.ErrNotFound, err)
		}
		return driver.Lease{}, fmt.Errorf("claimstore: get lease %q: %w", name, mapCtxError(ctx, err))
	}
	return lease, nil
}

func (l *Leases) get(ctx context.Context, name string) (driver.Lease, error) {
	st, err := l.r.LeaseGet(l.table, name)
	if err != nil {
		return driver.Lease{}, err
	}
	return l.scan(l.db.QueryRowContext(ctx, st.SQL, st.Args...), name)
}

// ListLeases returns every lease of the table, ordered by name, with the
// database's clock in each Lease.Now. Errors are mapped database errors.
func (l *Leases) ListLeases(ctx context.Context) ([]driver.Lease, error) {
	st, err := l.r.LeaseList(l.table)
	if err != nil {
		return nil, fmt.Errorf("claimstore: list leases: %w", err)
	}
	return listRows(ctx, l.db, st, "list leases", func(rows *sql.Rows) (lease driver.Lease, err error) {
		var elected, expires, now int64
		err = rows.Scan(&lease.Name, &lease.Holder, &lease.Term, &elected, &expires, &now)
		lease.ElectedAt, lease.ExpiresAt, lease.Now = time.UnixMicro(elected).UTC(), time.UnixMicro(expires).UTC(), time.UnixMicro(now).UTC()
		return lease, err
	})
}

// scan reads the five lease columns: leader_id, term and three times in
// microseconds since the Unix epoch.
func (l *Leases) scan(row *sql.Row, name string) (driver.Lease, error) {
	var (
		lease                 = driver.Lease{Name: name}
		elected, expires, now int64
	)
	if err := row.Scan(&lease.Holder, &lease.Term, &elected, &expires, &now); err != nil {
		return driver.Lease{}, err
	}
	lease.ElectedAt, lease.ExpiresAt, lease.Now = time.UnixMicro(elected).UTC(), time.UnixMicro(expires).UTC(), time.UnixMicro(now).UTC()
	return lease, nil
}

var _ driver.LeaseStore = (*Leases)(nil)

// ownPool returns db's connection pool and its dialect, for a store that
// runs its own statements and commits them itself (what names it in
// errors). Errors wrap [dao.ErrInvalidArgument] for a db bound to a
// transaction (inTx says what to do instead) or without a pool of its
// own; a failed detection query is mapped like every database error.
func ownPool(db *gorm.DB, what, inTx string) (*sql.DB, dialects.Name, error) {
	if inTransaction(connPool(db)) {
		return nil, "", fmt.Errorf("claimstore: %s: %w: db is bound to a transaction; %s", what, dao.ErrInvalidArgument, inTx)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, "", fmt.Errorf("claimstore: %s: %w: %w", what, dao.ErrInvalidArgument, err)
	}
	ctx := cmp.Or(db.Statement.Context, context.Background())
	name, err := dialects.Detect(ctx, db)
	if err != nil {
		return nil, "", fmt.Errorf("claimstore: %s: %w", what, mapError(err))
	}
	return sqlDB, name, nil
}
