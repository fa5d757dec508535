package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Store is a [dao.Store] of T over one SQL table, for PostgreSQL, MySQL,
// MariaDB, SQLite and SQL Server through GORM. Build it with [New]; a Store
// is safe for concurrent use.
type Store[T any] struct {
	db      *gorm.DB      // session the store was built on (a transaction after WithTx)
	pool    gorm.ConnPool // where statements run: *sql.DB, or *sql.Tx after WithTx
	model   *dao.Model[T]
	table   dialects.Table
	dialect dialects.Name
	r       dialects.Renderer
	fast    bool // claim on the fast path
	claimTx bool // wrap the fast path in a READ COMMITTED transaction
	direct  bool // scan rows with scanDirect instead of GORM's ScanRows
	inTx    bool // bound to a caller's transaction: Claim is refused
	// foundRows: MySQL and MariaDB report matched rather than changed rows
	// (CLIENT_FOUND_ROWS, DSN clientFoundRows=true). Always true elsewhere.
	foundRows bool
	// claimTimeout bounds how long a claim waits for the outcome of a
	// statement it has sent; lockWait is the server-side limit on one
	// statement's lock waits. See WithClaimTimeout and WithLockWaitLimit.
	claimTimeout time.Duration
	lockWait     time.Duration
	collation    dao.Collation // read once by New; see readCollation
	err          error
}

var _ dao.Store[struct{ ID int64 }] = (*Store[struct{ ID int64 }])(nil)

// Option configures [New].
type Option func(*options)

type options struct {
	table        string
	fastPath     []dialects.Name
	noFastPath   bool
	claimTimeout time.Duration
	lockWait     time.Duration
}

// DefaultClaimTimeout and DefaultLockWaitLimit are the bounds a store uses
// unless [WithClaimTimeout] or [WithLockWaitLimit] set others.
const (
	DefaultClaimTimeout  = 30 * time.Second
	DefaultLockWaitLimit = 5 * time.Second
)

// WithClaimTimeout sets how long a claim waits for the outcome of a
// statement it has already sent (default [DefaultClaimTimeout]). Once sent,
// a claim statement runs on a context detached from the caller's
// cancellation, so that the rows it commits are learned and returned
// rather than stranded; d bounds that wait. When d passes before the
// outcome is learned, the driver gives the connection up and the claim
// returns no rows and [dao.ErrUnavailable]: the claim was rolled back, or
// committed with its acknowledgement lost (its rows come back when their
// lease expires). Server-side limits derived from d (a statement limit of
// d/3) and from [WithLockWaitLimit] end a stuck claim before d passes
// where the claim path sets them (see Store.Claim). d <= 0 keeps the
// default.
func WithClaimTimeout(d time.Duration) Option {
	return func(o *options) { o.claimTimeout = d }
}

// WithLockWaitLimit sets the server-side limit on how long one claim
// statement waits for a row lock held by another transaction (default
// [DefaultLockWaitLimit]). A claim whose statement reaches it returns the
// rows already committed with an error wrapping [dao.ErrBusy]. d <= 0 keeps
// the default. The limit is rounded up to what the server accepts (whole
// seconds on MySQL and MariaDB).
func WithLockWaitLimit(d time.Duration) Option {
	return func(o *options) { o.lockWait = d }
}

// WithTable makes the store use table name instead of the table name GORM
// derives from T. A dotted name ("schema.table") is schema-qualified. The
// names of the claim statements' common table expressions ("claim_ids",
// "claimed", "delete_batch") are refused by [New].
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithFastPath adds dialects to the fast-path allow-list beyond
// dialects.DefaultFastPath() (PostgreSQL): dialects.MySQL and
// dialects.MariaDB (MySQL 8.0.1+, MariaDB 10.6+, which have SKIP LOCKED)
// can be opted in. [New] fails with [dao.ErrInvalidArgument] when a named
// dialect has no fast path (dialects.HasFastPath).
func WithFastPath(names ...dialects.Name) Option {
	return func(o *options) { o.fastPath = append(o.fastPath, names...) }
}

// WithoutFastPath makes every claim run the portable default
// (dao.PortableClaim), also on dialects on the allow-list. Benchmarks use
// it to measure what the fast path buys.
func WithoutFastPath() Option { return func(o *options) { o.noFastPath = true } }

