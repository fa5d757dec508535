package dispatch

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/argerr"
)

// Kind says whether a [Schedule] fires once or on a cron expression.
type Kind string

// The kinds of schedule.
const (
	KindOnce Kind = "once"
	KindCron Kind = "cron"
)

// Status is the lifecycle state of a [Schedule].
type Status string

// The states of a schedule. An active schedule fires when its NextFireAt
// comes; a paused one does not until it is resumed; fired (a once schedule
// that succeeded, or a cron schedule with no future occurrence) and failed
// (a once schedule past its MaxFailures) are terminal and kept for audit.
const (
	StatusActive Status = "active"
	StatusPaused Status = "paused"
	StatusFired  Status = "fired"
	StatusFailed Status = "failed"
)

// Column size limits of the schedule table, in bytes.
const (
	MaxKeyLen   = 191 // schedule_key: fits a unique index under utf8mb4 on MySQL
	MaxCronLen  = 191
	MaxZoneLen  = 64
	MaxErrorLen = 2000
)

// Column names of the schedule table.
const (
	ColID           = "id"
	ColKey          = "schedule_key"
	ColKind         = "kind"
	ColCron         = "cron"
	ColTimeZone     = "time_zone"
	ColNextFireAt   = "next_fire_at"
	ColStatus       = "status"
	ColFailureCount = "failure_count"
	ColMaxFailures  = "max_failures"
	ColLastError    = "last_error"
	ColLastFiredAt  = "last_fired_at"
	ColPayload      = "payload"
	ColLeaseOwner   = "lease_owner"
	ColLeaseUntil   = "lease_until"
)

