package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
)

// TestClaimStaysPreparedOnSQLite checks that SQLite runs the claim
// statement of a queue, prepared once on a connection, again and again
// with other bindings (the claim's size and time among them) without
// preparing it again, when its bindings are cleared after each run as the
// database/sql driver clears them: SQLite's count of the statement's
// automatic re-preparations (sqlite3_stmt_status,
// SQLITE_STMTSTATUS_REPREPARE) stays 0 over 40 claims. A statement that
// SQLite prepares again at each run costs the store's statement cache its
// purpose.
func TestClaimStaysPreparedOnSQLite(t *testing.T) {
	db := testdb.SQLite(t)
	js, _, _, now := busyJobTable(t, db)
	dt, r, req := renderClaim(t, js, dialects.SQLite, now)
	var args [][]any
	var text string
	for i, limit := range []int{10, 20} {
		req.Limit = limit
		st, err := r.Claim(dt, req)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && st.SQL != text {
			t.Fatalf("claims of %d and %d jobs render different texts:\n%s\n%s", 10, limit, text, st.SQL)
		}
		text = st.SQL
		args = append(args, st.Args)
	}
	if slices.Equal(args[0], args[1]) {
		t.Fatal("claims of 10 and 20 jobs bind the same arguments")
	}
	sdb, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := sdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		c := dc.(interface{ Raw() *sqlite3.Conn }).Raw()
		s, _, err := c.Prepare(text)
		if err != nil {
			return err
		}
		defer s.Close()
		claimed := 0
		for i := range 40 {
			for j, a := range args[i%2] {
				var err error
				switch v := a.(type) {
				case string:
					err = s.BindText(j+1, v)
				case int:
					err = s.BindInt(j+1, v)
				case int64:
					err = s.BindInt64(j+1, v)
				case time.Time:
					err = s.BindText(j+1, v.Add(time.Duration(i)*time.Millisecond).Format(sqlstore.SQLiteTimeLayout))
				default:
					t.Fatalf("argument %d of type %T", j, a)
				}
				if err != nil {
					return err
				}
			}
			for s.Step() {
				claimed++
			}
			if err := s.Reset(); err != nil {
				return err
			}
			if err := s.ClearBindings(); err != nil {
				return err
			}
		}
		n := s.Status(sqlite3.STMTSTATUS_REPREPARE, false)
		t.Logf("40 claims took %d jobs; SQLite prepared the statement again %d times", claimed, n)
		if claimed != 20*10+20*20 {
			t.Errorf("40 claims took %d jobs, want %d", claimed, 20*10+20*20)
		}
		if n != 0 {
			t.Errorf("SQLite prepared the claim statement again %d times in 40 runs, want 0", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
