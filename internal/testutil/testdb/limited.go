package testdb

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// limitedAccount returns a fresh name for a database role or user that
// may hold a limited number of connections.
func limitedAccount(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "claimstore_limit_" + hex.EncodeToString(b[:])
}

// PostgresLimited opens the PostgreSQL test database as a new role WITH
// CONNECTION LIMIT limit, which may read and write (SELECT, INSERT,
// UPDATE, DELETE) the tables named, made by admin (a handle of
// [Postgres]). A connection past the limit is refused with SQLSTATE 53300
// "too many connections for role", as one past max_connections is with
// "sorry, too many clients already". At cleanup the handle is closed, the
// role's sessions are ended, and its grants and the role are dropped,
// before the tables' own cleanups when they were registered first.
func PostgresLimited(t testing.TB, admin *gorm.DB, limit int, tables ...string) *gorm.DB {
	t.Helper()
	role := limitedAccount(t)
	// role is a fresh name of [a-z0-9_] made here and the table names
	// come from [Table]: neither is input.
	if err := admin.Exec(`CREATE ROLE "` + role + `" LOGIN CONNECTION LIMIT ` + strconv.Itoa(limit)).Error; err != nil {
		t.Fatalf("testdb: create role: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ?", role)
		if err := admin.Exec(`DROP OWNED BY "` + role + `"`).Error; err != nil {
			t.Errorf("testdb: drop the grants of role %s: %v", role, err)
		}
		if err := admin.Exec(`DROP ROLE IF EXISTS "` + role + `"`).Error; err != nil {
			t.Errorf("testdb: drop role %s: %v", role, err)
		}
	})
	for _, table := range tables {
		if err := admin.Exec(`GRANT SELECT, INSERT, UPDATE, DELETE ON "` + table + `" TO "` + role + `"`).Error; err != nil {
			t.Fatalf("testdb: grant %s to %s: %v", table, role, err)
		}
	}
	dsn := PostgresDSN()
	if u, err := url.Parse(dsn); err == nil && strings.Contains(dsn, "://") {
		u.User = url.User(role)
		dsn = u.String()
	} else {
		dsn += " user=" + role + " password=''"
	}
	return open(t, "postgres", postgres.Open(dsn))
}

// MySQLLimited opens the MySQL/MariaDB test database as a new user WITH
// MAX_USER_CONNECTIONS limit, which may read and write (SELECT, INSERT,
// UPDATE, DELETE) the tables named, made by admin (a handle of [MySQL]).
// A connection past the limit is refused with error 1226
// ER_USER_LIMIT_REACHED (1203 on some versions), as one past
// max_connections is with 1040. At cleanup the handle is closed and the
// user dropped.
func MySQLLimited(t testing.TB, admin *gorm.DB, limit int, tables ...string) *gorm.DB {
	t.Helper()
	user := limitedAccount(t)
	cfg, err := gomysql.ParseDSN(MySQLDSN())
	if err != nil {
		t.Fatalf("testdb: %s: %v", EnvMySQL, err)
	}
	// user is a fresh name of [a-z0-9_] made here, and the database and
	// table names are the test's own: none is input.
	account := "'" + user + "'@'%'"
	if err := admin.Exec("CREATE USER " + account + " WITH MAX_USER_CONNECTIONS " + strconv.Itoa(limit)).Error; err != nil {
		t.Fatalf("testdb: create user: %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Exec("DROP USER IF EXISTS " + account).Error; err != nil {
			t.Errorf("testdb: drop user %s: %v", user, err)
		}
	})
	for _, table := range tables {
		if err := admin.Exec("GRANT SELECT, INSERT, UPDATE, DELETE ON `" + cfg.DBName + "`.`" + table + "` TO " + account).Error; err != nil {
			t.Fatalf("testdb: grant %s to %s: %v", table, user, err)
		}
	}
	cfg.User, cfg.Passwd = user, ""
	return open(t, "mysql", mysql.Open(cfg.FormatDSN()))
}