// New returns a store of T over db. It parses T with db's naming strategy
// (so column names match what GORM migrates), detects the dialect with
// dialects.Detect (one SELECT VERSION() on MySQL and MariaDB), reads how
// the database compares strings for [Store.Capabilities] (one query on
// PostgreSQL, two on MySQL and MariaDB, none on SQLite and SQL Server; see
// readCollation) and, on PostgreSQL with the fast path, reads the server's
// default transaction isolation (one query; see the package
// documentation). The queries run with db's statement context.
//
// When db is itself inside a transaction (db.Begin(), db.Transaction), the
// store is bound to it as by [Store.WithTx]: CRUD runs in the transaction
// and Claim returns [dao.ErrInTransaction].
//
// Errors: [dao.ErrInvalidArgument] for a nil db, a model GORM cannot parse
// or without exactly one primary key, a reserved table name, an unsupported
// dialector or a fast-path opt-in for a dialect without one; a failed
// detection query is mapped like every database error.
func New[T any](db *gorm.DB, opts ...Option) (*Store[T], error) {
	if db == nil {
		return nil, fmt.Errorf("sqlstore: new: %w: nil *gorm.DB", dao.ErrInvalidArgument)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	model, err := dao.NewModel[T](db.NamingStrategy)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: new: %w", err)
	}
	table := o.table
	if table == "" {
		table = model.Table()
	}
	if dialects.ReservedTableName(table) {
		return nil, fmt.Errorf("sqlstore: new: %w: table name %q is reserved by the claim statements", dao.ErrInvalidArgument, table)
	}
	ctx := db.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	name, err := dialects.Detect(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: new: %w", mapError(err))
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: new: %w", err)
	}
	allow := dialects.DefaultFastPath()
	for _, n := range o.fastPath {
		if !dialects.HasFastPath(n) {
			return nil, fmt.Errorf("sqlstore: new: %w: no fast-path claim exists for %q", dao.ErrInvalidArgument, n)
		}
		allow = append(allow, n)
	}
	s := &Store[T]{
		db:      db.Session(&gorm.Session{NewDB: true}),
		pool:    connPool(db),
		model:   model,
		table:   dialects.Table{Name: table, PrimaryKey: model.PrimaryKey(), Nullable: nullableColumns(model.Schema())},
		dialect: name,
		r:       r,
		fast:    !o.noFastPath && dialects.FastPathAllowed(name, allow),
		// pgx returns every column as a Go type database/sql converts into
		// the model's fields; the other drivers return some as text (SQLite
		// times) that only GORM's scanner parses. Serializer fields always
		// need GORM.
		direct:       name == dialects.Postgres && !slices.ContainsFunc(model.Schema().Fields, func(f *schema.Field) bool { return f.Serializer != nil }),
		claimTimeout: cmp.Or(max(o.claimTimeout, 0), DefaultClaimTimeout),
		lockWait:     cmp.Or(max(o.lockWait, 0), DefaultLockWaitLimit),
	}
	s.inTx = inTransaction(s.pool)
	s.foundRows = reportsMatchedRows(db, name)
	if s.collation, err = readCollation(ctx, s.pool, name, table); err != nil {
		return nil, fmt.Errorf("sqlstore: new: read collation: %w", mapError(err))
	}
	if s.fast && name == dialects.Postgres && !s.inTx {
		var level string
		row := s.pool.QueryRowContext(ctx, "SELECT current_setting('transaction_isolation')")
		if err := row.Scan(&level); err != nil {
			return nil, fmt.Errorf("sqlstore: new: read transaction isolation: %w", mapError(err))
		}
		s.claimTx = !strings.EqualFold(level, "read committed")
	}
	return s, nil
}

// reportsMatchedRows reports whether an UPDATE's affected-row count on db
// is the number of rows it matched. MySQL and MariaDB count changed rows
// unless the client sets CLIENT_FOUND_ROWS (go-sql-driver DSN parameter
// clientFoundRows=true, which [Open] adds); the setting is read from the
// GORM MySQL dialector's parsed DSN, and taken as off when the dialector
// has none (a handle built over an existing connection pool).
func reportsMatchedRows(db *gorm.DB, name dialects.Name) bool {
	if name != dialects.MySQL && name != dialects.MariaDB {
		return true
	}
	var cfg *mysql.Config
	switch d := db.Dialector.(type) {
	case *mysql.Dialector:
		cfg = d.Config
	case mysql.Dialector:
		cfg = d.Config
	}
	return cfg != nil && cfg.DSNConfig != nil && cfg.DSNConfig.ClientFoundRows
}

