package dao

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao/driver"
)

// Table is the one implementation of [Store]: the portable layer over a
// driver. It checks every request once against the model (fields from the
// schema, value types, limits, nil), wraps every error once with the prefix
// "claimstore: <operation>:", and claims rows with the strategy [New]
// chose. Backend packages (adapters/postgres, adapters/mysql,
// adapters/sqlite, adapters/sqlserver, adapters/memstore,
// adapters/esstore) return one; program against [Store]. A Table is safe
// for concurrent use.
type Table[T any] struct {
	drv     driver.Driver[T]
	claimer driver.Claimer[T] // nil: the portable claim
	check   checker[T]
	caps    Capabilities
	inTx    bool  // the driver runs on a caller's transaction: Claim is refused
	err     error // set by WithTx(nil): every call returns it

	lc        driver.Lifecycle // soft-delete and timestamp columns of T
	now       func() time.Time // the application clock (WithClock)
	unscoped  bool             // Unscoped: deleted rows are seen, Delete removes
	updateNow bool             // the driver's Update writes driver.CurrentTime
	claimNow  bool             // the chosen claimer writes and returns driver.CurrentTime
	strict    bool             // WithClaimSpread(false): the portable claim tries every candidate in order
	contended *atomic.Bool     // the portable claim lost a race in its last claim: read a wider window
}

var _ Store[struct{ ID int64 }] = (*Table[struct{ ID int64 }])(nil)

