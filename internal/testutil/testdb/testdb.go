// Package testdb opens the databases the project's tests run against:
// SQLite in a temporary directory always, and PostgreSQL and MySQL/MariaDB
// servers from environment variables with the local servers as defaults.
//
// A server that cannot be reached skips the test with a message that says
// how to start it, unless CLAIMSTORE_REQUIRE names the backend (a comma
// separated list such as "postgres,mysql", or "all"): then the test fails.
// CI sets CLAIMSTORE_REQUIRE so a backend is never skipped there.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	// The backends of the handles this package opens, so that
	// sqlstore.New accepts them.
	_ "github.com/claimstore/claimstore/adapters/mysql"
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"
	"github.com/claimstore/claimstore/adapters/sqlstore/sqlstoretest"
	"github.com/ncruces/go-sqlite3/gormlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Environment variables read by this package.
const (
	EnvPostgres = "CLAIMSTORE_POSTGRES_DSN"
	EnvMySQL    = "CLAIMSTORE_MYSQL_DSN"
	EnvRequire  = "CLAIMSTORE_REQUIRE"
)

// Default DSNs: the local servers with the project's test database.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC&interpolateParams=true"
)

// PostgresDSN returns $CLAIMSTORE_POSTGRES_DSN or [DefaultPostgresDSN].
func PostgresDSN() string { return env(EnvPostgres, DefaultPostgresDSN) }

// MySQLDSN returns $CLAIMSTORE_MYSQL_DSN or [DefaultMySQLDSN].
func MySQLDSN() string { return env(EnvMySQL, DefaultMySQLDSN) }

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Required reports whether CLAIMSTORE_REQUIRE names backend (or "all").
// "mariadb" and "mysql" name the same server variable.
func Required(backend string) bool {
	names := strings.Split(os.Getenv(EnvRequire), ",")
	for i := range names {
		names[i] = strings.TrimSpace(strings.ToLower(names[i]))
	}
	if slices.Contains(names, "all") || slices.Contains(names, backend) {
		return true
	}
	if backend == "mysql" || backend == "mariadb" {
		return slices.Contains(names, "mysql") || slices.Contains(names, "mariadb")
	}
	return false
}

var howToStart = map[string]string{
	"postgres": "start PostgreSQL (make up, or: pg_ctlcluster <version> main start) and create database test, or set " + EnvPostgres,
	"mysql":    "start MySQL or MariaDB (make up, or: mariadbd) and create database test, or set " + EnvMySQL,
}

// Unreachable skips t for backend ("postgres" or "mysql"), whose server
// could not be reached with err, with a message that says how to start
// it; when CLAIMSTORE_REQUIRE names backend it fails t instead.
func Unreachable(t testing.TB, backend string, err error) {
	t.Helper()
	msg := fmt.Sprintf("%s unreachable: %v; to run these tests %s", backend, err, howToStart[backend])
	if Required(backend) {
		t.Fatalf("%s (required by %s)", msg, EnvRequire)
	}
	t.Skip(msg)
}

// Config is the GORM configuration tests use: quiet logger, no default
// transaction around single writes.
func Config() *gorm.Config {
	return &gorm.Config{Logger: logger.Default.LogMode(logger.Silent), SkipDefaultTransaction: true}
}

func ping(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return sqlDB.PingContext(ctx)
}

func open(t testing.TB, backend string, d gorm.Dialector) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(d, Config())
	if err == nil {
		err = ping(db)
	}
	if err != nil {
		Unreachable(t, backend, err)
	}
	return CloseAtCleanup(t, db)
}

// CloseAtCleanup closes db's connection pool when t ends, after the
// cleanups registered later (which run first: dropping a table needs the
// pool), and returns db.
func CloseAtCleanup(t testing.TB, db *gorm.DB) *gorm.DB {
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

// Postgres opens the PostgreSQL test database, or skips (fails when
// required) when it cannot be reached. The pool is closed at cleanup.
func Postgres(t testing.TB) *gorm.DB { return open(t, "postgres", postgres.Open(PostgresDSN())) }

// MySQL opens the MySQL/MariaDB test database, or skips (fails when
// required) when it cannot be reached. The pool is closed at cleanup.
func MySQL(t testing.TB) *gorm.DB { return open(t, "mysql", mysql.Open(MySQLDSN())) }

// SQLiteDSN returns a DSN for the github.com/ncruces/go-sqlite3 driver for
// a database file at path with the settings the project recommends for
// concurrent workers, the same as sqlstore.SQLiteDSN: a 5 s busy timeout,
// WAL journal, synchronous NORMAL, BEGIN IMMEDIATE transactions, and times
// stored as text in sqlstore.SQLiteTimeLayout. (This package does not
// import sqlstore, whose own tests import this package.)
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate" +
		"&_timefmt=" + url.QueryEscape("2006-01-02 15:04:05.999999999-07:00")
}

// SQLite opens a fresh SQLite database file in a temporary directory.
func SQLite(t testing.TB) *gorm.DB {
	return open(t, "sqlite", gormlite.Open(SQLiteDSN(filepath.Join(t.TempDir(), "test.db"))))
}

// Backend is one SQL backend a test runs on: its name (a subtest name)
// and the function that opens its test database (skipping the test, or
// failing it where the backend is required, without a server).
type Backend struct {
	Name string
	Open func(testing.TB) *gorm.DB
}

// SQLBackends are the SQL backends every machine of the project runs:
// SQLite, PostgreSQL and MariaDB (named "mariadb", opened with [MySQL]).
var SQLBackends = []Backend{{"sqlite", SQLite}, {"postgres", Postgres}, {"mariadb", MySQL}}

// Table returns a fresh table name, prefix_<random>, and drops the table at
// cleanup, also when the test failed; a drop that fails fails the test,
// so that no run leaves a table behind unnoticed.
func Table(t testing.TB, db *gorm.DB, prefix string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + "_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if err := db.Session(&gorm.Session{NewDB: true, Context: context.Background()}).Migrator().DropTable(name); err != nil {
			t.Errorf("testdb: drop table %s: %v", name, err)
		}
	})
	return name
}

// HoldLock is [sqlstoretest.HoldLock]: it holds, from a connection of db
// a store's claim does not use, the lock a competing writer would hold on
// row id of table (SQLite: the database write lock) until release.
func HoldLock(t testing.TB, db *gorm.DB, table string, id int64) (release func()) {
	t.Helper()
	return sqlstoretest.HoldLock(t, db, table, id)
}

// Reopen opens a second connection pool over the database of db, as
// another process would reach it: the same SQLite file (PRAGMA
// database_list), or the PostgreSQL or MySQL/MariaDB test database. The
// pool is closed at cleanup.
func Reopen(t testing.TB, db *gorm.DB) *gorm.DB {
	t.Helper()
	switch name := db.Dialector.Name(); name {
	case "sqlite":
		return open(t, "sqlite", gormlite.Open(SQLiteDSN(sqlstoretest.SQLiteFile(t, db))))
	case "postgres":
		return Postgres(t)
	case "mysql":
		return MySQL(t)
	default:
		t.Fatalf("testdb: reopen: unknown dialect %s", name)
		return nil
	}
}
