package outbox

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/dao"
)

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// CheckTable reports whether name can be a message table name: 1 to 63
// ASCII letters, digits and underscores, not starting with a digit. Other
// names are [dao.ErrInvalidArgument].
func CheckTable(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("%w: table name %q: use 1-63 letters, digits and underscores", dao.ErrInvalidArgument, name)
	}
	return nil
}

// IndexNames returns the names of the indexes [Migrate] creates on table:
// the claim index and the unique index on (message_id, target_broker). Both
// are derived from the table name (GORM's naming strategy, which shortens
// long names with a hash), so that many message tables can live in one
// schema.
func IndexNames(db *gorm.DB, table string) (claim, unique string) {
	return db.NamingStrategy.IndexName(table, "claim"), db.NamingStrategy.IndexName(table, "msgid_broker")
}

// Fillfactor is the storage parameter fillfactor, in percent of each heap
// page, that [Migrate] gives a message table it creates on PostgreSQL:
// inserts fill pages to half, and the other half stays free for the row
// versions claims write, so that a claim can be a HOT update (PostgreSQL
// manual, "Heap-Only Tuples (HOT)", section 65.7, and CREATE TABLE,
// "Storage Parameters"). Half, because messages are written in order and
// claimed in order: one claim of a few hundred messages takes every row of
// a page at once, and needs room for a second version of each. (With 70,
// less than half of the claims found room and were HOT.)
const Fillfactor = 50

// Migrate creates the message table (the schema of [Message]) named table,
// or [DefaultTable] when table is empty, if it does not exist, together
// with its indexes; running it again changes nothing, so every server may
// run it at start-up.
//
// Indexes:
//   - unique (message_id, target_broker): a repeated message id for one
//     broker is refused ([dao.ErrDuplicate] from [Repository.Add]);
//   - the claim index. On PostgreSQL it is a partial index on the
//     unpublished rows, (target_broker, priority DESC, created_at, id)
//     WHERE published_at IS NULL, which serves the claim's filter and its
//     order and stays small however many published rows the table keeps
//     (PostgreSQL manual, "Partial Indexes", section 11.8). Elsewhere it
//     is a composite index (status, target_broker, priority, created_at),
//     whose leading status column skips the published rows.
//
// On PostgreSQL a table it creates also gets fillfactor [Fillfactor]. With
// both, a claim — which changes status, locked_by, locked_until and
// last_processed_at, none of them in an index or an index predicate —
// writes its row versions as HOT updates on the row's own page, without
// new entries in any index; the mark that sets published_at leaves the
// claim index. (An index predicate on status, as tables made by earlier
// versions have, makes every claim a non-HOT update.) Abandoned messages
// stay in the claim index until they are requeued or purged; the claim
// steps over them.
//
// Migrate does not change an existing table: a table made by an earlier
// version keeps its claim index (predicate status IN ('pending',
// 'processing', 'failed')) and its fillfactor, and keeps working as it
// did. docs/operations.md ("Outbox table on PostgreSQL: HOT claims") gives
// the statements that bring it to the new layout without blocking writes.
//
// Errors: [dao.ErrInvalidArgument] for a bad table name; the database's
// errors wrapped.
func Migrate(ctx context.Context, db *gorm.DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := CheckTable(table); err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	// GORM's MySQL dialector caches the server's time type in state shared
	// by every session of one *gorm.DB without synchronization, so
	// concurrent migrations in one process would race in the driver. They
	// run one at a time here; migrations from other processes or servers
	// are handled by the retry below.
	migrateMu.Lock()
	defer migrateMu.Unlock()
	db = db.WithContext(ctx)
	postgres := db.Dialector.Name() == "postgres"
	existed := postgres && db.Migrator().HasTable(table)
	if err := db.Table(table).AutoMigrate(&Message{}); err != nil {
		// Another server may have created the table or an index between
		// GORM's check and its CREATE: a second pass sees them.
		if err2 := db.Table(table).AutoMigrate(&Message{}); err2 != nil {
			return fmt.Errorf("outbox: migrate: create table %s: %w", table, err)
		}
	}
	claim, _ := IndexNames(db, table)
	cols := func(names ...string) []clause.Column {
		out := make([]clause.Column, len(names))
		for i, n := range names {
			out[i] = clause.Column{Name: n}
		}
		return out
	}
	if postgres {
		if !existed {
			// The table is new (or another server created it a moment
			// ago, with the same setting): no page is written yet, so
			// every page gets the fillfactor.
			err := db.Exec(fmt.Sprintf("ALTER TABLE ? SET (fillfactor = %d)", Fillfactor), clause.Table{Name: table}).Error
			if err != nil {
				return fmt.Errorf("outbox: migrate: set fillfactor of %s: %w", table, err)
			}
		}
		c := cols(ColTargetBroker, ColPriority, ColCreatedAt, ColID, ColPublishedAt)
		err := db.Exec("CREATE INDEX IF NOT EXISTS ? ON ? (?, ? DESC, ?, ?) WHERE ? IS NULL",
			clause.Column{Name: claim}, clause.Table{Name: table}, c[0], c[1], c[2], c[3], c[4]).Error
		if err != nil && !db.Migrator().HasIndex(table, claim) {
			return fmt.Errorf("outbox: migrate: create index %s: %w", claim, err)
		}
		return nil
	}
	if db.Migrator().HasIndex(table, claim) {
		return nil
	}
	c := cols(ColStatus, ColTargetBroker, ColPriority, ColCreatedAt)
	err := db.Exec("CREATE INDEX ? ON ? (?, ?, ?, ?)", clause.Column{Name: claim}, clause.Table{Name: table}, c[0], c[1], c[2], c[3]).Error
	if err != nil && !db.Migrator().HasIndex(table, claim) { // a concurrent migration may have won
		return fmt.Errorf("outbox: migrate: create index %s: %w", claim, err)
	}
	return nil
}

// migrateMu serializes Migrate calls in this process.
var migrateMu sync.Mutex