// New returns the portable store over drv. The claim strategy is the one
// [WithStrategy] names, or by default the driver's fast path when it is
// on the allow-list ([driver.ClaimerInfo].Default), else the portable
// claim. It does no I/O.
//
// Errors wrap [ErrInvalidArgument]: a nil driver, or [StrategyFastPath]
// for a driver without a fast path or whose backend cannot run it (a
// server version without SKIP LOCKED).
func New[T any](drv driver.Driver[T], opts ...Option) (*Table[T], error) {
	if drv == nil {
		return nil, fmt.Errorf("claimstore: new: %w: nil driver", ErrInvalidArgument)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	t := &Table[T]{drv: drv, check: checker[T]{drv.Model()}, now: o.clock, strict: o.strict, contended: new(atomic.Bool)}
	if t.now == nil {
		t.now = time.Now
	}
	lc, err := drv.Model().Lifecycle()
	if err != nil {
		return nil, fmt.Errorf("claimstore: new: %w", err)
	}
	t.lc = lc
	c, _ := drv.(driver.Claimer[T])
	var ci driver.ClaimerInfo
	if c != nil {
		ci = c.ClaimerInfo()
	}
	switch o.strategy {
	case StrategyDefault:
		if c != nil && ci.Available && ci.Default {
			t.claimer = c
		}
	case StrategyFastPath:
		if c == nil || !ci.Available {
			return nil, fmt.Errorf("claimstore: new: %w: %s has no fast-path claim", ErrInvalidArgument, drv.Info().Backend)
		}
		t.claimer = c
	case StrategyPortable:
	default:
		return nil, fmt.Errorf("claimstore: new: %w: unknown %v", ErrInvalidArgument, o.strategy)
	}
	info := drv.Info()
	t.caps = capabilities(info, t.claimer, ci)
	t.inTx = info.InTransaction
	t.updateNow = info.CurrentTime
	t.claimNow = t.claimer != nil && ci.CurrentTime
	_, t.caps.Transactions = drv.(driver.TxBinder[T])
	_, t.caps.DatabaseClock = drv.(driver.Clock)
	return t, nil
}

// capabilities composes what the driver states with the chosen strategy.
func capabilities[T any](info driver.Info, c driver.Claimer[T], ci driver.ClaimerInfo) Capabilities {
	caps := Capabilities{
		Backend:         info.Backend,
		Strategy:        StrategyPortable,
		ClaimRoundTrips: RoundTrips{Fixed: 1, PerRow: 1},
		LostRace:        info.LostRace,
		Collation:       info.Collation,
		ClaimTimeout:    info.ClaimTimeout,
		LockWaitLimit:   info.LockWaitLimit,
	}
	if c != nil {
		caps.Strategy = StrategyFastPath
		caps.ClaimRoundTrips = ci.RoundTrips
		caps.LostRace = ci.LostRace
		caps.LockWaitLimit = ci.LockWaitLimit
	}
	return caps
}

// Model returns the parsed model of T.
func (t *Table[T]) Model() *driver.Model[T] { return t.drv.Model() }

// CheckCriteria checks c against the model as every call of the store
// does, and returns it with values normalized, before the live-row
// condition of a soft-delete model is added; it does no I/O. Errors wrap [ErrInvalidArgument].
func (t *Table[T]) CheckCriteria(c Criteria) (Criteria, error) { return t.check.criteria(c) }

// CheckClaim checks req as [Table.Claim] does and returns it with values
// normalized and the primary key appended to the order, before the
// live-row condition and the autoUpdateTime columns are added; it does no
// I/O. Errors wrap [ErrInvalidArgument].
func (t *Table[T]) CheckClaim(req ClaimRequest) (ClaimRequest, error) { return t.check.claim(req) }

// TableName returns the name of the table (or Elasticsearch index) the
// store reads and writes: the model's table name under its naming
// strategy (TableName(), TablePrefix, SingularTable), or the explicit name
// the store was opened with. The memory store reports the model's table
// name. It does no I/O.
func (t *Table[T]) TableName() string {
	if name := t.drv.Info().Table; name != "" {
		return name
	}
	return t.drv.Model().Table()
}

// Capabilities reports the backend, the claim strategy, its round trips
// and lost-race behaviour, the collation and the claim's time bounds; it
// does no I/O.
func (t *Table[T]) Capabilities() Capabilities { return t.caps }

// WithTx returns a store that runs every call inside tx, a transaction the
// caller opened and commits or rolls back; tx's type is the one the
// backend documents (a *gorm.DB inside a transaction for the SQL
// backends: the argument of db.Transaction, or db.Begin()). Claim on the
// returned store is refused with [ErrInTransaction]: a claim must commit
// on its own, or its rows would stay invisible to other workers, and held
// locked, until the caller's transaction ends. A tx the backend cannot
// bind (nil, another type, a backend without transactions) yields a store
// whose every call fails with an error wrapping [ErrInvalidArgument].
func (t *Table[T]) WithTx(tx any) *Table[T] {
	c := *t
	b, ok := t.drv.(driver.TxBinder[T])
	if !ok {
		c.err = fmt.Errorf("with tx: %w: %s runs no caller transactions", ErrInvalidArgument, t.caps.Backend)
		return &c
	}
	drv, err := b.BindTx(tx)
	if err != nil {
		c.err = fmt.Errorf("with tx: %w", err)
		return &c
	}
	c.drv = drv
	c.claimer = nil // Claim is refused in a transaction
	c.claimNow = false
	c.inTx = true
	return &c
}

// Migrate creates the store's table (or index), or adds missing columns
// and indexes. Errors: [errors.ErrUnsupported] for a backend that does not
// migrate, else mapped like every database error.
func (t *Table[T]) Migrate(ctx context.Context) error {
	if t.err != nil {
		return fmt.Errorf("claimstore: migrate: %w", t.err)
	}
	m, ok := t.drv.(driver.Migrator)
	if !ok {
		return fmt.Errorf("claimstore: migrate: %s: %w", t.caps.Backend, errors.ErrUnsupported)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("claimstore: migrate: %w", err)
	}
	return nil
}

// Now returns the database's current time in UTC: one round trip on the
// SQL backends. Backends without a clock of their own (memory,
// Elasticsearch) return an error wrapping [errors.ErrUnsupported]; callers
// then use the local clock.
func (t *Table[T]) Now(ctx context.Context) (time.Time, error) {
	if t.err != nil {
		return time.Time{}, fmt.Errorf("claimstore: now: %w", t.err)
	}
	c, ok := t.drv.(driver.Clock)
	if !ok {
		return time.Time{}, fmt.Errorf("claimstore: now: %s: %w", t.caps.Backend, errors.ErrUnsupported)
	}
	now, err := c.Now(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("claimstore: now: %w", err)
	}
	return now, nil
}

// Listen subscribes to the database notifications of channel on a
// connection of its own, calls fn once with the empty payload when the
// subscription is in place and then with each notification's payload
// until ctx ends or the connection fails, and returns the error that
// ended it (wrapping ctx.Err() when ctx ended): PostgreSQL's LISTEN
// (PostgreSQL manual, "SQL Commands: LISTEN" and "NOTIFY"). fn runs on
// Listen's goroutine and must return quickly. A notification sent while
// no Listen runs is lost, so callers treat notifications as hints and
// read the table at the empty payload, once subscribed. channel is a name of 1 to 63 ASCII letters, digits and
// underscores, not starting with a digit ([ErrInvalidArgument]
// otherwise). A backend without notifications returns an error wrapping
// [errors.ErrUnsupported] at once.
func (t *Table[T]) Listen(ctx context.Context, channel string, fn func(payload string)) error {
	if t.err != nil {
		return fmt.Errorf("claimstore: listen: %w", t.err)
	}
	l, ok := t.drv.(driver.Listener)
	if !ok {
		return fmt.Errorf("claimstore: listen: %s: %w", t.caps.Backend, errors.ErrUnsupported)
	}
	if !validChannel(channel) || fn == nil {
		return fmt.Errorf("claimstore: listen: %w: channel %q (1-63 letters, digits, underscores) and a func are required", ErrInvalidArgument, channel)
	}
	if err := l.Listen(ctx, channel, fn); err != nil {
		return fmt.Errorf("claimstore: listen %s: %w", channel, err)
	}
	return nil
}

// CanListen reports whether [Table.Listen] can subscribe on this store's
// backend (a PostgreSQL store whose driver supports it), without I/O.
func (t *Table[T]) CanListen() bool {
	l, ok := t.drv.(interface{ CanListen() bool })
	if ok {
		return l.CanListen()
	}
	_, ok = t.drv.(driver.Listener)
	return ok
}

// validChannel reports whether name is 1 to 63 ASCII letters, digits and
// underscores, not starting with a digit.
func validChannel(name string) bool {
	if name == "" || len(name) > 63 || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// As reports whether it could set target, a pointer, to a value of the
// backend's own type, as the backend documents (a **gorm.DB for the SQL
// backends: the handle the store runs on). It is the escape hatch for
// what the portable API does not cover.
func (t *Table[T]) As(target any) bool {
	a, ok := t.drv.(driver.As)
	return ok && a.As(target)
}

// Create inserts items in one batch and fills generated primary keys back
// into them: either every item is inserted or none. No items is a no-op.
// A nil item, or a value the model refuses (see driver.Model.CheckRow), is
// [ErrInvalidArgument]; a unique violation is [ErrDuplicate].
func (t *Table[T]) Create(ctx context.Context, items ...*T) error {
	if err := t.begin(ctx); err != nil {
		return fmt.Errorf("claimstore: create: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	for _, it := range items {
		if err := t.drv.Model().CheckRow(it); err != nil {
			return fmt.Errorf("claimstore: create: %w", err)
		}
	}
	if err := t.stampCreate(items); err != nil {
		return fmt.Errorf("claimstore: create: %w", err)
	}
	if err := t.drv.Insert(ctx, items); err != nil {
		return fmt.Errorf("claimstore: create: %w", err)
	}
	return nil
}

// CreateIfAbsent inserts each of items unless a stored row (or an earlier
// item) already holds its primary key or one of its unique keys, and
// returns how many it inserted: the idempotent bulk insert (schedules by
// key, messages by message id). Items are not changed: generated primary
// keys are not filled back, since a skipped item has none. No items is a
// no-op.
//
// On PostgreSQL and SQLite it is INSERT … ON CONFLICT DO NOTHING
// (PostgreSQL manual, "INSERT": ON CONFLICT; SQLite, "UPSERT"), on MySQL
// and MariaDB INSERT IGNORE (MySQL manual, "INSERT Statement": IGNORE also
// turns other errors, such as a value too long for its column, into
// warnings, so check values before), many rows per statement; the rows of
// one statement are inserted or skipped together with it. Elsewhere
// (SQL Server, Elasticsearch, memory) it inserts item by item, skipping
// those refused with [ErrDuplicate], and with an error returns the count
// inserted before it.
//
// Errors: [ErrInvalidArgument] for a nil item or a value the model refuses
// (nothing is inserted); the database's errors, mapped.
func (t *Table[T]) CreateIfAbsent(ctx context.Context, items ...*T) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, fmt.Errorf("claimstore: create if absent: %w", err)
	}
	if len(items) == 0 {
		return 0, nil
	}
	for _, it := range items {
		if err := t.drv.Model().CheckRow(it); err != nil {
			return 0, fmt.Errorf("claimstore: create if absent: %w", err)
		}
	}
	// Stamp copies: the caller's items stay as they are.
	rows := make([]T, len(items))
	ptrs := make([]*T, len(items))
	for i, it := range items {
		rows[i] = *it
		ptrs[i] = &rows[i]
	}
	if err := t.stampCreate(ptrs); err != nil {
		return 0, fmt.Errorf("claimstore: create if absent: %w", err)
	}
	if ai, ok := t.drv.(driver.AbsentInserter[T]); ok {
		n, err := ai.InsertIfAbsent(ctx, ptrs)
		if err != nil {
			return n, fmt.Errorf("claimstore: create if absent: %w", err)
		}
		return n, nil
	}
	var n int64
	for _, p := range ptrs {
		err := t.drv.Insert(ctx, []*T{p})
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrDuplicate):
		default:
			return n, fmt.Errorf("claimstore: create if absent: %w", err)
		}
	}
	return n, nil
}