// connPool returns the pool statements of db run on.
func connPool(db *gorm.DB) gorm.ConnPool {
	if db.Statement != nil && db.Statement.ConnPool != nil {
		return db.Statement.ConnPool
	}
	return db.ConnPool
}

// inTransaction reports whether pool is an open transaction (*sql.Tx, or
// GORM's prepared-statement transaction): those commit and roll back.
func inTransaction(pool gorm.ConnPool) bool {
	_, ok := pool.(gorm.TxCommitter)
	return ok
}

// nullableColumns returns the columns whose Go type can hold NULL (a
// pointer, or a struct with a Valid bool field such as sql.NullString) and
// that are not declared NOT NULL or primary key.
func nullableColumns(s *schema.Schema) map[string]bool {
	out := map[string]bool{}
	for _, f := range s.Fields {
		if f.DBName == "" || f.PrimaryKey || f.NotNull {
			continue
		}
		t := f.FieldType
		if t.Kind() == reflect.Pointer {
			out[f.DBName] = true
			continue
		}
		if t.Kind() == reflect.Struct {
			if v, ok := t.FieldByName("Valid"); ok && v.Type.Kind() == reflect.Bool {
				out[f.DBName] = true
			}
		}
	}
	return out
}

// WithTx returns a store that runs every call inside tx, a transaction the
// caller opened on the same database (db.Begin() or the argument of
// db.Transaction) and commits or rolls back. Create, Get, Find, Count,
// Update, Delete and Migrate take part in the transaction (MySQL and
// MariaDB commit implicitly before and after DDL, so a Migrate there ends
// the transaction's atomicity); Claim returns
// [dao.ErrInTransaction] without touching the database, because a claim
// must commit on its own: inside the caller's transaction its rows would
// stay invisible to other workers, and held locked, until that transaction
// ends. A nil tx yields a store whose every call fails with
// [dao.ErrInvalidArgument].
func (s *Store[T]) WithTx(tx *gorm.DB) *Store[T] {
	c := *s
	c.inTx = true
	if tx == nil {
		c.err = fmt.Errorf("sqlstore: %w: WithTx(nil)", dao.ErrInvalidArgument)
		return &c
	}
	c.db = tx.Session(&gorm.Session{NewDB: true})
	c.pool = connPool(tx)
	return &c
}

// DB returns the GORM handle the store runs on: a session of the *gorm.DB
// given to [New], or of the transaction given to [Store.WithTx].
func (s *Store[T]) DB() *gorm.DB { return s.db }

// Dialect returns the detected dialect.
func (s *Store[T]) Dialect() dialects.Name { return s.dialect }

// Model returns the parsed model of T.
func (s *Store[T]) Model() *dao.Model[T] { return s.model }

// Table returns the table name the store reads and writes.
func (s *Store[T]) Table() string { return s.table.Name }

// Capabilities reports the claim path, its round trips and the documented
// lost-race behaviour for the store's dialect, and the collation New read
// (see readCollation: on MariaDB and MySQL the table's collation, by
// default case- and accent-insensitive with PAD SPACE; on PostgreSQL the
// database's, binary under C; BINARY on SQLite); it does no I/O.
//
//	postgres (fast path)             1 round trip (3 when the server default isolation is not READ COMMITTED), lost race skipped
//	postgres (WithoutFastPath)       1 + N, lost race skipped
//	mysql, mariadb, sqlserver        1 + N, lost race skipped
//	mysql, mariadb (WithFastPath)    4, lost race skipped (SKIP LOCKED)
//	sqlite                           1 + N, lost race ErrBusy
func (s *Store[T]) Capabilities() dao.Capabilities {
	c := dao.Capabilities{
		Backend:         string(s.dialect),
		ClaimRoundTrips: dao.RoundTrips{Fixed: 1, PerRow: 1},
		LostRace:        dao.LostRaceSkip,
		Collation:       s.collation,
		ClaimTimeout:    s.claimTimeout,
	}
	switch {
	case s.dialect == dialects.SQLite:
		c.ClaimTimeout = 0 // in-process: see claimContext
	case s.dialect == dialects.MariaDB:
		// SET STATEMENT innodb_lock_wait_timeout, whole seconds (boundWrite).
		c.LockWaitLimit = max(time.Second, (s.lockWaitLimit()+time.Second-1)/time.Second*time.Second)
	case s.dialect == dialects.Postgres && (!s.fast || s.claimTx):
		c.LockWaitLimit = s.lockWaitLimit() // lock_timeout (boundWrite, claimInTx)
	}
	if s.fast {
		c.FastPath = true
		switch {
		case s.dialect != dialects.Postgres:
			c.ClaimRoundTrips = dao.RoundTrips{Fixed: 4} // BEGIN, locking read, UPDATE, COMMIT
		case s.claimTx:
			c.ClaimRoundTrips = dao.RoundTrips{Fixed: 3} // BEGIN, the claim, COMMIT
		default:
			c.ClaimRoundTrips = dao.RoundTrips{Fixed: 1}
		}
	}
	if s.dialect == dialects.SQLite {
		c.LostRace = dao.LostRaceBusy
	}
	return c
}

