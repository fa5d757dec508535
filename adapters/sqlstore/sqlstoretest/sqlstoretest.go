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
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/conformance"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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
//
// The user of db needs the right to create and drop tables. Rows,
// Workers and Skip are left zero; set them on the result to resize the
// concurrency test or to opt out of checks.
func Harness(db *gorm.DB, opts ...sqlstore.Option) conformance.Harness {
	return conformance.Harness{
		NewStore: modelStore[conformance.Job](db, opts),
		Models:   Models(db, opts...),
		HoldLock: func(t *testing.T, ds dao.Store[conformance.Job], id int64) func() {
			t.Helper()
			var table dialects.Table
			if a, ok := ds.(interface{ As(any) bool }); !ok || !a.As(&table) {
				t.Fatalf("sqlstoretest: HoldLock got a %T, not a store of this harness", ds)
			}
			return HoldLock(t, db, table.Name, id)
		},
	}
}

// Models returns the stores of the conformance models section over db:
// each function creates a table with a fresh name for its model with
// dao.Table.Migrate, returns a store over it built with opts, and drops
// the table when the test ends.
func Models(db *gorm.DB, opts ...sqlstore.Option) *conformance.ModelStores {
	return &conformance.ModelStores{
		Ticket:         modelStore[conformance.Ticket](db, opts),
		PrefixedTicket: modelStore[conformance.Ticket](db, opts),
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
// manual, BEGIN TRANSACTION), elsewhere a row lock on the row of table
// whose id column is id (SELECT … FOR UPDATE in an open transaction;
// PostgreSQL manual, SELECT → The Locking Clause; MySQL manual, Locking
// Reads). Tests use it to force a lost race on a claim that has no
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
	err := tx.Table(table).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).
		Where("id = ?", id).Pluck("id", &locked).Error
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
