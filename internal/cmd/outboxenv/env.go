package outboxenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gorm.io/gorm"

	// The SQL backends Open supports, so that sqlstore.Open accepts them
	// whoever calls Open.
	_ "github.com/claimstore/claimstore/adapters/mysql"
	_ "github.com/claimstore/claimstore/adapters/postgres"
	_ "github.com/claimstore/claimstore/adapters/sqlite"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	cmddsn "github.com/claimstore/claimstore/internal/cmd/dsn"
	"github.com/claimstore/claimstore/outbox"
)

// Options says which message table [Open] opens and how.
type Options struct {
	// Backend is sqlite, postgres, mysql, mariadb or memory (any case).
	Backend string
	// DSN is the data source name. Empty selects DefaultDSN's for
	// postgres, mysql and mariadb, and for sqlite a file in a fresh
	// temporary directory when TempSQLite is set (an error otherwise). A
	// bare SQLite path gets the recommended settings (sqlstore.SQLiteDSN).
	DSN string
	// DefaultDSN gives the DSN of a server backend when DSN is empty, and
	// a clean-up to run on Close; nil makes an empty DSN an error.
	DefaultDSN func(backend string) (dsn string, cleanup func() error, err error)
	// Table is the message table's name, checked by outbox.CheckTable.
	Table string
	// Migrate creates the table and its indexes when missing; without it,
	// an SQLite file that does not exist is an error rather than created
	// empty.
	Migrate bool
	// TempSQLite allows sqlite without a DSN: see DSN.
	TempSQLite bool
	// Pool is the most open (and idle) connections of the database pool.
	Pool int
	// Repository are the options of the repository over the table.
	Repository []outbox.Option
}

// Env is an open message table: its repository and, on the SQL backends,
// the database handle. Close releases it.
type Env struct {
	// Repo is the repository over the table.
	Repo *outbox.Repository
	// DB is the database handle; nil on the memory backend.
	DB *gorm.DB
	// Backend is the backend's name in lower case; Table the table's.
	Backend, Table string
	// File is the SQLite database file ("" on the other backends and for
	// an in-memory SQLite database); TempFile tells whether it is a
	// temporary one that Close removes, unless KeepFile is set.
	File     string
	TempFile bool
	KeepFile bool
	cleanup  []func()
}

// Close closes the database pool and removes a temporary SQLite file
// (unless KeepFile).
func (e *Env) Close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

// HasTable reports whether the message table exists; on the memory
// backend it always does.
func (e *Env) HasTable(ctx context.Context) bool {
	return e.DB == nil || e.DB.WithContext(ctx).Migrator().HasTable(e.Table)
}

// Open opens the message table that o describes and returns it with its
// repository. Errors: an invalid table name ("--table: ..."), sqlite
// without a DSN when o.TempSQLite is not set, an SQLite file that does not
// exist without o.Migrate, an unknown backend, and the database's own
// errors on opening and migrating.
func Open(ctx context.Context, o Options) (*Env, error) {
	env := &Env{Backend: strings.ToLower(o.Backend), Table: o.Table}
	if env.Backend == "memory" {
		s, err := memstore.New[outbox.Message]()
		if err != nil {
			return nil, err
		}
		if env.Repo, err = outbox.New(s, o.Repository...); err != nil {
			return nil, err
		}
		return env, nil
	}
	if err := outbox.CheckTable(o.Table); err != nil {
		return nil, fmt.Errorf("--table: %w", err)
	}
	dsn, err := env.resolveDSN(o)
	if err != nil {
		env.Close()
		return nil, err
	}
	if err := env.openSQL(ctx, dsn, o); err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// resolveDSN returns the DSN to open for o, choosing the default when o
// has none; the clean-up of a default it chose is registered with e.
func (e *Env) resolveDSN(o Options) (string, error) {
	dsn := o.DSN
	switch {
	case dsn == "" && e.Backend == "sqlite":
		if !o.TempSQLite {
			return "", fmt.Errorf("--dsn is required for sqlite: the path of the database file, e.g. --dsn %q", sqlstore.SQLiteDSN("claimstore.db"))
		}
		dir, err := os.MkdirTemp("", "claimstore-")
		if err != nil {
			return "", err
		}
		e.File, e.TempFile = filepath.Join(dir, "claimstore.db"), true
		e.cleanup = append(e.cleanup, func() {
			if !e.KeepFile {
				_ = os.RemoveAll(dir)
			}
		})
		return sqlstore.SQLiteDSN(e.File), nil
	case dsn == "" && o.DefaultDSN == nil:
		return "", fmt.Errorf("%w: --dsn is required for %s", dao.ErrInvalidArgument, e.Backend)
	case dsn == "":
		d, cleanup, err := o.DefaultDSN(e.Backend)
		if err != nil {
			return "", err
		}
		e.cleanup = append(e.cleanup, func() { _ = cleanup() })
		return d, nil
	case e.Backend == "sqlite":
		dsn = cmddsn.Normalize(e.Backend, dsn) // a bare path gets the recommended settings
		e.File, _ = sqlitePath(dsn)
		if !o.Migrate {
			if err := checkSQLiteFile(dsn); err != nil {
				return "", err
			}
		}
	}
	return dsn, nil
}

// openSQL opens the database at dsn with a pool of o.Pool connections,
// migrates the table when o.Migrate, and puts the repository over it.
func (e *Env) openSQL(ctx context.Context, dsn string, o Options) error {
	db, err := sqlstore.Open(ctx, e.Backend, dsn)
	if err != nil {
		return err
	}
	e.DB = db
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(o.Pool)
		sqlDB.SetMaxIdleConns(o.Pool)
		e.cleanup = append(e.cleanup, func() { _ = sqlDB.Close() })
	}
	if o.Migrate {
		if err := outbox.Migrate(ctx, db, e.Table); err != nil {
			return err
		}
	}
	store, err := sqlstore.New[outbox.Message](db.WithContext(ctx), sqlstore.WithTable(e.Table))
	if err != nil {
		return err
	}
	e.Repo, err = outbox.New(store, o.Repository...)
	return err
}

// sqlitePath returns the file path of an SQLite DSN ("file:PATH?..." or a
// bare path), and false for an in-memory database.
func sqlitePath(dsn string) (string, bool) {
	p, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if p == "" || p == ":memory:" || strings.Contains(dsn, "mode=memory") {
		return "", false
	}
	return p, true
}

// checkSQLiteFile fails when the SQLite database file of dsn does not
// exist: opening it would create an empty one.
func checkSQLiteFile(dsn string) error {
	p, ok := sqlitePath(dsn)
	if !ok {
		return nil
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--dsn: SQLite database file %s does not exist", p)
	}
	return nil
}

// RandomHex returns n random bytes as 2n hexadecimal digits: a tag that
// keeps the names of one run's tables, streams and workers apart from
// another's.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
