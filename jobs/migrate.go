package jobs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/argerr"
)

// SchemaVersion is the version of the job table's schema this package
// creates and reads. [Migrate] records each version it applies to a job
// table in the table's migration table ([MigrationTable]); a job table
// recorded at a higher version (by a newer release) is refused with
// [ErrSchemaTooNew].
const SchemaVersion = 7

// MigrationTable returns the name of the table in which [Migrate] records
// the schema versions applied to job table table: table + "_migrations".
func MigrationTable(table string) string { return table + "_migrations" }

// Fillfactor is the storage parameter fillfactor, in percent of each heap
// page, that [Migrate] gives a job table it creates on PostgreSQL: inserts
// fill pages to half, leaving room on each page for the row versions
// claims write, so that a claim — which writes the lease, the attempt
// count and the attempt time, none of them in an index or an index
// predicate — is a HOT update: a new row version on the same page and no
// new index entry (PostgreSQL manual, "Heap-Only Tuples (HOT)", and CREATE
// TABLE, "Storage Parameters").
const Fillfactor = 40

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,51}$`)

// CheckTable returns nil when name can be a job table's name: 1 to 52
// ASCII letters, digits and underscores, not starting with a digit (it
// also names the table's PostgreSQL notification channel, and with a
// suffix its migration table). Other names wrap dao.ErrInvalidArgument.
func CheckTable(name string) error {
	if !tableRE.MatchString(name) {
		return argerr.Errorf("table name %q: use 1-52 letters, digits and underscores", name)
	}
	return nil
}

// IndexNames returns the names of the indexes [Migrate] creates on the job
// table besides the unique index: the fetch index (available jobs in claim
// order), the schedule index (scheduled and retryable jobs by time) and
// the final index (final jobs by state and time, for retention). They
// follow GORM's naming strategy of db, which shortens long names with a
// hash.
func IndexNames(db *gorm.DB, table string) (fetch, schedule, final string) {
	return db.NamingStrategy.IndexName(table, "fetch"), db.NamingStrategy.IndexName(table, "schedule"), db.NamingStrategy.IndexName(table, "final")
}

// migration is a row of a job table's migration table: one applied
// schema version.
type migration struct {
	Version   int `gorm:"primaryKey;autoIncrement:false"`
	AppliedAt time.Time
}

// Migrate creates the job table of store and the queue table of queues
// (nil: none) with everything the job queue needs, or completes them;
// running it again changes nothing, so every server may run it at start.
// It records each schema version it applies ([SchemaVersion] now) in the
// job table's migration table ([MigrationTable]), and refuses a table
// recorded at a newer version ([ErrSchemaTooNew]). docs/jobs.md says how
// a later version's migration runs.
//
// On the SQL backends (a store that hands out its *gorm.DB through As, as
// every sqlstore store does) it creates:
//
//   - the job table, with a unique index on unique_key (partial, WHERE
//     unique_key IS NOT NULL, on PostgreSQL: PostgreSQL manual, "Partial
//     Indexes"), which the database enforces under concurrent inserts;
//   - on PostgreSQL: fillfactor [Fillfactor] on a table it creates; the
//     fetch index on (queue, priority, scheduled_at, id) WHERE state =
//     'available', the claim's filter and order, holding available and
//     running jobs only; the schedule index on (scheduled_at) WHERE state
//     IN ('scheduled', 'retryable'); the final index on (state,
//     finalized_at) WHERE finalized_at IS NOT NULL; and a statement-level
//     AFTER INSERT trigger that notifies the channel named like the table
//     (pg_notify, delivered at commit: PostgreSQL manual, "NOTIFY"), which
//     wakes the clients' queues;
//   - on SQLite: the composite indexes (state, queue, priority,
//     scheduled_at, id) and (state, finalized_at), and the schedule index
//     on (scheduled_at) WHERE state IN ('scheduled', 'retryable') (see
//     claimIndexesV2);
//   - elsewhere: the composite indexes (state, queue, priority,
//     scheduled_at, id), (state, scheduled_at) and (state, finalized_at);
//   - the queue table.
//
// A claim changes none of the fetch index's columns and not its predicate
// (a running job stays stored as available; see [Row]), so on PostgreSQL
// it is a HOT update; the outcome write moves the job out of the index.
//
// Another store with a Migrate method is migrated with it;
// the memory store needs nothing. Errors: dao.ErrInvalidArgument for a
// nil store or a bad table name; [ErrSchemaTooNew]; database errors,
// wrapped.
func Migrate(ctx context.Context, store dao.Store[Row], queues dao.Store[Queue]) error {
	return migrate(ctx, store, queues, SchemaVersion)
}

// migrateMu serializes migrations in this process (GORM's MySQL dialector
// keeps unsynchronized state per *gorm.DB).
var migrateMu sync.Mutex

// migrate is Migrate up to version.
func migrate(ctx context.Context, store dao.Store[Row], queues dao.Store[Queue], version int) error {
	if store == nil {
		return fmt.Errorf("jobs: migrate: %w", argerr.Errorf("nil store"))
	}
	db, ok := gormOf(store)
	if !ok {
		if err := migrateOther(ctx, store); err != nil {
			return err
		}
		if queues != nil {
			return migrateOther(ctx, queues)
		}
		return nil
	}
	table := tableOf(store)
	if err := CheckTable(table); err != nil {
		return fmt.Errorf("jobs: migrate: %w", err)
	}
	var dialect dialects.Name
	if a, ok := store.(dao.Aser); !ok || !a.As(&dialect) {
		return fmt.Errorf("jobs: migrate: %w", argerr.Errorf("store %T does not tell its dialect (through dao.Aser)", store))
	}
	migrateMu.Lock()
	defer migrateMu.Unlock()
	db = db.Session(&gorm.Session{NewDB: true}).WithContext(ctx)
	mt := MigrationTable(table)
	if err := autoMigrate(db, mt, &migration{}); err != nil {
		return fmt.Errorf("jobs: migrate: %w", err)
	}
	var applied []migration
	if err := db.Table(mt).Order("version").Find(&applied).Error; err != nil {
		return fmt.Errorf("jobs: migrate: read %s: %w", mt, err)
	}
	done := map[int]bool{}
	for _, m := range applied {
		if m.Version > version {
			return fmt.Errorf("jobs: migrate %s: version %d applied, this package knows %d: %w", table, m.Version, version, ErrSchemaTooNew)
		}
		done[m.Version] = true
	}
	for v := 1; v <= version; v++ {
		// Every step runs, applied or not: each creates only what is
		// missing, so a step that stopped half-way is completed.
		if err := steps[v-1](db, table, dialect); err != nil {
			return fmt.Errorf("jobs: migrate %s to version %d: %w", table, v, err)
		}
		if done[v] {
			continue
		}
		rec := migration{Version: v, AppliedAt: time.Now().UTC()}
		if err := db.Table(mt).Clauses(clause.OnConflict{DoNothing: true}).Create(&rec).Error; err != nil {
			return fmt.Errorf("jobs: migrate: record version %d in %s: %w", v, mt, err)
		}
	}
	if queues != nil {
		qdb, ok := gormOf(queues)
		if !ok {
			return fmt.Errorf("jobs: migrate: %w", argerr.Errorf("queue store %T is not on SQL while the job store is", queues))
		}
		if err := autoMigrate(qdb.Session(&gorm.Session{NewDB: true}).WithContext(ctx), tableOf(queues), &Queue{}); err != nil {
			return fmt.Errorf("jobs: migrate: %w", err)
		}
	}
	return nil
}

// steps are the schema's versions: steps[v-1] brings a table to version
// v. Each step is idempotent (it creates only what is missing), so a
// migration that stopped half-way is completed by the next one.
var steps = []func(db *gorm.DB, table string, dialect dialects.Name) error{
	createV1,
	claimIndexesV2,
	createWaits,
	createLimits,
	createWorkflows,
	createLimitSlots,
	createLimitSettings,
}

// createV1 creates the job table, its indexes and, on PostgreSQL, its
// fillfactor and notify trigger.
func createV1(db *gorm.DB, table string, dialect dialects.Name) error {
	postgres := dialect == dialects.Postgres
	existed := db.Migrator().HasTable(table)
	if err := autoMigrate(db, table, &Row{}); err != nil {
		return err
	}
	if postgres && !existed {
		if err := db.Exec(fmt.Sprintf("ALTER TABLE ? SET (fillfactor = %d)", Fillfactor), clause.Table{Name: table}).Error; err != nil {
			return fmt.Errorf("set fillfactor: %w", err)
		}
	}
	fetch, schedule, final := IndexNames(db, table)
	t := clause.Table{Name: table}
	col := func(n string) clause.Column { return clause.Column{Name: n} }
	var idx []index
	if postgres {
		idx = []index{
			{fetch, "CREATE INDEX IF NOT EXISTS ? ON ? (?, ?, ?, ?) WHERE ? = 'available'",
				[]any{col(fetch), t, col(ColQueue), col(ColPriority), col(ColScheduledAt), col(ColID), col(ColState)}},
			{schedule, "CREATE INDEX IF NOT EXISTS ? ON ? (?) WHERE ? IN ('scheduled', 'retryable')",
				[]any{col(schedule), t, col(ColScheduledAt), col(ColState)}},
			{final, "CREATE INDEX IF NOT EXISTS ? ON ? (?, ?) WHERE ? IS NOT NULL",
				[]any{col(final), t, col(ColState), col(ColFinalizedAt), col(ColFinalizedAt)}},
		}
	} else {
		idx = []index{
			{fetch, "CREATE INDEX ? ON ? (?, ?, ?, ?, ?)",
				[]any{col(fetch), t, col(ColState), col(ColQueue), col(ColPriority), col(ColScheduledAt), col(ColID)}},
			{schedule, "CREATE INDEX ? ON ? (?, ?)", []any{col(schedule), t, col(ColState), col(ColScheduledAt)}},
			{final, "CREATE INDEX ? ON ? (?, ?)", []any{col(final), t, col(ColState), col(ColFinalizedAt)}},
		}
	}
	if err := createIndexes(db, table, postgres, idx); err != nil {
		return err
	}
	if dialect == dialects.SQLServer {
		if err := filterUniqueIndex(db, table); err != nil {
			return err
		}
	}
	if postgres {
		return createNotifyTrigger(db, table)
	}
	return nil
}

// claimIndexesV2 brings the claim's indexes of table to schema version 2
// on SQLite; other backends are left as version 1 made them. The schedule
// index becomes partial, (scheduled_at) WHERE state IN ('scheduled',
// 'retryable'), as on PostgreSQL. Without statistics (no ANALYZE has run,
// as on a new table) SQLite's planner takes the version 1 index (state,
// scheduled_at) for a queue's claim (state = ?)
// over the fetch index, then sorts: every claim reads all the available
// jobs of every queue. A partial index serves only a query whose WHERE
// clause implies its own (SQLite documentation, "Partial Indexes",
// section 2.2), which a claim's never does; the scheduler's read of due
// jobs steps over the waiting jobs in the fetch index instead (state, then
// scheduled_at in the entry).
func claimIndexesV2(db *gorm.DB, table string, dialect dialects.Name) error {
	if dialect != dialects.SQLite {
		return nil
	}
	_, schedule, _ := IndexNames(db, table)
	var partial int64
	err := db.Raw("SELECT count(*) FROM pragma_index_list(?) WHERE name = ? AND partial = 1", table, schedule).Scan(&partial).Error
	if err != nil || partial > 0 {
		return err
	}
	return rebuildIndex(db, schedule, "CREATE INDEX ? ON ? (?) WHERE ? IN ('scheduled', 'retryable')",
		[]any{clause.Column{Name: schedule}, clause.Table{Name: table}, clause.Column{Name: ColScheduledAt}, clause.Column{Name: ColState}})
}

// rebuildIndex drops index name on SQLite and creates it with the
// statement create and its args, in one transaction.
func rebuildIndex(db *gorm.DB, name, create string, args []any) error {
	return db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("DROP INDEX IF EXISTS ?", clause.Column{Name: name}).Error; err != nil {
			return fmt.Errorf("drop index %s: %w", name, err)
		}
		if err := tx.Exec(create, args...).Error; err != nil {
			return fmt.Errorf("create index %s: %w", name, err)
		}
		return nil
	})
}

// index is an index a schema step creates: its name and its CREATE
// statement with the statement's arguments.
type index struct {
	name string
	sql  string
	args []any
}

// createIndexes creates the indexes idx of table that are missing: on
// PostgreSQL their statements say IF NOT EXISTS, elsewhere the migrator
// looks first. An index a concurrent migration created meanwhile is no
// error.
func createIndexes(db *gorm.DB, table string, postgres bool, idx []index) error {
	for _, ix := range idx {
		if !postgres && db.Migrator().HasIndex(table, ix.name) {
			continue
		}
		if err := db.Exec(ix.sql, ix.args...).Error; err != nil && !db.Migrator().HasIndex(table, ix.name) {
			return fmt.Errorf("create index %s: %w", ix.name, err)
		}
	}
	return nil
}

// filterUniqueIndex makes the unique index of table's unique_key, which
// GORM creates without its WHERE clause on SQL Server, a filtered index
// (WHERE unique_key IS NOT NULL): SQL Server's unique indexes hold one
// NULL, so without the filter a second job without a unique key would be
// refused ("CREATE INDEX (Transact-SQL)", filtered indexes). It rebuilds
// the index only when it has no filter.
func filterUniqueIndex(db *gorm.DB, table string) error {
	return filterUniqueIndexOf(db, table, ColUniqueKey)
}

// filterUniqueIndexOf makes the unique index of table's column column a
// filtered index (WHERE column IS NOT NULL), as filterUniqueIndex does
// for unique_key.
func filterUniqueIndexOf(db *gorm.DB, table, column string) error {
	name := db.NamingStrategy.IndexName(table, column)
	var filtered int64
	err := db.Raw("SELECT count(*) FROM sys.indexes WHERE name = ? AND object_id = OBJECT_ID(?) AND has_filter = 1", name, table).Scan(&filtered).Error
	if err != nil || filtered > 0 {
		return err
	}
	idx, t, col := clause.Column{Name: name}, clause.Table{Name: table}, clause.Column{Name: column}
	if db.Migrator().HasIndex(table, name) {
		if err := db.Exec("DROP INDEX ? ON ?", idx, t).Error; err != nil {
			return fmt.Errorf("drop index %s: %w", name, err)
		}
	}
	if err := db.Exec("CREATE UNIQUE INDEX ? ON ? (?) WHERE ? IS NOT NULL", idx, t, col, col).Error; err != nil {
		return fmt.Errorf("create index %s: %w", name, err)
	}
	return nil
}

// createNotifyTrigger creates, unless it exists, the statement-level
// AFTER INSERT trigger of table that notifies the channel named like the
// table with an empty payload (every queue): one notification per INSERT
// statement whatever its rows, delivered when the transaction commits,
// and folded with the same notification of other statements of the
// transaction (PostgreSQL manual, "NOTIFY"). table passed CheckTable, so
// it is a plain identifier and a safe string literal.
func createNotifyTrigger(db *gorm.DB, table string) error {
	name := db.NamingStrategy.IndexName(table, "notify")
	fn := clause.Table{Name: name}
	body := fmt.Sprintf("BEGIN PERFORM pg_notify('%s', ''); RETURN NULL; END", table)
	if err := db.Exec("CREATE OR REPLACE FUNCTION ?() RETURNS trigger LANGUAGE plpgsql AS $fn$"+body+"$fn$", fn).Error; err != nil {
		return fmt.Errorf("create function %s: %w", name, err)
	}
	var n int64
	exists := func() (bool, error) {
		err := db.Raw("SELECT count(*) FROM pg_trigger WHERE tgname = ? AND tgrelid = to_regclass(?)", name, quoteIdent(table)).Scan(&n).Error
		return n > 0, err
	}
	if ok, err := exists(); err != nil || ok {
		return err
	}
	err := db.Exec("CREATE TRIGGER ? AFTER INSERT ON ? FOR EACH STATEMENT EXECUTE FUNCTION ?()", clause.Column{Name: name}, clause.Table{Name: table}, fn).Error
	if err != nil {
		if ok, _ := exists(); ok {
			return nil // a concurrent migration created it
		}
		return fmt.Errorf("create trigger %s: %w", name, err)
	}
	return nil
}

// quoteIdent quotes name, a checked plain identifier, for to_regclass.
func quoteIdent(name string) string { return `"` + name + `"` }

// autoMigrate creates or completes table with GORM's AutoMigrate of
// model, trying twice: another server may create the table or an index
// between GORM's check and its CREATE.
func autoMigrate(db *gorm.DB, table string, model any) error {
	if err := db.Table(table).AutoMigrate(model); err != nil {
		if err2 := db.Table(table).AutoMigrate(model); err2 != nil {
			return fmt.Errorf("create table %s: %w", table, err)
		}
	}
	return nil
}

// gormOf returns the *gorm.DB a SQL store runs on.
func gormOf(store any) (*gorm.DB, bool) {
	var db *gorm.DB
	a, ok := store.(dao.Aser)
	return db, ok && a.As(&db) && db != nil
}

// storeError maps err, from a statement run on store's own handle (a
// transaction of the limited claim, say), to the dao sentinel the store
// gives the same native error (dao.ErrBusy for a lock refused past the
// busy timeout, …), when the store offers its mapping through As (the
// SQL stores do); else it returns err.
func storeError(store any, err error) error {
	var m func(error) error
	if a, ok := store.(dao.Aser); ok && a.As(&m) && m != nil {
		return m(err)
	}
	return err
}

// migrateOther migrates a store that is not on SQL with its own Migrate,
// when it has one.
func migrateOther(ctx context.Context, store any) error {
	m, ok := store.(dao.Migrator)
	if !ok {
		return nil
	}
	if err := m.Migrate(ctx); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("jobs: migrate: %w", err)
	}
	return nil
}

// notifies reports whether store's job table has the insert trigger
// Migrate creates: a store on PostgreSQL proper (CockroachDB and
// YugabyteDB have no LISTEN).
func notifies(store any) bool {
	var d dialects.Name
	a, ok := store.(dao.Aser)
	return ok && a.As(&d) && d == dialects.Postgres
}

// Drop removes what [Migrate] created for store and queues (nil: none):
// the job table, its migration table and, on PostgreSQL, its notify
// function (the trigger goes with the table), and the queue table. It is
// for tests and for removing the job queue from a database; every job is
// lost. The memory store needs nothing. Errors: dao.ErrInvalidArgument
// for a nil store or a bad table name; database errors, wrapped.
func Drop(ctx context.Context, store dao.Store[Row], queues dao.Store[Queue]) error {
	if store == nil {
		return fmt.Errorf("jobs: drop: %w", argerr.Errorf("nil store"))
	}
	db, ok := gormOf(store)
	if !ok {
		return nil
	}
	table := tableOf(store)
	if err := CheckTable(table); err != nil {
		return fmt.Errorf("jobs: drop: %w", err)
	}
	migrateMu.Lock()
	defer migrateMu.Unlock()
	db = db.Session(&gorm.Session{NewDB: true}).WithContext(ctx)
	tables := []string{table, MigrationTable(table), LimitTable(table), LimitSlotTable(table)}
	if queues != nil {
		tables = append(tables, tableOf(queues))
	}
	for _, t := range tables {
		if err := db.Migrator().DropTable(t); err != nil {
			return fmt.Errorf("jobs: drop table %s: %w", t, err)
		}
	}
	if notifies(store) {
		fn := clause.Table{Name: db.NamingStrategy.IndexName(table, "notify")}
		if err := db.Exec("DROP FUNCTION IF EXISTS ?()", fn).Error; err != nil {
			return fmt.Errorf("jobs: drop function %s: %w", fn.Name, err)
		}
	}
	return nil
}
