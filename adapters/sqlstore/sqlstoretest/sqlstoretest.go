// Package sqlstoretest provides what a test needs to run the conformance
// suite against a SQL database through sqlstore, in the manner of
// net/http/httptest: [Harness] turns a *gorm.DB into a complete
// conformance.Harness, and [HoldLock] holds the lock a competing writer
// would hold. It is meant for _test.go files; the production package
// sqlstore does not import it, nor the conformance package.
//
//	func TestClaimstoreConformance(t *testing.T) {
//		db, err := sqlstore.Open(context.Background(), "postgres", os.Getenv("DATABASE_URL"))
//		if err != nil {
//			t.Fatal(err)
//		}
//		conformance.Run(t, sqlstoretest.Harness(db))
//	}
package sqlstoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// Harness returns a complete [conformance.Harness] over db (PostgreSQL,
// MySQL, MariaDB, SQLite or SQL Server, as [sqlstore.New] accepts):
//
//   - NewStore creates, for each test, a table with a fresh name
//     (claimstore_conf_<16 hex digits>) with dao.Table.Migrate,
//     returns a store over it built with opts, and drops the table when
//     the test ends, also when it fails. A WithTable among opts is
//     overridden.
//   - HoldLock holds, from a connection the store's claims do not use, the
//     lock a competing writer would hold, as [HoldLock] does.
//   - Leases creates, for each leader check, a lease table with a fresh
//     name (claimstore_leaders_<16 hex digits>) and returns a
//     [sqlstore.Leases] over it; the table is dropped when the check ends.
//   - KillLockHolder ends the session of a try-lock's transaction, as
//     [KillSession] does, on PostgreSQL, MySQL and MariaDB. On SQLite,
//     whose holder runs in the test's own process, Skip names
//     conformance.CheckLockHolderKilled instead.
//
// The coordination section's try-lock is the store's own (its TryLock).
// The user of db needs the right to create and drop tables, and to end
// sessions of its own user. Rows and Workers are left zero; set them on
// the result to resize the concurrency test, or add to Skip to opt out of
// checks.
func Harness(db *gorm.DB, opts ...sqlstore.Option) conformance.Harness {
	h := conformance.Harness{
		NewStore: modelStore[conformance.Job](db, opts),
		Models:   Models(db, opts...),
		HoldLock: func(t *testing.T, ds dao.Store[conformance.Job], id int64) func() {
			t.Helper()
			var table dialects.Table
			if a, ok := ds.(dao.Aser); !ok || !a.As(&table) {
				t.Fatalf("sqlstoretest: HoldLock got a %T, not a store of this harness", ds)
			}
			return HoldLock(t, db, table.Name, id)
		},
		Leases: func(t *testing.T) coord.LeaseStore {
			t.Helper()
			return Leases(t, db)
		},
	}
	switch db.Dialector.Name() {
	case "postgres", "mysql":
		h.KillLockHolder = func(t *testing.T, tx any) { KillSession(t, db, tx) }
	case "sqlite":
		h.Skip = append(h.Skip, conformance.CheckLockHolderKilled)
	}
	return h
}

