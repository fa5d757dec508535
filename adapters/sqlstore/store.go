package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dao/driver"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// sqlDriver is the [driver.Driver] of T over one SQL table, for
// PostgreSQL, MySQL, MariaDB, SQLite and SQL Server through GORM. It is
// safe for concurrent use.
type sqlDriver[T any] struct {
	db      *gorm.DB      // session the store was built on (a transaction after WithTx)
	pool    gorm.ConnPool // where statements run: *sql.DB, or *sql.Tx after WithTx
	model   *driver.Model[T]
	table   dialects.Table
	dialect dialects.Name
	r       dialects.Renderer
	claimTx bool // wrap the PostgreSQL fast path in a READ COMMITTED transaction
	direct  bool // scan rows with scanDirect (scanSQLite on SQLite) instead of GORM's ScanRows
	// native runs the PostgreSQL fast-path claim with the backend's driver
	// on the connection database/sql holds (Backend.Native; nil: none),
	// scanning through plan; see queryNative.
	native func(dc any) NativeConn
	plan   scanPlan
	// interrupter readies a claim's connection for the caller's context
	// ending behind a lock (Backend.Interrupter; nil: none); see
	// execInterruptible.
	interrupter func(ctx context.Context, db *gorm.DB, conn *sql.Conn) (Interrupt, error)
	// listen subscribes a connection to notifications (Backend.Listen;
	// nil: none); see Listen.
	listen func(ctx context.Context, conn *sql.Conn, channel string, fn func(payload string)) error
	inTx   bool // bound to a caller's transaction: Claim is refused
	// foundRows: MySQL and MariaDB report matched rather than changed rows
	// (CLIENT_FOUND_ROWS, DSN clientFoundRows=true). Always true elsewhere.
	foundRows bool
	// claimTimeout bounds how long a claim waits for the outcome of a
	// statement it has sent; lockWait is the server-side limit on one
	// statement's lock waits. See WithClaimTimeout and WithLockWaitLimit.
	claimTimeout time.Duration
	lockWait     time.Duration
	collation    dao.Collation // read once by New; see readCollation
	// ranked is the row type of the SQLite claim's scan with ScanRows
	// (rankedType), for a model that scanSQLite does not scan; nil on the
	// other dialects.
	ranked reflect.Type
	// plans caches scanSQLite's scan plan; nil on the other dialects.
	plans *sqlitePlans
	// stmts keeps the claim's and UpdateKeys' statements prepared on
	// SQLite (see stmtCache); nil on the other dialects and for a store
	// built on a transaction. Shared by the copies WithTx makes.
	stmts *stmtCache
	// primaryIndex caches, on MySQL and MariaDB, whether the table's
	// primary key is the model's alone (see readPrimaryIndex): 0 not
	// known yet, 1 yes, 2 no. Shared by the copies WithTx makes.
	primaryIndex *atomic.Int32
	// arrays is the PostgreSQL array INSERT plan of Insert (nil: GORM's
	// INSERT); see newArrayInsert.
	arrays *arrayInsert
	// libraryFast: T is a library's own table (driver.LibraryTable) on a
	// dialect of dialects.LibraryTableFastPath whose server runs SKIP
	// LOCKED, so the fast path is the default (see fastByDefault).
	libraryFast bool
}

var (
	_ driver.Driver[struct{ ID int64 }]   = (*sqlDriver[struct{ ID int64 }])(nil)
	_ driver.Claimer[struct{ ID int64 }]  = (*sqlDriver[struct{ ID int64 }])(nil)
	_ driver.TxBinder[struct{ ID int64 }] = (*sqlDriver[struct{ ID int64 }])(nil)
	_ driver.Migrator                     = (*sqlDriver[struct{ ID int64 }])(nil)
	_ driver.As                           = (*sqlDriver[struct{ ID int64 }])(nil)
	_ driver.Clock                        = (*sqlDriver[struct{ ID int64 }])(nil)
)