// Migrate creates the store's table for T, or adds missing columns and
// indexes, with GORM's AutoMigrate under the store's table name, so the
// model's indexes (gorm index and uniqueIndex tags, including partial
// indexes with a where: clause) are named after that table. Errors are
// mapped to dao sentinels.
func (s *Store[T]) Migrate(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	var zero T
	if err := s.db.WithContext(ctx).Table(s.table.Name).AutoMigrate(&zero); err != nil {
		return fmt.Errorf("sqlstore: migrate %s: %w", s.table.Name, mapError(err))
	}
	return nil
}

// sqliteInsertValues caps the bound values of one INSERT on SQLite.
const sqliteInsertValues = 1000

// Create inserts items with GORM in multi-row INSERTs and fills generated
// primary keys back into them. One INSERT carries as many rows as the
// dialect's limit on bound values allows (65535 values on PostgreSQL,
// MySQL and MariaDB, 2100 on SQL Server; on SQLite, whose limit is 32766,
// 1000, which binds faster; fewer when the GORM config sets a smaller
// CreateBatchSize). A single INSERT runs
// without GORM's default wrapping transaction, which would cost two more
// round trips for nothing: one statement is atomic on its own. When the
// items need several INSERTs, or T has associations, they run in one
// transaction, so either every item is inserted or none.
//
// On SQLite, which stores times as text and compares that text, the items'
// time fields are first set to the same instants in UTC, and GORM's
// automatic timestamps are taken in UTC, so that every stored time has the
// same offset and text order is time order.
//
// No items is a no-op; a nil item, or a value [dao.Model.CheckRow] refuses
// (text that is not UTF-8 or holds NUL, a NaN or infinite float, a time
// outside years 1 to 9999 UTC), is [dao.ErrInvalidArgument] and nothing is
// sent; a unique violation is [dao.ErrDuplicate], and then nothing is
// inserted.
func (s *Store[T]) Create(ctx context.Context, items ...*T) error {
	if s.err != nil {
		return s.err
	}
	if len(items) == 0 {
		return nil
	}
	for _, it := range items {
		if err := s.model.CheckRow(it); err != nil {
			return fmt.Errorf("sqlstore: create: %w", err)
		}
	}
	// Rows per INSERT: as many as the dialect's bound-value limit allows
	// (dialects.Renderer.MaxParams), or GORM's CreateBatchSize if smaller.
	values := s.r.MaxParams()
	if s.dialect == dialects.SQLite {
		// The pure-Go SQLite driver's cost of binding grows faster than the
		// number of values: 8,000 rows took 3.2 s in one INSERT and 0.27 s
		// in INSERTs of 100 rows. Smaller statements are faster there.
		values = min(values, sqliteInsertValues)
	}
	batch := max(1, values/max(1, len(s.model.Schema().DBNames)))
	if cb := s.db.CreateBatchSize; cb > 0 && cb < batch {
		batch = cb
	}
	tx := s.db.WithContext(ctx)
	if s.dialect == dialects.SQLite {
		if err := s.timesToUTC(items); err != nil {
			return fmt.Errorf("sqlstore: create: %w", err)
		}
		now := s.db.NowFunc
		tx = tx.Session(&gorm.Session{NowFunc: func() time.Time { return now().UTC() }})
	}
	insert := func(tx *gorm.DB) error {
		return tx.Session(&gorm.Session{SkipDefaultTransaction: true}).Table(s.table.Name).CreateInBatches(items, batch).Error
	}
	var err error
	if s.inTx || (len(items) <= batch && len(s.model.Schema().Relationships.Relations) == 0) {
		// One statement is atomic on its own; in a caller's transaction
		// that transaction decides.
		err = insert(tx)
	} else {
		err = tx.Transaction(insert)
	}
	if err != nil {
		return fmt.Errorf("sqlstore: create: %w", mapError(err))
	}
	return nil
}