// KillSession ends, from a connection of db, the database session that
// runs tx, a *gorm.DB inside a transaction on the same server: PostgreSQL
// pg_terminate_backend(pg_backend_pid()) ("Server Signaling Functions"),
// MySQL and MariaDB KILL CONNECTION_ID() ("KILL Statement"). A failure
// fails t.
func KillSession(t testing.TB, db *gorm.DB, tx any) {
	t.Helper()
	g, ok := tx.(*gorm.DB)
	if !ok || g == nil {
		t.Fatalf("sqlstoretest: KillSession got a %T, not a *gorm.DB", tx)
	}
	var id int64
	switch db.Dialector.Name() {
	case "postgres":
		if err := g.Raw("SELECT pg_backend_pid()").Scan(&id).Error; err != nil {
			t.Fatalf("sqlstoretest: pg_backend_pid: %v", err)
		}
		var ok bool
		if err := db.Raw("SELECT pg_terminate_backend(?)", id).Scan(&ok).Error; err != nil || !ok {
			t.Fatalf("sqlstoretest: pg_terminate_backend(%d) = %v, %v", id, ok, err)
		}
	case "mysql":
		if err := g.Raw("SELECT CONNECTION_ID()").Scan(&id).Error; err != nil {
			t.Fatalf("sqlstoretest: CONNECTION_ID: %v", err)
		}
		// KILL takes no placeholder; id is the server's own integer.
		if err := db.Exec("KILL " + strconv.FormatInt(id, 10)).Error; err != nil {
			t.Fatalf("sqlstoretest: KILL %d: %v", id, err)
		}
	default:
		t.Fatalf("sqlstoretest: KillSession does not support %s", db.Dialector.Name())
	}
}

// Models returns the stores of the conformance models section over db:
// each function creates a table with a fresh name for its model with
// dao.Table.Migrate, returns a store over it built with opts, and drops
// the table when the test ends. PrefixedTicket's table is named by a
// copy of db whose naming strategy has a fresh table prefix
// (claimstore_conf_<16 hex digits>_tickets), with
// no WithTable.
func Models(db *gorm.DB, opts ...sqlstore.Option) *conformance.ModelStores {
	return &conformance.ModelStores{
		Ticket:         modelStore[conformance.Ticket](db, opts),
		PrefixedTicket: prefixedStore(db, opts),
		UUIDTicket:     modelStore[conformance.UUIDTicket](db, opts),
		V7Ticket:       modelStore[conformance.V7Ticket](db, opts),
		SoftJob:        modelStore[conformance.SoftJob](db, opts),
	}
}

// modelStore returns a function that opens a store of T over a fresh
// migrated table of db, dropped when the test ends.
func modelStore[T any](db *gorm.DB, opts []sqlstore.Option) func(t *testing.T) dao.Store[T] {
	return func(t *testing.T) dao.Store[T] {
		t.Helper()
		table := tableName(t)
		t.Cleanup(func() {
			if err := db.Migrator().DropTable(table); err != nil {
				t.Errorf("sqlstoretest: drop table %s: %v", table, err)
			}
		})
		s, err := sqlstore.New[T](db, append(opts[:len(opts):len(opts)], sqlstore.WithTable(table))...)
		if err != nil {
			t.Fatalf("sqlstoretest: %v", err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("sqlstoretest: %v", err)
		}
		return s
	}
}

// Leases returns a [sqlstore.Leases] over a new lease table of db with a
// fresh name (claimstore_leaders_<16 hex digits>), dropped when t ends.
// A failure fails t.
func Leases(t testing.TB, db *gorm.DB) *sqlstore.Leases {
	t.Helper()
	table := strings.Replace(tableName(t), "claimstore_conf_", "claimstore_leaders_", 1)
	l, err := sqlstore.NewLeases(db, table)
	if err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Migrator().DropTable(table); err != nil {
			t.Errorf("sqlstoretest: drop table %s: %v", table, err)
		}
	})
	if err := l.Migrate(context.Background()); err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	return l
}

