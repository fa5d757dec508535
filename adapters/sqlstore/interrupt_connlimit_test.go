package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	gomysql "github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
)

// A MariaDB or MySQL claim behind another session's row lock returns at
// its deadline even when the account has no connection left for the KILL
// QUERY that ends it: the store's user may hold 3 connections, its pool
// one, and another client of the same user holds the rest while the claim
// waits. The KILL runs on the connection the store kept for it since its
// first claim. Before, the KILL opened a new connection, which the server
// refused (1226 ER_USER_LIMIT_REACHED), and the claim waited for the
// store's lock-wait limit (10 s here).
func TestMySQLClaimInterruptedWithAccountOutOfConnections(t *testing.T) {
	admin := testdb.MySQL(t)
	table := testdb.Table(t, admin, "killconn")
	adminStore, err := sqlstore.New[dueJob](admin, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := adminStore.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows := []*dueJob{{Status: "queued"}, {Status: "queued"}}
	if err := adminStore.Create(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	const limit = 3
	limited := testdb.MySQLLimited(t, admin, limit, table)
	pool, err := limited.DB()
	if err != nil {
		t.Fatal(err)
	}
	pool.SetMaxOpenConns(1)
	s, err := sqlstore.New[dueJob](limited, sqlstore.WithTable(table), sqlstore.WithStrategy(dao.StrategyPortable),
		sqlstore.WithLockWaitLimit(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	claim := func(ctx context.Context, id int64) ([]dueJob, error) {
		now := time.Now()
		return s.Claim(ctx, dao.ClaimRequest{
			Where: dao.And(dao.Eq("id", id), dao.Eq("status", "queued"), dao.Or(dao.IsNull("lease_until"), dao.Le("lease_until", now))),
			Set:   dao.Set{"lease_owner": "claimer", "lease_until": now.Add(time.Minute)},
			Limit: 1,
		})
	}
	// A first claim with a deadline, as workers make them.
	first, cancelFirst := context.WithTimeout(ctx, 5*time.Second)
	defer cancelFirst()
	if got, err := claim(first, rows[0].ID); err != nil || len(got) != 1 {
		t.Fatalf("first claim: %d rows, %v", len(got), err)
	}

	// Another client of the same user takes every connection left.
	dsn := limited.Dialector.(*gormmysql.Dialector).DSN
	other, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	took := 0
	for range limit {
		c, err := other.Conn(ctx)
		if err != nil {
			if !refusedByLimit(err) {
				t.Fatalf("take the account's connections: %v", err)
			}
			break
		}
		defer c.Close()
		took++
	}
	t.Logf("the other client took %d of the account's %d connections", took, limit)
	if err := other.PingContext(ctx); !refusedByLimit(err) {
		t.Fatalf("a new connection of the account: %v; want it refused by the account's limit", err)
	}

	holder, err := admin.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT id FROM `"+table+"` WHERE id = ? FOR UPDATE", rows[1].ID); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	got, err := claim(cctx, rows[1].ID)
	wait := time.Since(began)
	t.Logf("claim behind the lock returned %d rows after %v: %v", len(got), wait.Round(time.Millisecond), err)
	if !errors.Is(err, context.DeadlineExceeded) || len(got) != 0 {
		t.Fatalf("claim behind a held row: %d rows, %v; want none and context.DeadlineExceeded", len(got), err)
	}
	if wait > 2*time.Second {
		t.Fatalf("claim behind a held row returned after %v; want about its 300 ms deadline", wait)
	}
}

// refusedByLimit reports whether err is a MySQL or MariaDB refusal of a
// connection past a limit: 1040, 1203 or 1226.
func refusedByLimit(err error) bool {
	var myErr *gomysql.MySQLError
	return errors.As(err, &myErr) && (myErr.Number == 1040 || myErr.Number == 1203 || myErr.Number == 1226)
}