// New returns the store of T over db: the portable [dao.Table] over this
// package's SQL driver. It parses T with db's naming strategy (so column
// names match what GORM migrates), detects the dialect with
// dialects.Detect (one SELECT VERSION() on PostgreSQL, CockroachDB,
// YugabyteDB, MySQL and MariaDB), reads how the database compares strings
// for Capabilities (one query on the PostgreSQL family, two on MySQL and
// MariaDB, none on SQLite and SQL Server; see readCollation), checks the
// handle's time and lock settings (one query on MySQL, MariaDB and
// SQLite; see below), on CockroachDB and YugabyteDB checks that READ
// COMMITTED is enabled (three round trips; see checkIsolation) and, on
// the PostgreSQL family with the fast path, reads the server's default
// transaction isolation (one query; see the package documentation). The
// queries run with db's statement context.
//
// New refuses a handle whose settings would break the store later,
// with an error naming the DSN parameter to add or the server setting to
// enable:
//
//   - CockroachDB without the cluster setting
//     sql.txn.read_committed_isolation.enabled, and YugabyteDB without the
//     YB-TServer flag yb_enable_read_committed_isolation: a READ COMMITTED
//     transaction would run at a stronger level, where the claim's lost
//     race is a serialization failure instead of a skipped row
//     (dialects.RequiredIsolation says what each needs and why);
//   - MySQL and MariaDB without parseTime=true (DATETIME columns would
//     come back as text that Get and Find cannot scan into time.Time);
//   - MySQL and MariaDB with a loc that ever sets its clocks back, such as
//     a zone with daylight saving time (loc=Local on a machine in one):
//     a DATETIME column keeps the wall-clock time in loc, and the two
//     instants of a repeated hour read back as one. UTC, the driver's
//     default, and zones with one fixed offset are accepted; every
//     process sharing the database must use the same loc;
//   - SQLite whose connections have no busy timeout (PRAGMA busy_timeout
//     is 0) while its pool can hold more than one connection: concurrent
//     claimers would fail with dao.ErrBusy at once instead of waiting for
//     the write lock. The driver sets no timeout when the DSN sets other
//     PRAGMAs and not busy_timeout; [SQLiteDSN] sets one, and [Open] adds
//     one to a path or a "file:" URI that sets none (see [SQLiteDefaults]).
//
// The dialect's backend package must be linked into the program
// (adapters/postgres, adapters/mysql, adapters/sqlite or
// adapters/sqlserver, whose New calls this function): it brings the
// database driver and the mapping of its errors.
//
// Automatic timestamps and soft deletions that the store writes with the
// application's clock (see dao.WithClock) take it from db.NowFunc, as GORM
// does.
//
// When db is itself inside a transaction (db.Begin(), db.Transaction), the
// store is bound to it as by [dao.Table.WithTx]: CRUD runs in the
// transaction and Claim returns [dao.ErrInTransaction].
//
// Errors: [dao.ErrInvalidArgument] for a nil db, a model GORM cannot parse
// or without exactly one primary key, a reserved table name, a dialect
// whose backend package is not linked, a strategy the dialect cannot
// run, or a handle refused by the checks above; a failed detection query
// is mapped like every database error.
func New[T any](db *gorm.DB, opts ...Option) (*dao.Table[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d, err := newDriver[T](db, o)
	if err != nil {
		return nil, fmt.Errorf("claimstore: new: %w", err)
	}
	return dao.New[T](d, dao.WithStrategy(o.strategy), dao.WithClock(db.NowFunc), dao.WithClaimSpread(!o.noSpread))
}

// newDriver builds the driver of New.
func newDriver[T any](db *gorm.DB, o options) (*sqlDriver[T], error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *gorm.DB", dao.ErrInvalidArgument)
	}
	model, err := driver.NewModel[T](db.NamingStrategy)
	if err != nil {
		return nil, err
	}
	table := cmp.Or(o.table, model.Table())
	if dialects.ReservedTableName(table) {
		return nil, fmt.Errorf("%w: table name %q is reserved by the claim statements", dao.ErrInvalidArgument, table)
	}
	ctx := db.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	name, version, err := dialects.DetectVersion(ctx, db)
	if err != nil {
		return nil, mapError(err)
	}
	b, ok := backendOf(name)
	if !ok {
		return nil, fmt.Errorf("%w: no backend package is linked for %s: import %s", dao.ErrInvalidArgument, name, backendPackage(name))
	}
	r, err := dialects.NewRenderer(name)
	if err != nil {
		return nil, err
	}
	s := &sqlDriver[T]{
		db:      db.Session(&gorm.Session{NewDB: true}),
		pool:    connPool(db),
		model:   model,
		table:   dialects.Table{Name: table, PrimaryKey: model.PrimaryKey(), Nullable: nullableColumns(model.Schema())},
		dialect: name,
		r:       r,
		// pgx returns every column as a Go type database/sql converts into
		// the model's fields; SQLite's dynamic values are converted by
		// scanSQLite. The MySQL and SQL Server drivers return some values
		// as text that only GORM's scanner converts. Serializer fields
		// always need GORM.
		direct:       (dialects.Family(name) == dialects.Postgres || name == dialects.SQLite) && !slices.ContainsFunc(model.Schema().Fields, func(f *schema.Field) bool { return f.Serializer != nil }),
		claimTimeout: cmp.Or(max(o.claimTimeout, 0), DefaultClaimTimeout),
		lockWait:     cmp.Or(max(o.lockWait, 0), DefaultLockWaitLimit),
		foundRows:    b.MatchedRows == nil || b.MatchedRows(db),
		interrupter:  b.Interrupter,
		listen:       b.Listen,
		// A library's own table (the job table) claims on the fast path
		// by default also on MySQL 8.0.1+ and MariaDB 10.6+; a server
		// without SKIP LOCKED keeps the portable default.
		libraryFast: driver.IsLibraryTable[T]() && dialects.FastPathAllowed(name, dialects.LibraryTableFastPath()) && dialects.SkipLocked(name, version),
	}
	if dialects.Family(name) == dialects.MySQL {
		s.primaryIndex = new(atomic.Int32)
	}
	if name == dialects.SQLite {
		s.ranked = rankedType[T]()
		s.plans = &sqlitePlans{}
		if sdb, ok := s.pool.(*sql.DB); ok {
			s.stmts = newStmtCache(sdb, stmtCacheSize)
		}
	}
	if s.direct && b.Native != nil {
		s.native = b.Native
		s.plan = newScanPlan[T](model.Schema())
	}
	s.inTx = inTransaction(s.pool)
	if err := checkHandle(ctx, db, s.pool, name, s.inTx); err != nil {
		return nil, err
	}
	s.arrays = newArrayInsert(ctx, s, b.Native)
	if s.collation, err = readCollation(ctx, s.pool, name, table); err != nil {
		return nil, fmt.Errorf("read collation: %w", mapError(err))
	}
	if err := checkIsolation(ctx, s.pool, name); err != nil {
		return nil, err
	}
	fast := o.strategy == dao.StrategyFastPath || (o.strategy == dao.StrategyDefault && s.fastByDefault())
	if fast && dialects.Family(name) == dialects.Postgres && !s.inTx {
		var level string
		row := s.pool.QueryRowContext(ctx, "SELECT current_setting('transaction_isolation')")
		if err := row.Scan(&level); err != nil {
			return nil, fmt.Errorf("read transaction isolation: %w", mapError(err))
		}
		s.claimTx = !strings.EqualFold(level, "read committed")
	}
	return s, nil
}

