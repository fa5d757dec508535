package sqlstore

import (
	"sync"

	"github.com/claimstore/claimstore/dialects"
	"gorm.io/gorm"
)

// Backend is what a backend package (adapters/postgres, adapters/mysql,
// adapters/sqlite, adapters/sqlserver) plugs into this shared SQL core,
// which imports GORM but no database driver. It is for adapter authors;
// programs import the backend packages.
type Backend struct {
	// Dialector returns the GORM dialector that opens dsn, after adding
	// the DSN settings the backend needs. An error wraps
	// dao.ErrInvalidArgument.
	Dialector func(dsn string) (gorm.Dialector, error)
	// Classify returns the dao sentinel for a native error of the
	// backend's driver, or nil when the error is not one of its own.
	Classify func(err error) error
	// MatchedRows reports whether an UPDATE's affected-row count on db is
	// the number of rows it matched; nil means it always is.
	MatchedRows func(db *gorm.DB) bool
}

var (
	backendsMu sync.RWMutex
	backends   = map[dialects.Name]Backend{}
)

// Register makes b the backend of the dialects names, as database/sql's
// Register makes a driver available by name. Backend packages call it
// from init; a later call for the same name replaces the earlier one.
func Register(b Backend, names ...dialects.Name) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	for _, n := range names {
		backends[n] = b
	}
}

// backendOf returns the backend registered for name.
func backendOf(name dialects.Name) (Backend, bool) {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	b, ok := backends[name]
	return b, ok
}

// classifiers returns the Classify functions of every registered backend.
func classifiers() []func(error) error {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	out := make([]func(error) error, 0, len(backends))
	for _, b := range backends {
		if b.Classify != nil {
			out = append(out, b.Classify)
		}
	}
	return out
}

// backendPackage names the package that registers the backend of name:
// that of its family (dialects.Family), whose driver it runs on.
func backendPackage(name dialects.Name) string {
	return "github.com/claimstore/claimstore/adapters/" + string(dialects.Family(name))
}
