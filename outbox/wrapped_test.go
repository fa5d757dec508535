package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/testutil/countstore"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// Add with a tx goes through a metrics wrapper that forwards dao.TxBinder
// into the caller's transaction; through one that forwards nothing it
// fails with an error wrapping errors.ErrUnsupported that names
// dao.TxBinder, and writes nothing.
func TestAddInTxThroughWrappedStore(t *testing.T) {
	ctx := context.Background()
	s, db := sqlBackend("sqlite", testdb.SQLite).open(t)
	table := s.(*dao.Table[outbox.Message])

	forwarding := countstore.NewForwarding(table)
	r := newRepo(t, forwarding)
	if err := db.Transaction(func(tx *gorm.DB) error {
		return r.Add(ctx, tx, &outbox.Message{MessageID: "fwd", Topic: "t"})
	}); err != nil {
		t.Fatalf("Add in a tx through a forwarding wrapper: %v", err)
	}
	if got := forwarding.Counts.WithTx.Load(); got != 1 {
		t.Errorf("%d WithTx calls through the wrapper, want 1", got)
	}

	plain := newRepo(t, countstore.NewPlain[outbox.Message](table))
	err := db.Transaction(func(tx *gorm.DB) error {
		return plain.Add(ctx, tx, &outbox.Message{MessageID: "plain", Topic: "t"})
	})
	if !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "dao.TxBinder") {
		t.Errorf("Add in a tx through a wrapper without WithTx: %v; want errors.ErrUnsupported and dao.ErrInvalidArgument naming dao.TxBinder", err)
	}
	rows, err := table.Find(ctx, dao.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].MessageID != "fwd" {
		t.Errorf("table holds %+v; want the message added through the forwarding wrapper only", rows)
	}
}