// atomically runs run on the caller's transaction when the store is bound
// to one, else in a transaction of its own, committed when run returns nil
// and rolled back otherwise; it returns run's error, or the commit's.
//
// database/sql rolls a transaction back as soon as its context ends; the
// next statement or the COMMIT then fails with sql.ErrTxDone
// ("transaction has already been committed or rolled back"). When ctx
// has ended, the error of a transaction of the store's own wraps ctx's
// error too and says the transaction was rolled back: nothing it wrote
// stays.
func (s *sqlDriver[T]) atomically(ctx context.Context, run func(pool gorm.ConnPool) error) error {
	if s.inTx {
		return run(s.pool)
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return run(connPool(tx)) })
	if cerr := ctxErr(ctx); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: the transaction was rolled back when the context ended: %w", cerr, mapError(err))
	}
	return err
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
		if driver.Nullable(f) {
			out[f.DBName] = true
		}
	}
	return out
}

// BindTx returns a driver that runs every call inside tx, a *gorm.DB
// inside a transaction the caller opened on the same database (db.Begin()
// or the argument of db.Transaction). MySQL and MariaDB commit implicitly
// before and after DDL, so a Migrate there ends the transaction's
// atomicity. A nil tx, one of another type, or a *gorm.DB that is not
// inside a transaction (whose writes would commit on their own) is
// [dao.ErrInvalidArgument].
func (s *sqlDriver[T]) BindTx(tx any) (driver.Driver[T], error) {
	g, ok := tx.(*gorm.DB)
	if !ok || g == nil {
		return nil, fmt.Errorf("%w: the SQL backends bind a *gorm.DB inside a transaction, got %T", dao.ErrInvalidArgument, tx)
	}
	if !inTransaction(connPool(g)) {
		return nil, fmt.Errorf("%w: the *gorm.DB is not inside a transaction (open one with db.Begin or db.Transaction)", dao.ErrInvalidArgument)
	}
	c := *s
	c.inTx = true
	c.db = g.Session(&gorm.Session{NewDB: true})
	c.pool = connPool(g)
	return &c, nil
}