// Get returns the row whose primary key is id, or [ErrNotFound]: one
// Select by primary key, or the backend's own read by id where it has one
// (Elasticsearch's real-time get).
func (t *Table[T]) Get(ctx context.Context, id any) (T, error) {
	var zero T
	if err := t.begin(ctx); err != nil {
		return zero, fmt.Errorf("claimstore: get: %w", err)
	}
	key, err := t.check.id(id)
	if err != nil {
		return zero, fmt.Errorf("claimstore: get: %w", err)
	}
	if g, ok := t.drv.(driver.Getter[T]); ok {
		row, err := g.Get(ctx, key)
		if err != nil {
			return zero, fmt.Errorf("claimstore: get %v: %w", id, err)
		}
		if !t.live(&row) {
			return zero, fmt.Errorf("claimstore: get %v: %w (soft-deleted)", id, ErrNotFound)
		}
		return row, nil
	}
	pk := t.drv.Model().PrimaryKey()
	rows, err := t.drv.Select(ctx, Query{Where: t.scope(Eq(pk, key)), OrderBy: []Order{Asc(pk)}, Limit: 1})
	if err != nil {
		return zero, fmt.Errorf("claimstore: get %v: %w", id, err)
	}
	if len(rows) == 0 {
		return zero, fmt.Errorf("claimstore: get %v: %w", id, ErrNotFound)
	}
	return rows[0], nil
}