// timesToUTC sets every time field of items to the same instant in UTC.
func (s *Store[T]) timesToUTC(items []*T) error {
	for _, f := range s.model.Schema().Fields {
		if f.DBName == "" || f.DataType != schema.Time {
			continue
		}
		for _, it := range items {
			v, _ := s.model.Value(it, f.DBName)
			t, ok := v.(time.Time)
			if !ok || t.Location() == time.UTC {
				continue
			}
			if err := s.model.Apply(it, dao.Set{f.DBName: t.UTC()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Get returns the row whose primary key is id: one SELECT. An id that does
// not fit the key column is [dao.ErrInvalidArgument]; no such row is
// [dao.ErrNotFound].
func (s *Store[T]) Get(ctx context.Context, id any) (T, error) {
	var zero T
	if s.err != nil {
		return zero, s.err
	}
	key, err := s.model.CheckID(id)
	if err != nil {
		return zero, fmt.Errorf("sqlstore: get: %w", err)
	}
	st, err := s.r.Select(s.table, dao.Query{Where: dao.Eq(s.table.PrimaryKey, key), Limit: 1})
	if err != nil {
		return zero, fmt.Errorf("sqlstore: get: %w", err)
	}
	rows, err := s.query(ctx, s.pool, st)
	if err != nil {
		return zero, fmt.Errorf("sqlstore: get %v: %w", id, err)
	}
	if len(rows) == 0 {
		return zero, fmt.Errorf("sqlstore: get %v: %w", id, dao.ErrNotFound)
	}
	return rows[0], nil
}

// Find returns the rows matching q in q.OrderBy order (primary key last),
// at most q.Limit of them when q.Limit > 0: one SELECT. NULLs of nullable
// ordering columns sort last ascending and first descending on every
// dialect, as PostgreSQL sorts them. Invalid input is
// [dao.ErrInvalidArgument].
func (s *Store[T]) Find(ctx context.Context, q dao.Query) ([]T, error) {
	if s.err != nil {
		return nil, s.err
	}
	q, err := s.model.CheckQuery(q)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: find: %w", err)
	}
	rows, err := s.find(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: find: %w", err)
	}
	return rows, nil
}

// find runs a checked query.
func (s *Store[T]) find(ctx context.Context, q dao.Query) ([]T, error) {
	st, err := s.r.Select(s.table, q)
	if err != nil {
		return nil, err
	}
	return s.query(ctx, s.pool, st)
}

// Count returns how many rows match where: one SELECT COUNT(*).
func (s *Store[T]) Count(ctx context.Context, where dao.Criteria) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	where, err := s.model.CheckCriteria(where)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: count: %w", err)
	}
	st, err := s.r.Count(s.table, where)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: count: %w", err)
	}
	var n int64
	if err := s.pool.QueryRowContext(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlstore: count: %w", mapError(err))
	}
	return n, nil
}

// Update applies set to every row matching where in one UPDATE and returns
// the number of rows it matched, also those that already held the values
// (a fenced update such as "set status = published where locked_by = me"
// relies on it). PostgreSQL, SQLite and SQL Server report matched rows.
// MySQL and MariaDB report them when the connection sets clientFoundRows
// ([Open] does); otherwise they report changed rows only, and Update then
// runs BEGIN, a locking SELECT COUNT(*), the UPDATE and COMMIT (four round
// trips instead of one) to return the matched count. An empty set is
// [dao.ErrInvalidArgument]; a unique violation is [dao.ErrDuplicate].
func (s *Store[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	where, err := s.model.CheckCriteria(where)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: update: %w", err)
	}
	if set, err = s.model.CheckSet(set); err != nil {
		return 0, fmt.Errorf("sqlstore: update: %w", err)
	}
	st, err := s.r.Update(s.table, where, set)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: update: %w", err)
	}
	var n int64
	if s.foundRows {
		n, err = s.exec(ctx, s.pool, st)
	} else {
		n, err = s.updateMatched(ctx, where, st)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: update: %w", err)
	}
	return n, nil
}