// As sets target to the GORM handle the store runs on, a session of the
// *gorm.DB given to [New] or of the transaction bound by WithTx, when
// target is a **gorm.DB; to the detected dialect when target is a
// *dialects.Name; to the table (its name and primary key) when target
// is a *dialects.Table; and to [MapError] when target is a
// *func(error) error, so that code given only the store maps the errors
// of its own statements on the handle as the store maps its own.
func (s *sqlDriver[T]) As(target any) bool {
	switch t := target.(type) {
	case **gorm.DB:
		*t = s.db
	case *func(error) error:
		*t = MapError
	case *dialects.Name:
		*t = s.dialect
	case *dialects.Table:
		*t = s.table
	default:
		return false
	}
	return true
}

// CanListen reports whether Listen can subscribe: the backend has
// notifications (PostgreSQL with pgx).
func (s *sqlDriver[T]) CanListen() bool { return s.listen != nil }

// Listen implements [driver.Listener] with the backend's Listen (PostgreSQL:
// LISTEN on a connection of its own, taken from the pool and closed when
// Listen returns, so it never goes back subscribed). A backend without
// notifications returns an error wrapping errors.ErrUnsupported.
func (s *sqlDriver[T]) Listen(ctx context.Context, channel string, fn func(payload string)) error {
	if s.listen == nil {
		return fmt.Errorf("%s has no notifications: %w", s.dialect, errors.ErrUnsupported)
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("%w: %w", dao.ErrInvalidArgument, err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return mapCtxError(ctx, err)
	}
	defer conn.Close()
	return mapCtxError(ctx, s.listen(ctx, conn, channel, fn))
}

// Model returns the parsed model of T.
func (s *sqlDriver[T]) Model() *driver.Model[T] { return s.model }

// Info states the dialect, the portable claim's lost-race behaviour
// (skipped; ErrBusy on SQLite, whose writers serialize), the collation New
// read (see readCollation: on MariaDB and MySQL the table's collation, by
// default case- and accent-insensitive with PAD SPACE; on PostgreSQL the
// database's, binary under C; BINARY on SQLite) and the claim's bounds:
// the claim timeout (none on SQLite, in-process: see claimContext) and the
// server-side lock-wait limit of the guarded update where the dialect sets
// one per statement (PostgreSQL lock_timeout, MariaDB
// innodb_lock_wait_timeout in whole seconds; see boundWrite). Update
// writes the database's clock for driver.CurrentTime Set values on
// PostgreSQL and SQL Server (dialects.Renderer.CurrentTime).
func (s *sqlDriver[T]) Info() driver.Info {
	info := driver.Info{
		Backend:       string(s.dialect),
		Table:         s.table.Name,
		LostRace:      dao.LostRaceSkip,
		Collation:     s.collation,
		ClaimTimeout:  s.claimTimeout,
		InTransaction: s.inTx,
		CurrentTime:   s.r.CurrentTime(),
	}
	switch dialects.Family(s.dialect) {
	case dialects.SQLite:
		info.ClaimTimeout = 0
		info.LostRace = dao.LostRaceBusy
	case dialects.MySQL:
		if s.dialect == dialects.MariaDB {
			info.LockWaitLimit = s.mariaDBLockWait()
		}
	case dialects.Postgres:
		info.LockWaitLimit = s.lockWaitLimit()
	}
	return info
}

// mariaDBLockWait is the lock-wait limit as MariaDB applies it: SET
// STATEMENT innodb_lock_wait_timeout takes whole seconds (boundWrite).
func (s *sqlDriver[T]) mariaDBLockWait() time.Duration {
	return max(time.Second, (s.lockWaitLimit()+time.Second-1)/time.Second*time.Second)
}

// fastByDefault reports whether the store claims on the fast path unless
// its strategy says otherwise: the dialect is on the default allow-list
// (dialects.DefaultFastPath), or T's table is a library's own
// (driver.LibraryTable) and the dialect is on the library tables'
// allow-list (dialects.LibraryTableFastPath) with a server that runs
// SKIP LOCKED (dialects.SkipLocked).
func (s *sqlDriver[T]) fastByDefault() bool {
	return dialects.FastPathAllowed(s.dialect, dialects.DefaultFastPath()) || s.libraryFast
}

// ClaimerInfo states the fast path of the dialect:
//
//	postgres         1 round trip (3 when the server default isolation is not READ COMMITTED), on by default
//	cockroachdb,     as postgres (the same statement; YugabyteDB's without
//	yugabytedb       MATERIALIZED), opt-in; New checks READ COMMITTED is enabled
//	mysql, mariadb   4 round trips (BEGIN, locking read, UPDATE, COMMIT), opt-in;
//	                 on by default for a library's own table (driver.LibraryTable,
//	                 the job table) on MySQL 8.0.1+ and MariaDB 10.6+
//	sqlite           1 statement (in-process), on by default
//	sqlserver        1 round trip, opt-in
//
// The fast paths of PostgreSQL, MySQL, MariaDB and SQL Server skip a row
// another claimer holds (SKIP LOCKED, READPAST): [dao.LostRaceSkip].
// SQLite's writers serialize: a claim that cannot get the write lock
// within the busy timeout fails with dao.ErrBusy, [dao.LostRaceBusy].
//
// The PostgreSQL and SQL Server statements return the rows as stored
// (RETURNING, OUTPUT), so the PostgreSQL statement writes the database's
// clock for driver.CurrentTime Set values; the MySQL and MariaDB path
// computes the returned rows in memory, so it takes the application's
// clock.
func (s *sqlDriver[T]) ClaimerInfo() driver.ClaimerInfo {
	ci := driver.ClaimerInfo{
		Available:   dialects.HasFastPath(s.dialect),
		Default:     s.fastByDefault(),
		LostRace:    dao.LostRaceSkip,
		CurrentTime: dialects.Family(s.dialect) == dialects.Postgres,
	}
	if s.dialect == dialects.SQLite {
		ci.LostRace = dao.LostRaceBusy
	}
	switch {
	case s.dialect == dialects.MySQL || s.dialect == dialects.MariaDB:
		ci.RoundTrips = dao.RoundTrips{Fixed: 4}
		if s.dialect == dialects.MariaDB {
			ci.LockWaitLimit = s.mariaDBLockWait()
		}
	case s.claimTx:
		ci.RoundTrips = dao.RoundTrips{Fixed: 3}
		ci.LockWaitLimit = s.lockWaitLimit() // SET LOCAL lock_timeout (claimOwnTx)
	default:
		ci.RoundTrips = dao.RoundTrips{Fixed: 1}
	}
	return ci
}

// Migrate creates the store's table for T, or adds missing columns and
// indexes, with GORM's AutoMigrate under the store's table name, so the
// model's indexes (gorm index and uniqueIndex tags, including partial
// indexes with a where: clause) are named after that table. Errors are
// mapped to dao sentinels.
func (s *sqlDriver[T]) Migrate(ctx context.Context) error {
	var zero T
	if err := s.db.WithContext(ctx).Table(s.table.Name).AutoMigrate(&zero); err != nil {
		return fmt.Errorf("%s: %w", s.table.Name, mapError(err))
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
// On PostgreSQL two rows or more go in INSERTs that bind one array per
// column, 10,000 rows per statement, writing the values GORM's create
// would write (see arrayInsert and docs/models.md, "Many rows on
// PostgreSQL"), unless the model or the handle needs GORM's INSERT.
//
// A unique violation is [dao.ErrDuplicate], and then nothing is inserted.
func (s *sqlDriver[T]) Insert(ctx context.Context, items []*T) error {
	// Rows per INSERT: as many as the dialect's bound-value limit allows
	// (dialects.Renderer.MaxParams), or GORM's CreateBatchSize if smaller.
	if a := s.arrays; a != nil && len(items) >= arrayInsertMin && !a.refused.Load() {
		if done, err := s.insertArrays(ctx, items); done {
			return err
		}
	}
	tx, batch, err := s.insertSession(ctx, items)
	if err != nil {
		return err
	}
	insert := func(tx *gorm.DB) error {
		return tx.Session(&gorm.Session{SkipDefaultTransaction: true}).Table(s.table.Name).CreateInBatches(items, batch).Error
	}
	if s.inTx || (len(items) <= batch && len(s.model.Schema().Relationships.Relations) == 0) {
		// One statement is atomic on its own; in a caller's transaction
		// that transaction decides.
		err = insert(tx)
	} else {
		err = tx.Transaction(insert)
	}
	return mapError(err)
}

// insertSession returns the session an INSERT of items runs on and the
// rows per INSERT: as many as the dialect's bound-value limit allows
// (dialects.Renderer.MaxParams), or GORM's CreateBatchSize if smaller. On
// SQLite it first sets the items' times to UTC (see Insert).
func (s *sqlDriver[T]) insertSession(ctx context.Context, items []*T) (*gorm.DB, int, error) {
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
			return nil, 0, err
		}
		now := s.db.NowFunc
		tx = tx.Session(&gorm.Session{NowFunc: func() time.Time { return now().UTC() }})
	}
	return tx, batch, nil
}

// InsertIfAbsent inserts each of items unless a unique key already holds
// it (driver.AbsentInserter), in INSERTs of as many rows as Insert puts in
// one: ON CONFLICT DO NOTHING on PostgreSQL and SQLite, INSERT IGNORE on
// MySQL and MariaDB, each statement on its own (atomic, autocommitted or in
// the caller's transaction). It returns the rows inserted: the sum of the
// statements' affected-row counts. On SQL Server, whose GORM dialector
// writes a MERGE matching on the primary key alone, it inserts row by row
// and skips the rows refused as duplicates.
func (s *sqlDriver[T]) InsertIfAbsent(ctx context.Context, items []*T) (int64, error) {
	tx, batch, err := s.insertSession(ctx, items)
	if err != nil {
		return 0, err
	}
	tx = tx.Session(&gorm.Session{SkipDefaultTransaction: true}).Table(s.table.Name)
	switch s.dialect {
	case dialects.MySQL, dialects.MariaDB:
		tx = tx.Clauses(clause.Insert{Modifier: "IGNORE"})
	case dialects.SQLServer:
		var n int64
		for _, it := range items {
			err := mapError(tx.Create(it).Error)
			switch {
			case err == nil:
				n++
			case !errors.Is(err, dao.ErrDuplicate):
				return n, err
			}
		}
		return n, nil
	default:
		tx = tx.Clauses(clause.OnConflict{DoNothing: true})
	}
	var n int64
	for len(items) > 0 {
		k := min(batch, len(items))
		m, err := s.insertCount(ctx, tx, items[:k])
		n += m
		if err != nil {
			return n, err
		}
		items = items[k:]
	}
	return n, nil
}

// insertCount runs the INSERT GORM builds for items on tx and returns the
// rows it inserted. GORM's own count is not used: with RETURNING it counts
// the items, not the rows an ON CONFLICT DO NOTHING let through, so the
// statement is built (DryRun) and run here, counting the rows RETURNING
// yields, or the affected rows without it.
//
// On MariaDB the RETURNING GORM adds is dropped and the affected rows are
// counted: MariaDB sends RETURNING's rows as the statement inserts them,
// before its commit, and on a Galera node an autocommit INSERT IGNORE
// whose commit certification aborts is run again by the node
// (wsrep_retry_autocommit, default 1): the row already sent counts an
// insert that the run again skipped, while the affected-row count is the
// run that committed (MariaDB Galera Cluster docs, "Galera Cluster System
// Variables": wsrep_retry_autocommit).
func (s *sqlDriver[T]) insertCount(ctx context.Context, tx *gorm.DB, items []*T) (int64, error) {
	stmt := tx.Session(&gorm.Session{DryRun: true}).Create(items).Statement
	if err := stmt.Error; err != nil {
		return 0, mapError(err)
	}
	if _, ok := stmt.Clauses["RETURNING"]; ok && (s.dialect == dialects.MySQL || s.dialect == dialects.MariaDB) {
		delete(stmt.Clauses, "RETURNING")
		stmt.SQL.Reset()
		stmt.Vars = nil
		stmt.Build(tx.Callback().Create().Clauses...)
	}
	st := dialects.Statement{SQL: stmt.SQL.String(), Args: stmt.Vars}
	if _, ok := stmt.Clauses["RETURNING"]; !ok {
		return s.exec(ctx, s.pool, st)
	}
	rows, err := s.pool.QueryContext(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		n++
	}
	if err := finishRows(ctx, rows, nil); err != nil {
		return 0, err
	}
	return n, nil
}

// timesToUTC sets every time field of items to the same instant in UTC.
func (s *sqlDriver[T]) timesToUTC(items []*T) error {
	for _, f := range s.model.Schema().Fields {
		if f.DBName == "" || driver.KindOf(f) != driver.KindTime {
			continue
		}
		for _, it := range items {
			v, _ := s.model.Value(it, f.DBName)
			t, ok := v.(time.Time)
			if !ok || t.Location() == time.UTC {
				continue
			}
			if err := s.model.Apply(it, driver.Set{f.DBName: t.UTC()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Select returns the rows matching q in q.OrderBy order (primary key
// last), at most q.Limit of them when q.Limit > 0: one SELECT. NULLs of
// nullable ordering columns sort last ascending and first descending on
// every dialect, as PostgreSQL sorts them.
func (s *sqlDriver[T]) Select(ctx context.Context, q dao.Query) ([]T, error) {
	return s.find(ctx, q)
}

// find runs a checked query.
func (s *sqlDriver[T]) find(ctx context.Context, q dao.Query) ([]T, error) {
	st, err := s.r.Select(s.table, q)
	if err != nil {
		return nil, err
	}
	return s.query(ctx, s.pool, st)
}

// Count returns how many rows match where: one SELECT COUNT(*).
func (s *sqlDriver[T]) Count(ctx context.Context, where dao.Criteria) (int64, error) {
	st, err := s.r.Count(s.table, where)
	if err != nil {
		return 0, err
	}
	var n int64
	done, err := s.freshSchema(ctx, s.pool, func(pool gorm.ConnPool) error {
		return pool.QueryRowContext(ctx, st.SQL, st.Args...).Scan(&n)
	})
	done()
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	return n, nil
}

// Update applies set to every row matching where in one UPDATE and returns
// the number of rows it matched, also those that already held the values
// (a fenced update such as "set status = published where locked_by = me"
// relies on it). PostgreSQL, SQLite and SQL Server report matched rows.
// MySQL and MariaDB report them when the connection sets clientFoundRows
// (the mysql backend's Open does); otherwise they report changed rows only, and Update then
// runs BEGIN, a locking SELECT COUNT(*), the UPDATE and COMMIT (four round
// trips instead of one) to return the matched count. A unique violation is
// [dao.ErrDuplicate].
func (s *sqlDriver[T]) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	st, err := s.r.Update(s.table, where, set)
	if err != nil {
		return 0, err
	}
	if s.foundRows {
		return s.exec(ctx, s.pool, st)
	}
	return s.updateMatched(ctx, where, st)
}

// UpdateKeys applies set to every row matching where and returns the
// primary keys of the rows it matched (driver.KeyUpdater): one UPDATE …
// RETURNING pk on PostgreSQL and SQLite, UPDATE … OUTPUT INSERTED.pk on
// SQL Server; on MySQL and MariaDB a transaction (the caller's, when the
// store is bound to one) of SELECT pk … FOR UPDATE and UPDATE … WHERE pk
// IN (the keys read), whose rows stay locked, so still match, between the
// two. Keys are scanned as database/sql returns them, text as a string.
// The rows of a statement that fails are not returned: it changed nothing.
func (s *sqlDriver[T]) UpdateKeys(ctx context.Context, where dao.Criteria, set dao.Set) ([]any, error) {
	st, ok, err := s.r.UpdateKeys(s.table, where, set)
	if err != nil {
		return nil, err
	}
	if ok {
		return queryKeys(ctx, s.stmts.pool(s.pool), st)
	}
	lock, err := s.r.LockKeys(s.table, where)
	if err != nil {
		return nil, err
	}
	var keys []any
	run := func(pool gorm.ConnPool) error {
		if keys, err = queryKeys(ctx, pool, lock); err != nil || len(keys) == 0 {
			return err
		}
		up, err := s.r.UpdateByIDs(s.table, keys, set)
		if err != nil {
			return err
		}
		_, err = s.exec(ctx, pool, up)
		return err
	}
	err = s.atomically(ctx, run)
	if err != nil {
		return nil, mapCtxError(ctx, err)
	}
	return keys, nil
}

// updateMatched runs the UPDATE st on a MySQL or MariaDB connection that
// reports changed rows, and returns the number of rows it matched: in one
// transaction (the caller's, when the store is bound to one) it counts the
// matching rows with a locking read (dialects.Renderer.LockingCount), so
// none of them can change or, under REPEATABLE READ, be joined by new
// matching rows before the UPDATE runs.
func (s *sqlDriver[T]) updateMatched(ctx context.Context, where dao.Criteria, st dialects.Statement) (int64, error) {
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
	// When either statement fails, the UPDATE changed nothing: MySQL rolls
	// back a failed statement, a deadlock the whole transaction, and the
	// transaction below is rolled back on any error. The count is then 0.
	err = s.atomically(ctx, run)
	if err != nil {
		return 0, mapCtxError(ctx, err)
	}
	return matched, nil
}

// Delete removes at most limit rows matching where, smallest primary keys
// first, in one statement (see dialects.Renderer.Delete for each
// dialect's form), and returns how many it removed.
func (s *sqlDriver[T]) Delete(ctx context.Context, where dao.Criteria, limit int) (int64, error) {
	st, err := s.r.Delete(s.table, where, limit)
	if err != nil {
		return 0, err
	}
	return s.exec(ctx, s.pool, st)
}