// Find returns the rows matching q.Where in q.OrderBy order (primary key
// last), at most q.Limit of them when q.Limit > 0. NULLs of nullable
// ordering columns sort last ascending and first descending on every
// backend, as PostgreSQL sorts them.
func (t *Table[T]) Find(ctx context.Context, q Query) ([]T, error) {
	if err := t.begin(ctx); err != nil {
		return nil, fmt.Errorf("claimstore: find: %w", err)
	}
	q, err := t.check.query(q)
	if err != nil {
		return nil, fmt.Errorf("claimstore: find: %w", err)
	}
	q.Where = t.scope(q.Where)
	rows, err := t.drv.Select(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("claimstore: find: %w", err)
	}
	return rows, nil
}

// Count returns how many rows match where.
func (t *Table[T]) Count(ctx context.Context, where Criteria) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, fmt.Errorf("claimstore: count: %w", err)
	}
	where, err := t.check.criteria(where)
	if err != nil {
		return 0, fmt.Errorf("claimstore: count: %w", err)
	}
	n, err := t.drv.Count(ctx, t.scope(where))
	if err != nil {
		return 0, fmt.Errorf("claimstore: count: %w", err)
	}
	return n, nil
}

// Update applies set to every row matching where and returns the number of
// rows it matched, also those that already held the values (a fenced
// update such as "set status = published where locked_by = me" relies on
// it). An empty set is [ErrInvalidArgument]; a unique violation is
// [ErrDuplicate] and changes nothing. A backend that updates row by row
// (Elasticsearch) returns with an error the number of rows it updated
// before it.
func (t *Table[T]) Update(ctx context.Context, where Criteria, set Set) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, fmt.Errorf("claimstore: update: %w", err)
	}
	where, err := t.check.criteria(where)
	if err != nil {
		return 0, fmt.Errorf("claimstore: update: %w", err)
	}
	if set, err = t.check.set(set); err != nil {
		return 0, fmt.Errorf("claimstore: update: %w", err)
	}
	if set, err = t.stampSet(set, t.updateNow); err != nil {
		return 0, fmt.Errorf("claimstore: update: %w", err)
	}
	n, err := t.drv.Update(ctx, t.scope(where), set)
	if err != nil {
		return n, fmt.Errorf("claimstore: update: %w", err)
	}
	return n, nil
}

