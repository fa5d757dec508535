package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/countstore"
	"github.com/claimstore/claimstore/internal/testutil/syncbuf"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
)

// wrappedArgs are the args of the wrapped-store tests.
type wrappedArgs struct {
	To string `json:"to"`
}

func (wrappedArgs) Kind() string { return "wrapped" }

// sqliteJobTable opens a migrated job table on a fresh SQLite database.
func sqliteJobTable(t *testing.T) (*dao.Table[jobs.Row], *gorm.DB) {
	t.Helper()
	db := testdb.SQLite(t)
	store, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(testdb.Table(t, db, "jobs")))
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(context.Background(), store, nil); err != nil {
		t.Fatal(err)
	}
	return store, db
}

// Through a metrics wrapper that forwards dao.TxBinder, InsertTx writes in
// the caller's transaction: the job is there once it commits, and a
// rolled-back insert leaves nothing.
func TestInsertTxThroughForwardingWrapper(t *testing.T) {
	ctx := context.Background()
	table, db := sqliteJobTable(t)
	store := countstore.NewForwarding(table)
	var logs syncbuf.Buffer
	client, err := jobs.NewClient(jobs.Config{Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Transaction(func(tx *gorm.DB) error {
		_, err := client.InsertTx(ctx, tx, wrappedArgs{To: "committed"}, nil)
		return err
	}); err != nil {
		t.Fatalf("InsertTx through a forwarding wrapper: %v", err)
	}
	rollback := errors.New("roll back")
	if err := db.Transaction(func(tx *gorm.DB) error {
		if _, err := client.InsertTx(ctx, tx, wrappedArgs{To: "rolled back"}, nil); err != nil {
			return err
		}
		return rollback
	}); !errors.Is(err, rollback) {
		t.Fatalf("InsertTx in a transaction rolled back: %v", err)
	}
	rows, err := table.Find(ctx, dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !strings.Contains(rows[0].EncodedArgs, "committed") {
		t.Errorf("job table holds %+v; want the committed job only", rows)
	}
	if got := store.Counts.WithTx.Load(); got != 2 {
		t.Errorf("%d WithTx calls through the wrapper, want 2", got)
	}
	if strings.Contains(logs.String(), "lacks optional interfaces") {
		t.Errorf("NewClient reported missing interfaces of a forwarding wrapper:\n%s", logs.String())
	}
}

// Through a wrapper that forwards nothing but dao.Store, InsertTx fails
// with an error wrapping errors.ErrUnsupported that names dao.TxBinder,
// and inserts nothing; NewClient has logged the interfaces it lacks.
func TestInsertTxThroughPlainWrapperIsUnsupported(t *testing.T) {
	ctx := context.Background()
	table, db := sqliteJobTable(t)
	var logs syncbuf.Buffer
	client, err := jobs.NewClient(jobs.Config{Store: countstore.NewPlain[jobs.Row](table), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		_, err := client.InsertTx(ctx, tx, wrappedArgs{To: "nobody"}, nil)
		return err
	})
	if !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "dao.TxBinder") {
		t.Errorf("InsertTx through a wrapper without WithTx: %v; want errors.ErrUnsupported and dao.ErrInvalidArgument naming dao.TxBinder", err)
	}
	if n, err := table.Count(ctx, dao.Criteria{}); err != nil || n != 0 {
		t.Errorf("job table holds %d rows (%v), want none", n, err)
	}
	if l := logs.String(); strings.Count(l, "lacks optional interfaces") != 1 || !strings.Contains(l, "level=WARN") || !strings.Contains(l, "dao.IdempotentCreator") {
		t.Errorf("want one Warn from NewClient naming the missing interfaces, got:\n%s", l)
	}
}
