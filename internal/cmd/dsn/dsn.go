// Package dsn resolves the data source name a command of the claimstore
// tool opens: the --dsn flag, else the CLAIMSTORE_DSN environment variable;
// a bare SQLite file path gets the settings sqlstore.SQLiteDSN recommends.
// The tool has no built-in server address: a DSN names the database an
// operator means, or the command refuses to start.
package dsn

import (
	"fmt"
	"os"
	"strings"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
)

// Env names the environment variable that gives the DSN when --dsn is
// empty.
const Env = "CLAIMSTORE_DSN"

// examples are the forms a DSN takes, by backend, for error messages.
var examples = map[string]string{
	"postgres": "postgres://user:password@host:5432/db?sslmode=disable",
	"mysql":    "user:password@tcp(host:3306)/db?parseTime=true",
	"mariadb":  "user:password@tcp(host:3306)/db?parseTime=true",
	"sqlite":   "app.db (the database file's path)",
}

// Resolve returns the DSN the command opens for backend (lower case): flag
// when it is set, else $CLAIMSTORE_DSN, passed through [Normalize]. The
// memory backend needs none and gets "". When neither is set the error
// wraps [dao.ErrInvalidArgument] and says how to give one.
func Resolve(backend, flag string) (string, error) {
	if backend == "memory" {
		return "", nil
	}
	d := flag
	if d == "" {
		d = os.Getenv(Env)
	}
	if d == "" {
		ex := examples[backend]
		if ex == "" {
			ex = "the database's connection string"
		}
		return "", fmt.Errorf("%w: --dsn (or %s) is required for %s, e.g. --dsn '%s'", dao.ErrInvalidArgument, Env, backend, ex)
	}
	return Normalize(backend, d), nil
}

// Normalize returns d as the command opens it on backend: on sqlite a
// bare file path (no "file:" prefix, no query) as sqlstore.SQLiteDSN(d),
// with the recommended settings; any other d unchanged.
func Normalize(backend, d string) string {
	if backend == "sqlite" && d != "" && !strings.Contains(d, "?") && !strings.HasPrefix(d, "file:") {
		return sqlstore.SQLiteDSN(d)
	}
	return d
}
