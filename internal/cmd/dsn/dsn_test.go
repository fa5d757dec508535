package dsn

import (
	"errors"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
)

func TestResolve(t *testing.T) {
	t.Setenv(Env, "")
	for _, backend := range []string{"postgres", "mysql", "mariadb", "sqlite", "sqlserver"} {
		_, err := Resolve(backend, "")
		if !errors.Is(err, dao.ErrInvalidArgument) || !strings.Contains(err.Error(), "--dsn") || !strings.Contains(err.Error(), Env) {
			t.Errorf("%s without a DSN: %v; want ErrInvalidArgument naming --dsn and %s", backend, err, Env)
		}
	}
	if d, err := Resolve("memory", ""); d != "" || err != nil {
		t.Errorf("memory: %q, %v; want no DSN and no error", d, err)
	}
	if d, _ := Resolve("postgres", "postgres://a@b/c"); d != "postgres://a@b/c" {
		t.Errorf("flag: %q", d)
	}
	if d, _ := Resolve("sqlite", "app.db"); d != sqlstore.SQLiteDSN("app.db") {
		t.Errorf("bare SQLite path: %q", d)
	}
	if d, _ := Resolve("sqlite", "file:x.db?mode=ro"); d != "file:x.db?mode=ro" {
		t.Errorf("SQLite DSN with settings: %q", d)
	}

	t.Setenv(Env, "root@tcp(db:3306)/app")
	if d, err := Resolve("mysql", ""); d != "root@tcp(db:3306)/app" || err != nil {
		t.Errorf("from %s: %q, %v", Env, d, err)
	}
	if d, _ := Resolve("mysql", "other@tcp(x)/y"); d != "other@tcp(x)/y" {
		t.Errorf("--dsn does not win over %s: %q", Env, d)
	}
}
