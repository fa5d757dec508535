package dialects_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testdb"
)

func TestDetect(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres", func(t *testing.T) {
		got, err := dialects.Detect(ctx, testdb.Postgres(t))
		if err != nil || got != dialects.Postgres {
			t.Fatalf("Detect = %q, %v", got, err)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		got, err := dialects.Detect(ctx, testdb.SQLite(t))
		if err != nil || got != dialects.SQLite {
			t.Fatalf("Detect = %q, %v", got, err)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		db := testdb.MySQL(t)
		var version string
		if err := db.Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
			t.Fatal(err)
		}
		got, err := dialects.Detect(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		want := dialects.MySQL
		if strings.Contains(strings.ToLower(version), "mariadb") {
			want = dialects.MariaDB
		}
		if got != want {
			t.Fatalf("Detect = %q for server %q, want %q", got, version, want)
		}
		t.Logf("server %q detected as %s", version, got)
	})
}