// updateMatched runs the UPDATE st on a MySQL or MariaDB connection that
// reports changed rows, and returns the number of rows it matched: in one
// transaction (the caller's, when the store is bound to one) it counts the
// matching rows with a locking read (dialects.Renderer.LockingCount), so
// none of them can change or, under REPEATABLE READ, be joined by new
// matching rows before the UPDATE runs.
func (s *Store[T]) updateMatched(ctx context.Context, where dao.Criteria, st dialects.Statement) (int64, error) {
	cst, err := s.r.LockingCount(s.table, where)
	if err != nil {
		return 0, err
	}
	var matched int64
	run := func(pool gorm.ConnPool) error {
		if err := pool.QueryRowContext(ctx, cst.SQL, cst.Args...).Scan(&matched); err != nil {
			return mapError(err)
		}
		if matched == 0 {
			return nil
		}
		_, err := s.exec(ctx, pool, st)
		return err
	}
	if s.inTx {
		return matched, run(s.pool)
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return run(connPool(tx)) })
	return matched, mapError(err)
}

// Delete removes at most limit rows matching where, smallest primary keys
// first, in one statement (see dialects.Renderer.Delete for each
// dialect's form), and returns how many it removed. limit <= 0 is
// [dao.ErrInvalidArgument].
func (s *Store[T]) Delete(ctx context.Context, where dao.Criteria, limit int) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("sqlstore: delete: %w: limit must be > 0, got %d", dao.ErrInvalidArgument, limit)
	}
	where, err := s.model.CheckCriteria(where)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete: %w", err)
	}
	st, err := s.r.Delete(s.table, where, limit)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete: %w", err)
	}
	n, err := s.exec(ctx, s.pool, st)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete: %w", err)
	}
	return n, nil
}

// query runs st on pool and scans every row into a T with GORM's scanner
// (gorm.DB.ScanRows), or with scanDirect, so column-to-field mapping,
// serializers and scanners behave as in GORM's own finders. Rows are
// returned only when the whole result was read and the statement
// completed: the last row scanned, rows.Err() nil (the driver saw the
// command complete and, in autocommit, the server ready for the next
// query) and rows.Close() nil. Otherwise it returns no rows and the
// error, mapped by mapCtxError with ctx: rows read before a failure may
// belong to a statement the server rolled back.
func (s *Store[T]) query(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) ([]T, error) {
	rows, err := pool.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return nil, mapCtxError(ctx, err)
	}
	defer rows.Close()
	var out []T
	if s.direct {
		out, err = s.scanDirect(ctx, rows)
	} else if rows.Next() {
		// ScanRows expects the cursor on the first row and scans the rest.
		err = s.db.WithContext(ctx).ScanRows(rows, &out)
	}
	if err == nil {
		err = rows.Err()
	}
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		return nil, mapCtxError(ctx, err)
	}
	return out, nil
}

// scanDirect scans every row of rows straight into the fields of T that
// the model schema names for the result columns, with database/sql's own
// conversions; columns that name no field (the claim statement's copies of
// the order columns) are read and dropped. It is what GORM's ScanRows does
// for these models at a fraction of its allocations: the client cost of a
// 100-row claim is dominated by row scanning.
func (s *Store[T]) scanDirect(ctx context.Context, rows *sql.Rows) ([]T, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	sch := s.model.Schema()
	fields := make([]*schema.Field, len(cols))
	for i, c := range cols {
		if f := sch.LookUpField(c); f != nil && f.DBName != "" {
			fields[i] = f
		}
	}
	var out []T
	var discard any
	dest := make([]any, len(cols))
	for rows.Next() {
		var zero T
		out = append(out, zero)
		rv := reflect.ValueOf(&out[len(out)-1]).Elem()
		for i, f := range fields {
			if f == nil {
				dest[i] = &discard
				continue
			}
			dest[i] = f.ReflectValueOf(ctx, rv).Addr().Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// exec runs st on pool and returns the affected-row count. Errors are
// mapped by mapCtxError with ctx.
func (s *Store[T]) exec(ctx context.Context, pool gorm.ConnPool, st dialects.Statement) (int64, error) {
	res, err := pool.ExecContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	return n, nil
}