// prefixedStore returns a function that opens a store of
// conformance.Ticket over a copy of db whose naming strategy has a fresh
// table prefix, so the store's table name comes from the naming strategy;
// the table is dropped when the test ends.
func prefixedStore(db *gorm.DB, opts []sqlstore.Option) func(t *testing.T) dao.Store[conformance.Ticket] {
	return func(t *testing.T) dao.Store[conformance.Ticket] {
		t.Helper()
		prefix := tableName(t) + "_"
		pdb := withTablePrefix(db, prefix)
		// A WithTable among opts would name the table; WithTable("")
		// gives the naming back to the naming strategy.
		s, err := sqlstore.New[conformance.Ticket](pdb, append(opts[:len(opts):len(opts)], sqlstore.WithTable(""))...)
		if err != nil {
			t.Fatalf("sqlstoretest: %v", err)
		}
		var table dialects.Table
		if !s.As(&table) || table.Name != prefix+"tickets" {
			t.Fatalf("sqlstoretest: the store's table is %q, want %q", table.Name, prefix+"tickets")
		}
		t.Cleanup(func() {
			if err := db.Migrator().DropTable(table.Name); err != nil {
				t.Errorf("sqlstoretest: drop table %s: %v", table.Name, err)
			}
		})
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("sqlstoretest: %v", err)
		}
		return s
	}
}

// withTablePrefix returns a session of db whose naming strategy puts
// prefix before every table name (before the prefix db's strategy
// already has), on db's connection pool and with the rest of db's
// configuration. db is left unchanged. db's naming strategy must be a
// schema.NamingStrategy (GORM's default); another Namer is kept as it is.
//
// The session shares GORM's schema cache with db, which is keyed by model
// type: a model parsed through one of them has the table and column
// names of whichever parsed it first. claimstore's stores name tables
// explicitly and parse models per naming strategy, and a table prefix
// leaves column names unchanged, so the stores of both are unaffected;
// a caller that runs GORM's own finders on both should open a second
// *gorm.DB instead.
func withTablePrefix(db *gorm.DB, prefix string) *gorm.DB {
	pdb := db.Session(&gorm.Session{NewDB: true})
	if ns, ok := db.NamingStrategy.(schema.NamingStrategy); ok {
		ns.TablePrefix = prefix + ns.TablePrefix
		pdb.Config.NamingStrategy = ns
	}
	return pdb
}

// tableName returns a fresh table name.
func tableName(t testing.TB) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("sqlstoretest: table name: %v", err)
	}
	return "claimstore_conf_" + hex.EncodeToString(b[:])
}

// HoldLock takes, on a connection of db that a store's claim does not use,
// the lock a competing writer would hold, and keeps it until release is
// called: on SQLite the database write lock (BEGIN IMMEDIATE; SQLite
// manual, BEGIN TRANSACTION), on SQL Server an update lock on the row of
// table whose id column is id (SELECT … WITH (UPDLOCK, ROWLOCK) in an open
// transaction; "Table Hints (Transact-SQL)"), elsewhere a row lock on it
// (SELECT … FOR UPDATE in an open transaction; PostgreSQL manual, SELECT →
// The Locking Clause; MySQL manual, Locking Reads). Tests use it to force a lost race on a claim that has no
// candidate stage, or that waits on SQLite's write lock. A failure to take
// the lock fails t; release rolls the transaction back.
func HoldLock(t testing.TB, db *gorm.DB, table string, id int64) (release func()) {
	t.Helper()
	ctx := context.Background()
	if db.Dialector.Name() == "sqlite" {
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			conn.Close()
			t.Fatalf("BEGIN IMMEDIATE: %v", err)
		}
		return func() {
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Errorf("ROLLBACK: %v", err)
			}
			conn.Close()
		}
	}
	tx := db.WithContext(ctx).Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	var locked []int64
	var err error
	if db.Dialector.Name() == "sqlserver" {
		// GORM's SQL Server dialector has no locking clause: an update
		// lock on the row, held to the end of the transaction ("Table
		// Hints (Transact-SQL)": UPDLOCK, ROWLOCK), is what the fast
		// path's READPAST passes over.
		r, rerr := dialects.NewRenderer(dialects.SQLServer)
		if rerr != nil {
			tx.Rollback()
			t.Fatal(rerr)
		}
		err = tx.Raw("SELECT id FROM "+r.QuoteTable(table)+" WITH (UPDLOCK, ROWLOCK) WHERE id = ?", id).Scan(&locked).Error
	} else {
		err = tx.Table(table).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
			Where("id = ?", id).Pluck("id", &locked).Error
	}
	if err != nil || len(locked) != 1 {
		tx.Rollback()
		t.Fatalf("lock row %d of %s: %v (got %v)", id, table, err, locked)
	}
	return func() {
		if err := tx.Rollback().Error; err != nil {
			t.Errorf("rollback: %v", err)
		}
	}
}

