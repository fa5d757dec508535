package sqlstore_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The database drivers by the module paths that hold them.
var driverModules = map[string][]string{
	"postgres":      {"github.com/jackc/pgx/", "gorm.io/driver/postgres"},
	"mysql":         {"github.com/go-sql-driver/mysql", "gorm.io/driver/mysql"},
	"sqlite":        {"github.com/ncruces/go-sqlite3", "github.com/glebarez/", "modernc.org/sqlite", "github.com/mattn/go-sqlite3"},
	"sqlserver":     {"github.com/microsoft/go-mssqldb", "gorm.io/driver/sqlserver"},
	"elasticsearch": {"github.com/elastic/go-elasticsearch"},
}

// TestBackendsLinkOnlyTheirDriver lists with go list -deps what a program
// importing one backend package links: its own database driver, and none
// of the others nor the Elasticsearch client. The shared SQL core links
// no driver at all.
func TestBackendsLinkOnlyTheirDriver(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command is needed to list dependencies")
	}
	const mod = "github.com/claimstore/claimstore/adapters/"
	for pkg, own := range map[string]string{
		"postgres": "postgres", "mysql": "mysql", "sqlite": "sqlite", "sqlserver": "sqlserver", "sqlstore": "",
	} {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", pkg, err)
			}
			deps := strings.Fields(string(out))
			for backend, prefixes := range driverModules {
				linked := linksAny(deps, prefixes)
				if want := backend == own; linked != want {
					t.Errorf("%s links the %s driver: %v, want %v", pkg, backend, linked, want)
				}
			}
		})
	}
}

func linksAny(deps, prefixes []string) bool {
	for _, d := range deps {
		for _, p := range prefixes {
			if strings.HasPrefix(d, p) {
				return true
			}
		}
	}
	return false
}
