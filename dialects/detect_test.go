package dialects_test

import (
	"context"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"gorm.io/gorm"
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

// TestDetectGalera: a server outside a Galera cluster (the local MariaDB,
// PostgreSQL, SQLite) is not Galera; the cluster's nodes are checked by
// the Galera tests of make ha.
func TestDetectGalera(t *testing.T) {
	ctx := context.Background()
	for _, b := range testdb.SQLBackends {
		t.Run(b.Name, func(t *testing.T) {
			on, err := dialects.DetectGalera(ctx, b.Open(t))
			if err != nil || on {
				t.Fatalf("DetectGalera = %v, %v; want false, nil", on, err)
			}
		})
	}
	if on, err := dialects.DetectGalera(ctx, nil); err != nil || on {
		t.Errorf("DetectGalera(nil) = %v, %v; want false, nil", on, err)
	}
}

// DetectVariant reports a lone server as Detect does, and Galera only for
// a node of a Galera cluster (tools/internal/hatest checks a node).
func TestDetectVariant(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"postgres", testdb.Postgres}, {"sqlite", testdb.SQLite}, {"mysql", testdb.MySQL}} {
		t.Run(c.name, func(t *testing.T) {
			db := c.open(t)
			want, err := dialects.Detect(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dialects.DetectVariant(ctx, db)
			if err != nil || got != want {
				t.Fatalf("DetectVariant = %q, %v; want %q as Detect (a lone server)", got, err, want)
			}
		})
	}
}