// Log returns a [sqlstore.Log] over new log tables of db with a fresh
// base name (claimstore_log_<16 hex digits>), migrated, and drops the
// three tables when t ends. On a database that does not offer the log
// (MySQL, MariaDB) it skips t. Other failures fail t.
func Log(t testing.TB, db *gorm.DB) *sqlstore.Log {
	t.Helper()
	base := strings.Replace(tableName(t), "claimstore_conf_", "claimstore_log_", 1)
	l, err := sqlstore.NewLog(db, base)
	if err != nil {
		if !dialects.LogOffered(dialectOf(t, db)) {
			t.Skipf("sqlstoretest: %v", err)
		}
		t.Fatalf("sqlstoretest: %v", err)
	}
	t.Cleanup(func() {
		tb := l.Tables()
		for _, name := range []string{tb.Log, tb.Cursors, tb.Dead} {
			if err := db.Session(&gorm.Session{NewDB: true, Context: context.Background()}).Migrator().DropTable(name); err != nil {
				t.Errorf("sqlstoretest: drop table %s: %v", name, err)
			}
		}
	})
	if err := l.Migrate(context.Background()); err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	return l
}

// dialectOf detects db's dialect; a failure fails t.
func dialectOf(t testing.TB, db *gorm.DB) dialects.Name {
	t.Helper()
	n, err := dialects.Detect(context.Background(), db)
	if err != nil {
		t.Fatalf("sqlstoretest: detect dialect: %v", err)
	}
	return n
}

// Node returns a [conformance.Node] through db, another way into the
// database of a harness (for a cluster whose every node takes writes, a
// pool on another node): its Store opens a store of the table of a
// store this package's Harness made, built with opts, and its Leases a
// [sqlstore.Leases] over the table of one Leases made; neither creates
// nor drops anything. A store or lease store of another kind fails t.
func Node(db *gorm.DB, opts ...sqlstore.Option) conformance.Node {
	return conformance.Node{
		Store: func(t *testing.T, s dao.Store[conformance.Job]) dao.Store[conformance.Job] {
			t.Helper()
			return reopen[conformance.Job](t, db, tableOf(t, s), opts)
		},
		Leases: func(t *testing.T, ls coord.LeaseStore) coord.LeaseStore {
			t.Helper()
			l, ok := ls.(*sqlstore.Leases)
			if !ok {
				t.Fatalf("sqlstoretest: Node.Leases got a %T, not a *sqlstore.Leases", ls)
			}
			o, err := sqlstore.NewLeases(db, l.Table())
			if err != nil {
				t.Fatalf("sqlstoretest: %v", err)
			}
			return o
		},
	}
}

// tableOf returns the table of s, a store of sqlstore; another store
// fails t.
func tableOf(t *testing.T, s any) string {
	t.Helper()
	var table dialects.Table
	if a, ok := s.(dao.Aser); !ok || !a.As(&table) {
		t.Fatalf("sqlstoretest: got a %T, not a store of sqlstore", s)
	}
	return table.Name
}

// reopen returns a store of T over the existing table of db, built with
// opts (a WithTable among them is overridden).
func reopen[T any](t *testing.T, db *gorm.DB, table string, opts []sqlstore.Option) *dao.Table[T] {
	t.Helper()
	s, err := sqlstore.New[T](db, append(opts[:len(opts):len(opts)], sqlstore.WithTable(table))...)
	if err != nil {
		t.Fatalf("sqlstoretest: %v", err)
	}
	return s
}
