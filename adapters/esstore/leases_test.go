package esstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstore/claimstore/adapters/esstore"
)

// newLeases returns a lease store over a fresh lease index of the server
// at url, created with Migrate.
func newLeases(t testing.TB, url string) *esstore.Leases {
	t.Helper()
	l, err := esstore.NewLeases(newClient(t, url), "leases_"+indexName())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return l
}