// Schedule is one row of the schedule table: a once or cron schedule, its
// next fire time, its retry ladder state and its lease. It is a GORM model;
// the default table is claimstore_schedules ([DefaultScheduleTable]).
type Schedule struct {
	// ID is the surrogate primary key, assigned on insert.
	ID int64 `gorm:"primaryKey;autoIncrement;index:,composite:due_id,priority:3"`
	// Key is the caller's unique name of the schedule, e.g.
	// "invoice-42-reminder"; adding the same key again is idempotent.
	Key string `gorm:"column:schedule_key;size:191;not null;uniqueIndex"`
	// Kind is once or cron.
	Kind Kind `gorm:"size:8;not null"`
	// Cron is the cron expression of a cron schedule (see [CheckCron]);
	// empty for once.
	Cron string `gorm:"size:191;not null"`
	// TimeZone is the IANA zone the cron expression is read in; empty is
	// UTC.
	TimeZone string `gorm:"size:64;not null"`
	// NextFireAt is when the schedule is due next (UTC): the fire time,
	// the next cron occurrence, or the retry time after a failure.
	NextFireAt time.Time `gorm:"not null;index:,composite:due_id,priority:2"`
	// Status is the lifecycle state.
	Status Status `gorm:"size:16;not null;index:,composite:due_id,priority:1"`
	// FailureCount is the number of consecutive failed fires.
	FailureCount int `gorm:"not null"`
	// MaxFailures is the number of consecutive failures at which a once
	// schedule fails for good and a cron schedule skips to its next
	// occurrence.
	MaxFailures int `gorm:"not null"`
	// LastError is the error of the last failed fire; kept after later
	// successes and skips.
	LastError string `gorm:"size:2000;not null"`
	// LastFiredAt is when the schedule last fired successfully.
	LastFiredAt *time.Time
	// Payload is opaque to the dispatcher and handed to the handler.
	Payload []byte
	// LeaseOwner is the fencing token of the worker claim that holds the
	// schedule, "" when none.
	LeaseOwner string `gorm:"size:191;not null"`
	// LeaseUntil is the end of the current lease.
	LeaseUntil *time.Time
	// CreatedAt and UpdatedAt are maintained by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// DefaultScheduleTable is the table name of [Schedule] when no other is
// given.
const DefaultScheduleTable = "claimstore_schedules"

// TableName returns [DefaultScheduleTable].
func (Schedule) TableName() string { return DefaultScheduleTable }

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// CheckTable returns nil when table is a valid schedule table name (1–63
// letters, digits and underscores, not starting with a digit), else an
// error wrapping [dao.ErrInvalidArgument]. It does no I/O.
func CheckTable(table string) error {
	if !tableName.MatchString(table) {
		return argerr.Errorf("table name %q: use 1-63 letters, digits and underscores", table)
	}
	return nil
}

// MigrateSchedules creates the schedule table named table (or
// [DefaultScheduleTable] when empty) with its indexes, or adds what is
// missing; running it again changes nothing. Indexes: unique
// (schedule_key); (status, next_fire_at, id), idx_<table>_due_id, which
// serves the claim of due active schedules in its order (next_fire_at, then
// id) without a sort however many are due. A table made by an earlier
// version has idx_<table>_due on (status, next_fire_at) instead: it gets the
// new index and the old one is dropped (on PostgreSQL that index made every
// claim sort all due rows). Errors: [dao.ErrInvalidArgument]-wrapping for a bad
// table name (1–63 letters, digits, underscores); database errors wrapped.
//
// The store that [NewSchedules] and [NewScheduleWorker] use must name the
// same table (sqlstore.WithTable), or it uses [DefaultScheduleTable];
// [MigrateScheduleStore] takes the name from the store instead, so that
// it is given once.
func MigrateSchedules(ctx context.Context, db *gorm.DB, table string) error {
	if table == "" {
		table = DefaultScheduleTable
	}
	if err := CheckTable(table); err != nil {
		return fmt.Errorf("dispatch: migrate: %w", err)
	}
	migrateMu.Lock()
	defer migrateMu.Unlock()
	db = db.WithContext(ctx)
	if err := db.Table(table).AutoMigrate(&Schedule{}); err != nil {
		// Another server may have created the table between GORM's check
		// and its CREATE: a second pass sees it.
		if err2 := db.Table(table).AutoMigrate(&Schedule{}); err2 != nil {
			return fmt.Errorf("dispatch: migrate: create table %s: %w", table, err)
		}
	}
	old := "idx_" + table + "_due"
	if m := db.Table(table).Migrator(); m.HasIndex(&Schedule{}, old) {
		if err := m.DropIndex(&Schedule{}, old); err != nil && m.HasIndex(&Schedule{}, old) {
			return fmt.Errorf("dispatch: migrate: drop index %s: %w", old, err)
		}
	}
	return nil
}

// MigrateScheduleStore creates or completes the table of store, a store
// of [Schedule] rows, as [MigrateSchedules] does, under the table name the
// store itself carries (the one it was opened with, e.g.
// sqlstore.WithTable, else [DefaultScheduleTable]). The table is thus
// named once, where the store is opened, and the migration, [NewSchedules]
// and [NewScheduleWorker] all use that table:
//
//	store, err := sqlstore.New[dispatch.Schedule](db, sqlstore.WithTable("billing_schedules"))
//	...
//	err = dispatch.MigrateScheduleStore(ctx, store)
//
// A SQL store (one that hands out its *gorm.DB through As, as every
// sqlstore store does) is migrated with MigrateSchedules; another store
// with a Migrate method (Elasticsearch) with that method; the memory
// store needs nothing and gets nil. Errors: [dao.ErrInvalidArgument] for a
// nil store, a store of another kind, or a table name MigrateSchedules
// refuses; database errors wrapped.
func MigrateScheduleStore(ctx context.Context, store dao.Store[Schedule]) error {
	if store == nil {
		return fmt.Errorf("dispatch: migrate: %w", argerr.Errorf("nil store"))
	}
	var db *gorm.DB
	if a, ok := store.(dao.Aser); ok && a.As(&db) && db != nil {
		n, ok := store.(dao.TableNamer)
		if !ok {
			return fmt.Errorf("dispatch: migrate: %w", argerr.Errorf("store %T does not report its table (not a dao.TableNamer)", store))
		}
		return MigrateSchedules(ctx, db, n.TableName())
	}
	if m, ok := store.(dao.Migrator); ok {
		if err := m.Migrate(ctx); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("dispatch: migrate: %w", err)
		}
		return nil
	}
	return fmt.Errorf("dispatch: migrate: %w", argerr.Errorf("store %T offers no way to migrate its table", store))
}

// migrateMu serializes migrations in this process (GORM's MySQL dialector
// keeps unsynchronized state per *gorm.DB).
var migrateMu sync.Mutex
