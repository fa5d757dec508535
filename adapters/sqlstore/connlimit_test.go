package sqlstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// limitedName returns a fresh name for a database role or user of a
// connection-limit test.
func limitedName(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "claimstore_limit_" + hex.EncodeToString(b[:])
}

// checkLimitError fails t unless err, the error of a connection past a
// limit, is dao.ErrUnavailable, retryable, and carries the native error
// check accepts.
func checkLimitError(t *testing.T, what string, err error, check func(error) bool) {
	t.Helper()
	if !errors.Is(err, dao.ErrUnavailable) || !dao.IsRetryable(err) {
		t.Errorf("%s: %v; want ErrUnavailable, retryable", what, err)
	}
	if !check(err) {
		t.Errorf("%s: %v does not carry the server's connection-limit error", what, err)
	}
}

// A PostgreSQL role WITH CONNECTION LIMIT 1 gets SQLSTATE 53300 ("too many
// connections for role") for its second connection, when Open connects
// and when a pool opens a second connection for a statement: both are
// ErrUnavailable and retryable, with the *pgconn.PgError reachable.
func TestPostgresConnectionLimitIsUnavailable(t *testing.T) {
	admin := testdb.Postgres(t)
	role := limitedName(t)
	// role is a fresh name of [a-z0-9_] made here, never input.
	if err := admin.Exec(`CREATE ROLE "` + role + `" LOGIN CONNECTION LIMIT 1`).Error; err != nil {
		t.Fatalf("create role: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ?", role)
		if err := admin.Exec(`DROP ROLE IF EXISTS "` + role + `"`).Error; err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := "postgres://" + role + "@127.0.0.1:5432/test?sslmode=disable&connect_timeout=5"
	is53300 := func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "53300"
	}

	checkConnectionLimit(t, ctx, "postgres", dsn, role, is53300)
}

// A MariaDB or MySQL user WITH MAX_USER_CONNECTIONS 1 is refused a second
// connection (1226 ER_USER_LIMIT_REACHED, or 1203 on some versions),
// when Open connects and when a pool opens a second connection for a
// statement: both are ErrUnavailable and retryable, with the
// *mysql.MySQLError reachable.
func TestMySQLUserConnectionLimitIsUnavailable(t *testing.T) {
	admin := testdb.MySQL(t)
	user := limitedName(t)
	// user is a fresh name of [a-z0-9_] made here, never input.
	account := "'" + user + "'@'%'"
	if err := admin.Exec("CREATE USER " + account + " WITH MAX_USER_CONNECTIONS 1").Error; err != nil {
		t.Fatalf("create user: %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Exec("DROP USER IF EXISTS " + account).Error; err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	if err := admin.Exec("GRANT SELECT ON test.* TO " + account).Error; err != nil {
		t.Fatalf("grant: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := user + "@tcp(127.0.0.1:3306)/test?timeout=5s"
	isLimit := func(err error) bool {
		var myErr *gomysql.MySQLError
		return errors.As(err, &myErr) && (myErr.Number == 1226 || myErr.Number == 1203)
	}

	checkConnectionLimit(t, ctx, "mysql", dsn, user, isLimit)
}

// checkConnectionLimit opens backend's dsn, whose account (who) may hold
// one connection: a second Open must fail, and so must a statement for
// which the first handle's pool has to open a second connection, each
// with an error that is ErrUnavailable, retryable, and matches isLimit.
func checkConnectionLimit(t *testing.T, ctx context.Context, backend, dsn, who string, isLimit func(error) bool) {
	t.Helper()
	first, err := sqlstore.Open(ctx, backend, dsn)
	if err != nil {
		t.Fatalf("first connection of %s: %v", who, err)
	}
	defer closeDB(first)
	second, err := sqlstore.Open(ctx, backend, dsn)
	if err == nil {
		closeDB(second)
		t.Fatalf("a second connection of %s, whose limit is 1, was accepted", who)
	}
	checkLimitError(t, "Open past the account's connection limit", err, isLimit)

	// A statement for which the pool must open a second connection.
	sqlDB, err := first.DB()
	if err != nil {
		t.Fatal(err)
	}
	held, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatalf("take the one connection: %v", err)
	}
	defer held.Close()
	err = sqlstore.MapError(first.WithContext(ctx).Exec("SELECT 1").Error)
	checkLimitError(t, "statement needing a second connection", err, isLimit)
}

// The other connection-limit and server-resource codes, and a Galera
// node's refusal while it is not ready, which the test servers cannot be
// made to answer on demand, map as the forced ones do; those no retry
// cures stay unmapped.
func TestMapErrorResourceCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{&pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}, dao.ErrUnavailable},
		{&pgconn.PgError{Code: "53000"}, dao.ErrUnavailable},
		{&pgconn.PgError{Code: "53200"}, dao.ErrUnavailable},
		{&pgconn.PgError{Code: "53100"}, nil},
		{&pgconn.PgError{Code: "53400"}, nil},
		{&pgconn.PgError{Code: "28P01"}, nil},
		{&gomysql.MySQLError{Number: 1040}, dao.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1041}, dao.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1203}, dao.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1226}, dao.ErrUnavailable},
		{&gomysql.MySQLError{Number: 2006}, dao.ErrUnavailable},
		{&gomysql.MySQLError{Number: 2013}, dao.ErrUnavailable},
		// A Galera node not ready for clients (joining, or cut off from
		// the cluster's primary component).
		{&gomysql.MySQLError{Number: 1047, SQLState: [5]byte{'0', '8', 'S', '0', '1'}, Message: "WSREP has not yet prepared node for application use"}, dao.ErrUnavailable},
		// A Galera node that lost the primary component at commit: the
		// transaction was rolled back.
		{&gomysql.MySQLError{Number: 1180, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Error while appending streaming replication fragment(provider status: Not connected to Primary Component)"}, dao.ErrUnavailable},
		{&gomysql.MySQLError{Number: 1045}, nil},
	} {
		got := sqlstore.MapError(c.err)
		switch {
		case c.want == nil && got != c.err:
			t.Errorf("MapError(%v) = %v; want it unmapped", c.err, got)
		case c.want != nil && (!errors.Is(got, c.want) || !dao.IsRetryable(got) || !errors.Is(got, c.err)):
			t.Errorf("MapError(%v) = %v; want %v, retryable, wrapping the native error", c.err, got, c.want)
		}
	}
}
