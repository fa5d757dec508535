package cli

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/claimstore/claimstore/dao"
)

// packagePrefixes are the prefixes the project's packages put before their
// errors. Wrapped through several layers, the same prefix can appear more
// than once in one message; ErrorText keeps the first.
var packagePrefixes = map[string]bool{
	"claimstore": true, "bench": true, "outbox": true, "sqlstore": true,
	"memstore": true, "esstore": true, "natspub": true, "natsembed": true,
	"dispatch": true, "coord": true,
}

// ErrorText returns err as the command prints it: "claimstore: " and the
// message, in which each package prefix appears once (dao's sentinel
// errors all begin with "claimstore: ", and a package that wraps an error
// of its own package would repeat its prefix).
func ErrorText(err error) string {
	segs := strings.Split("claimstore: "+err.Error(), ": ")
	seen := map[string]bool{}
	kept := segs[:0]
	for _, s := range segs {
		if packagePrefixes[s] {
			if seen[s] {
				continue
			}
			seen[s] = true
		}
		kept = append(kept, s)
	}
	return strings.Join(kept, ": ")
}

// FlagChecks collects the range checks of a command's flags, run before
// the command does anything: [AtLeast], [Above] and [Between] record the
// first failure, which [FlagChecks.Err] returns.
type FlagChecks struct{ err error }

// Err returns the first failed check, an error wrapping
// dao.ErrInvalidArgument that names the flag, or nil.
func (c *FlagChecks) Err() error { return c.err }

// Fail records a failed check of --name, its message format with args,
// unless one failed before.
func (c *FlagChecks) Fail(name, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: --%s %s", dao.ErrInvalidArgument, name, fmt.Sprintf(format, args...))
	}
}

// Number is a flag value a range applies to; time.Duration is one.
type Number interface{ ~int | ~int64 | ~float64 }

// AtLeast checks that --name's value v is >= lo (NaN fails).
func AtLeast[T Number](c *FlagChecks, name string, v, lo T) {
	if !(v >= lo) || isInf(v) {
		c.Fail(name, "must be >= %v, got %v", lo, v)
	}
}

// Above checks that --name's value v is > lo (NaN fails).
func Above[T Number](c *FlagChecks, name string, v, lo T) {
	if !(v > lo) || isInf(v) {
		c.Fail(name, "must be > %v, got %v", lo, v)
	}
}

// Between checks that --name's value v is in [lo, hi] (NaN fails).
func Between[T Number](c *FlagChecks, name string, v, lo, hi T) {
	if !(v >= lo && v <= hi) {
		c.Fail(name, "must be in [%v, %v], got %v", lo, hi, v)
	}
}

func isInf[T Number](v T) bool { return math.IsInf(float64(v), 0) }

// missingTableError reports that the table a command reads does not exist.
type missingTableError struct {
	table   string
	kind    string // what the table holds ("message", "schedule"); default "message"
	backend string
	fix     string // how to create it; empty for the usual ways
	err     error  // the database's error
}

func (e *missingTableError) Error() string {
	fix := e.fix
	if fix == "" {
		fix = "create it with outbox.Migrate in your program or by running `claimstore relay` once (its --migrate is on by default)"
	}
	kind := e.kind
	if kind == "" {
		kind = "message"
	}
	return fmt.Sprintf("table %q does not exist in the %s database; %s, or name an existing %s table with --table",
		e.table, e.backend, fix, kind)
}

func (e *missingTableError) Unwrap() error { return e.err }

// isMissingTable reports whether err is a database's "table does not
// exist": SQLSTATE 42P01 on PostgreSQL, error 1146 on MySQL and MariaDB,
// "no such table" on SQLite and "Invalid object name" (error 208) on SQL
// Server.
func isMissingTable(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "42P01"
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1146
	}
	msg := err.Error()
	return strings.Contains(msg, "no such table") || strings.Contains(msg, "Invalid object name")
}

// explainTable returns err, or a *missingTableError around it when it says
// that table does not exist.
func explainTable(err error, backend, table string) error {
	if err == nil || !isMissingTable(err) {
		return err
	}
	return &missingTableError{table: table, backend: backend, err: err}
}