// UpdateKeys applies set to every row matching where, as [Table.Update]
// does, and returns the primary keys of the rows it matched, in no
// particular order. A fenced write of many rows (each row's key and lease
// token in where) thus learns which rows it wrote and which the fence
// refused. Keys come back in the form the backend scans them: an int64 for
// an integer key on the SQL backends, a string for a text or UUID key;
// compare them with the keys you sent by their printed form when their
// Go types may differ.
//
// On PostgreSQL and SQLite it is one UPDATE … RETURNING, on SQL Server
// one UPDATE … OUTPUT INSERTED, on MySQL and MariaDB a transaction of a
// locking read of the keys (SELECT … FOR UPDATE) and an UPDATE of those
// keys: the rows read stay locked until the commit, so the keys returned
// are exactly the rows written. On a backend without such an operation
// (Elasticsearch) it reads the keys of the matching rows, then updates
// each with where re-asserted (UPDATE … WHERE pk = ? AND (<where>)),
// returning the keys whose update matched; with an error it returns the
// keys written before it. The errors are those of Update.
func (t *Table[T]) UpdateKeys(ctx context.Context, where Criteria, set Set) ([]any, error) {
	if err := t.begin(ctx); err != nil {
		return nil, fmt.Errorf("claimstore: update keys: %w", err)
	}
	where, err := t.check.criteria(where)
	if err != nil {
		return nil, fmt.Errorf("claimstore: update keys: %w", err)
	}
	if set, err = t.check.set(set); err != nil {
		return nil, fmt.Errorf("claimstore: update keys: %w", err)
	}
	if set, err = t.stampSet(set, t.updateNow); err != nil {
		return nil, fmt.Errorf("claimstore: update keys: %w", err)
	}
	where = t.scope(where)
	var keys []any
	if ku, ok := t.drv.(driver.KeyUpdater[T]); ok {
		keys, err = ku.UpdateKeys(ctx, where, set)
	} else {
		keys, err = t.updateEach(ctx, where, set)
	}
	if err != nil {
		return keys, fmt.Errorf("claimstore: update keys: %w", err)
	}
	return keys, nil
}

// updateEach is UpdateKeys for a driver without [driver.KeyUpdater]: a read
// of the matching rows, then one Update per row with where re-asserted.
func (t *Table[T]) updateEach(ctx context.Context, where Criteria, set Set) ([]any, error) {
	m := t.drv.Model()
	pk := m.PrimaryKey()
	rows, err := t.drv.Select(ctx, Query{Where: where, OrderBy: []Order{Asc(pk)}})
	if err != nil {
		return nil, err
	}
	var keys []any
	for i := range rows {
		id := m.ID(&rows[i])
		n, err := t.drv.Update(ctx, driver.Logic(OpAnd, []Criteria{Eq(pk, id), where}), set)
		if err != nil {
			return keys, err
		}
		if n > 0 {
			keys = append(keys, id)
		}
	}
	return keys, nil
}

// Delete removes at most limit rows matching where, smallest primary keys
// first, and returns how many it removed. limit <= 0 is
// [ErrInvalidArgument].
//
// For a model with a soft-delete field (gorm.DeletedAt, or the
// soft_delete plugin's integer forms; see [Table.Unscoped]) it deletes
// softly, as GORM does: it reads the keys of at most limit live rows
// matching where, smallest first, then sets their soft-delete column
// (the deletion time, or 1 for the flag form) in one Update that
// re-asserts where and liveness, and returns how many rows that Update
// matched: two statements, not one. The deletion time is the database's
// clock where [Capabilities].Backend writes it in the statement
// (PostgreSQL, SQL Server), else the application's ([WithClock]).
func (t *Table[T]) Delete(ctx context.Context, where Criteria, limit int) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, fmt.Errorf("claimstore: delete: %w", err)
	}
	if limit <= 0 {
		return 0, fmt.Errorf("claimstore: delete: %w: limit must be > 0, got %d", ErrInvalidArgument, limit)
	}
	where, err := t.check.criteria(where)
	if err != nil {
		return 0, fmt.Errorf("claimstore: delete: %w", err)
	}
	var n int64
	if t.scoped() {
		n, err = t.softDelete(ctx, where, limit)
	} else {
		n, err = t.drv.Delete(ctx, where, limit)
	}
	if err != nil {
		return n, fmt.Errorf("claimstore: delete: %w", err)
	}
	return n, nil
}

// begin returns the error every call of t fails with (WithTx of a
// transaction the backend cannot bind), or ctx's error: nothing is sent
// once ctx is done.
func (t *Table[T]) begin(ctx context.Context) error {
	if t.err != nil {
		return t.err
	}
	return ctx.Err()
}
