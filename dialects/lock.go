package dialects

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/claimstore/claimstore/dao"
)

// LockClassID is the first key of every PostgreSQL advisory lock the
// try-lock takes, pg_try_advisory_xact_lock(LockClassID, LockHash(key)):
// the bytes "clms" read as a big-endian int4. It never changes, so
// programs of different versions exclude each other.
const LockClassID int32 = 0x636c6d73

// LockHash is the second key of a PostgreSQL try-lock: the FNV-1a 32-bit
// hash (hash/fnv, New32a) of key's bytes, read as int4 in two's
// complement. Two keys with the same hash exclude each other; they never
// run together.
func LockHash(key string) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int32(h.Sum32())
}

// LockName returns the name a named lock (MySQL and MariaDB GET_LOCK, at
// most 64 characters; SQL Server sp_getapplock, at most 255) is taken
// under for key: "claimstore:" followed by key when that fits in max
// bytes, else "claimstore#" followed by the SHA-256 of key in unpadded
// base64url (43 characters), so a long key keeps a name of its own. The
// two forms cannot collide: they differ in their eleventh character.
func LockName(key string, max int) string {
	if name := "claimstore:" + key; len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	return "claimstore#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// LockTableName is the table of SQLite's lock rows, and LockTableKey its
// primary key.
const (
	LockTableName = "claimstore_locks"
	LockTableKey  = "lock_key"
)

// keyMapping says how a dialect's try-lock names a key.
type keyMapping int

const (
	keyClassHash keyMapping = iota + 1 // (LockClassID, LockHash(key))
	keyName64                          // LockName(key, 64)
	keyName255                         // LockName(key, 255)
	keyPlain                           // the key itself
)

// lockDialect is a dialect's try-lock and unique-index statements, as
// data beside the dialect table.
type lockDialect struct {
	keys keyMapping
	// tryLock returns one row of one integer: 1 when the lock was taken,
	// 0 when another holder has it, anything else an error. On SQLite,
	// whose lock is the write lock of the immediate transaction, it is
	// the lock row's write in that transaction and returns no row.
	tryLock skeleton
	// releaseLock ends a session-scoped lock (MySQL, MariaDB).
	releaseLock skeleton
	// lockTable creates the table of the lock rows (SQLite).
	lockTable skeleton
	// uniqueColumn adds the generated column a unique index needs on a
	// dialect without partial indexes (MySQL, MariaDB).
	uniqueColumn skeleton
	// uniqueIndex creates the unique index over the rows whose status
	// column holds a value: {ident:0} index, {ident:1} key column,
	// {ident:2} status column, {ident:3} generated column, {literal:0}
	// the status value.
	uniqueIndex skeleton
}

var (
	mysqlLock = lockDialect{
		keys:        keyName64,
		tryLock:     mustParse("SELECT GET_LOCK({arg:0}, 0)"),
		releaseLock: mustParse("SELECT RELEASE_LOCK({arg:0})"),
		// NULL unless the row holds the value: a unique index admits any
		// number of NULLs.
		uniqueColumn: mustParse("ALTER TABLE {table} ADD COLUMN {ident:3} {type} AS (CASE WHEN {ident:2} = {literal:0} THEN {ident:1} END) STORED"),
		uniqueIndex:  mustParse("CREATE UNIQUE INDEX {ident:0} ON {table} ({ident:3})"),
	}
	partialUnique = mustParse("CREATE UNIQUE INDEX {ident:0} ON {table} ({ident:1}) WHERE {ident:2} = {literal:0}")
)

var lockTable = map[Name]lockDialect{
	Postgres: {
		keys:        keyClassHash,
		tryLock:     mustParse("SELECT pg_try_advisory_xact_lock({arg:0}, {arg:1})::int"),
		uniqueIndex: partialUnique,
	},
	MySQL:   mysqlLock,
	MariaDB: mysqlLock,
	// CockroachDB has no advisory locks, and YugabyteDB's are off unless
	// a server flag enables them: neither has a try-lock here. Both have
	// partial indexes (CockroachDB "Partial Indexes"; YSQL "CREATE INDEX":
	// WHERE).
	CockroachDB: {uniqueIndex: partialUnique},
	YugabyteDB:  {uniqueIndex: partialUnique},
	SQLite: {
		keys:        keyPlain,
		tryLock:     mustParse("INSERT INTO {table} ({pk}, \"taken_at\") VALUES ({arg:0}, CURRENT_TIMESTAMP) ON CONFLICT ({pk}) DO UPDATE SET \"taken_at\" = excluded.\"taken_at\""),
		lockTable:   mustParse("CREATE TABLE IF NOT EXISTS {table} ({pk} TEXT NOT NULL PRIMARY KEY, \"taken_at\" TEXT NOT NULL)"),
		uniqueIndex: partialUnique,
	},
	SQLServer: {
		keys: keyName255,
		tryLock: mustParse("DECLARE @result int; EXEC @result = sp_getapplock @Resource = {arg:0}, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 0; " +
			"SELECT CASE WHEN @result >= 0 THEN 1 WHEN @result = -1 THEN 0 ELSE @result END"),
		uniqueIndex: partialUnique,
	},
}

// lockArgs returns the bound operands that name key.
func (l lockDialect) lockArgs(key string) []any {
	switch l.keys {
	case keyClassHash:
		return []any{LockClassID, LockHash(key)}
	case keyName64:
		return []any{LockName(key, 64)}
	case keyName255:
		return []any{LockName(key, 255)}
	}
	return []any{key}
}

// own writes the i-th operand of kind 'a' (bound value), 'i' (quoted
// identifier) or 'l' (checked literal) of the statement's own operands.
func (b *builder) own(arg string, kind byte) error {
	i, err := strconv.Atoi(arg)
	if err != nil || i < 0 {
		return fmt.Errorf("dialects: %w: operand %q", dao.ErrInvalidArgument, arg)
	}
	switch {
	case kind == 'a' && i < len(b.req.args):
		b.param(b.req.args[i])
	case kind == 'i' && i < len(b.req.idents):
		b.col(b.req.idents[i])
	case kind == 'l' && i < len(b.req.literals):
		if err := CheckLiteral(b.req.literals[i]); err != nil {
			return err
		}
		if b.d.name == SQLServer {
			b.w("N")
		}
		b.w("'", b.req.literals[i], "'")
	default:
		return fmt.Errorf("dialects: %w: statement lacks operand %c%d", dao.ErrInvalidArgument, kind, i)
	}
	return nil
}

var (
	literalRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	typeRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_ ]*(\([0-9, ]+\))?( [A-Za-z]+)*$`)
)

// CheckLiteral checks a value that a statement writes as a string literal
// because the server takes no bound parameter there, such as the
// predicate of a partial index: 1 to 64 ASCII letters, digits, '_', '.',
// ':' or '-', which need no escaping in any dialect. Other values are an
// error wrapping [dao.ErrInvalidArgument].
func CheckLiteral(v string) error {
	if !literalRE.MatchString(v) {
		return fmt.Errorf("dialects: %w: %q cannot be written as a literal: want 1 to 64 ASCII letters, digits, '_', '.', ':' or '-'", dao.ErrInvalidArgument, v)
	}
	return nil
}

// columnType writes the statement's column type, a type name with an
// optional size such as varchar(191) or bigint unsigned.
func (b *builder) columnType() error {
	if !typeRE.MatchString(b.req.colType) {
		return fmt.Errorf("dialects: %w: column type %q", dao.ErrInvalidArgument, b.req.colType)
	}
	b.w(b.req.colType)
	return nil
}

// renderOwn fills s from req for table t, which may be the zero Table.
func (r Renderer) renderOwn(what string, s skeleton, t Table, req request) (Statement, error) {
	if r.d == nil || !s.defined() {
		return Statement{}, fmt.Errorf("dialects: %w: no %s statement for %s", dao.ErrInvalidArgument, what, r.Dialect())
	}
	b := &builder{d: r.d, t: t, req: req}
	for _, seg := range s.segs {
		if seg.hole == nil {
			b.sb.WriteString(seg.text)
			continue
		}
		if err := seg.hole(b, seg.arg); err != nil {
			return Statement{}, err
		}
	}
	return b.stmt()
}

func (r Renderer) lockData() lockDialect {
	if r.d == nil {
		return lockDialect{}
	}
	return lockTable[r.d.name]
}

// checkKey refuses a key the lockers refuse (dao.CheckLockKey).
func checkKey(key string) error {
	if err := dao.CheckLockKey(key); err != nil {
		return fmt.Errorf("dialects: %w", err)
	}
	return nil
}

// TryLock renders the attempt on the try-lock named key (checked by
// dao.CheckLockKey), which never waits for another holder:
//
//   - PostgreSQL: SELECT pg_try_advisory_xact_lock(LockClassID,
//     LockHash(key))::int, a transaction-level advisory lock released at
//     the transaction's end (PostgreSQL manual, "Advisory Lock
//     Functions").
//   - MySQL and MariaDB: SELECT GET_LOCK(LockName(key, 64), 0), a named
//     lock of the session with a timeout of 0 (MySQL manual, "Locking
//     Functions"), to be released with [Renderer.ReleaseLock] on the same
//     connection. It returns NULL on an error.
//   - SQL Server: sp_getapplock @Resource = LockName(key, 255), @LockMode
//     = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 0, held
//     until the transaction ends ("sp_getapplock (Transact-SQL)": 0 and 1
//     granted, -1 timed out, -2, -3 and -999 errors), mapped to 1, 0 or
//     the negative code.
//
// CockroachDB and YugabyteDB have none (no advisory locks; YugabyteDB's
// are off unless a server flag enables them): an error wrapping
// [errors.ErrUnsupported].
//
// Each returns one row of one integer: 1 taken, 0 held by another,
// anything else (NULL, a negative code) an error. On SQLite the lock is
// the database write lock an immediate transaction takes (BEGIN
// IMMEDIATE), and the statement is the write of the key's row in
// [LockTableName] inside that transaction (an upsert that records when
// the key was last taken), which returns no row.
func (r Renderer) TryLock(key string) (Statement, error) {
	if err := checkKey(key); err != nil {
		return Statement{}, err
	}
	l := r.lockData()
	if r.d != nil && !l.tryLock.defined() {
		return Statement{}, fmt.Errorf("dialects: no try-lock on %s: %w", r.Dialect(), errors.ErrUnsupported)
	}
	return r.renderOwn("try-lock", l.tryLock, Table{Name: LockTableName, PrimaryKey: LockTableKey}, request{args: l.lockArgs(key)})
}

// ReleaseLock renders the release of a session-scoped lock: SELECT
// RELEASE_LOCK(LockName(key, 64)) on MySQL and MariaDB, run on the
// connection that took it before that connection returns to the pool.
// Other dialects release with the transaction and have none: an error
// wrapping [dao.ErrInvalidArgument].
func (r Renderer) ReleaseLock(key string) (Statement, error) {
	if err := checkKey(key); err != nil {
		return Statement{}, err
	}
	l := r.lockData()
	return r.renderOwn("release-lock", l.releaseLock, Table{}, request{args: l.lockArgs(key)})
}

// SessionLock reports whether the dialect's try-lock belongs to the
// session rather than the transaction (MySQL, MariaDB): it must then be
// released with [Renderer.ReleaseLock] before the connection is reused.
func (r Renderer) SessionLock() bool { return r.lockData().releaseLock.defined() }

// LockTable renders the creation of SQLite's lock-row table,
// [LockTableName] (lock_key TEXT PRIMARY KEY, taken_at TEXT), if it does
// not exist. Other dialects have none: an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) LockTable() (Statement, error) {
	return r.renderOwn("lock-table", r.lockData().lockTable, Table{Name: LockTableName, PrimaryKey: LockTableKey}, request{})
}

// UniqueWhere describes a unique index over only the rows whose status
// column holds one value: "at most one queued row per key".
type UniqueWhere struct {
	// Index is the index name.
	Index string
	// Key is the column that must be unique among those rows.
	Key string
	// Status is the column whose value selects the rows.
	Status string
	// Value is the status value, written as a literal (a partial index's
	// predicate takes no bound parameter): it must pass [CheckLiteral].
	Value string
	// Column is the generated column of MySQL and MariaDB, and ColumnType
	// its type (the key column's type).
	Column, ColumnType string
}

// UniqueWhere renders the statements that create the index u describes
// on table t, in order:
//
//   - PostgreSQL and SQLite: CREATE UNIQUE INDEX … (key) WHERE status =
//     'value', a partial index (PostgreSQL manual, "Partial Indexes";
//     SQLite, "Partial Indexes").
//   - SQL Server: the same statement makes a filtered index, with the
//     value as N'value' ("Create filtered indexes").
//   - MySQL and MariaDB, which have no partial index: a STORED generated
//     column, CASE WHEN status = 'value' THEN key END, NULL on every other
//     row, and a unique index on it, which admits any number of NULLs
//     (MySQL manual, "CREATE TABLE and Generated Columns", "Unique
//     Indexes").
//
// Identifiers are quoted; a value [CheckLiteral] refuses, a missing name
// or a column type that is not a plain type name is an error wrapping
// [dao.ErrInvalidArgument].
func (r Renderer) UniqueWhere(t Table, u UniqueWhere) ([]Statement, error) {
	if t.Name == "" || u.Index == "" || u.Key == "" || u.Status == "" {
		return nil, fmt.Errorf("dialects: %w: unique index needs a table, an index name, a key column and a status column", dao.ErrInvalidArgument)
	}
	if err := CheckLiteral(u.Value); err != nil {
		return nil, err
	}
	l := r.lockData()
	req := request{idents: []string{u.Index, u.Key, u.Status, u.Column}, literals: []string{u.Value}, colType: u.ColumnType}
	var out []Statement
	if l.uniqueColumn.defined() {
		if strings.TrimSpace(u.Column) == "" {
			return nil, fmt.Errorf("dialects: %w: %s needs a generated column name", dao.ErrInvalidArgument, r.Dialect())
		}
		st, err := r.renderOwn("unique column", l.uniqueColumn, t, req)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	st, err := r.renderOwn("unique index", l.uniqueIndex, t, req)
	if err != nil {
		return nil, err
	}
	return append(out, st), nil
}
