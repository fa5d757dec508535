package outboxenv_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/outbox"
)

// A repository made by WithBusyRetries retries a claim and a mark that
// find SQLite's write lock taken, and counts the retries.
func TestWithBusyRetries(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	db, err := sqlstore.Open(ctx, "sqlite", sqlstore.SQLiteDSNTimeout(path, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	if err := outbox.Migrate(ctx, db, "busy_out"); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New[outbox.Message](db, sqlstore.WithTable("busy_out"))
	if err != nil {
		t.Fatal(err)
	}
	var retries atomic.Int64
	repo, err := outboxenv.WithBusyRetries(store, &retries)
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]*outbox.Message, 5)
	for i := range ms {
		ms[i] = &outbox.Message{MessageID: fmt.Sprintf("b-%d", i), Topic: "t", Payload: []byte("{}")}
	}
	if err := repo.Add(ctx, nil, ms...); err != nil {
		t.Fatal(err)
	}

	hold := func() {
		release := testdb.HoldLock(t, db, "busy_out", 0)
		time.AfterFunc(150*time.Millisecond, release)
	}
	hold()
	got, err := repo.ClaimBatch(ctx, "w", 5, "")
	if err != nil || len(got) != 5 {
		t.Fatalf("claim under a held lock: %d rows, %v", len(got), err)
	}
	afterClaim := retries.Load()
	if afterClaim == 0 {
		t.Error("claim under a held lock counted no retry")
	}
	hold()
	ids := make([]int64, len(got))
	for i := range got {
		ids[i] = got[i].ID
	}
	if refused, err := repo.MarkPublished(ctx, "w", ids...); err != nil || len(refused) != 0 {
		t.Fatalf("mark under a held lock: refused %v, %v", refused, err)
	}
	if retries.Load() == afterClaim {
		t.Error("mark under a held lock counted no retry")
	}
	t.Logf("retries: claim %d, mark %d", afterClaim, retries.Load()-afterClaim)
}
