// Package poolwatch checks the database/sql pool that a long-running
// component (a dispatch worker, a log reader) shares with its caller, and
// says at WARN, once, how to fix a pool that holds the component back: an
// open-connection limit below what its loops use at once, or an idle limit
// so low that connections are closed and opened again on every burst
// (database/sql keeps 2 idle by default; each new PostgreSQL connection is
// a new server process).
package poolwatch

import (
	"database/sql"
	"log/slog"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/dao"
)

// Churn is the number of connections closed for want of an idle slot
// (sql.DBStats.MaxIdleClosed) since the watch started past which Check
// warns.
const Churn = 100

// Of returns the database/sql pool under store when the store runs on one
// (it answers As(**gorm.DB) or As(**sql.DB)); nil otherwise.
func Of(store any) *sql.DB {
	a, ok := store.(dao.Aser)
	if !ok {
		return nil
	}
	var db *sql.DB
	if a.As(&db) && db != nil {
		return db
	}
	var g *gorm.DB
	if !a.As(&g) || g == nil {
		return nil
	}
	db, err := g.DB()
	if err != nil {
		return nil
	}
	return db
}

// Watch watches one pool for one run of a component. A nil *Watch (no
// pool) checks nothing.
type Watch struct {
	db        *sql.DB
	log       *slog.Logger
	idle      int // idle connections the component wants
	idleStart int64
	warned    bool
}

// New starts watching db for a component whose loops use up to conns
// connections at once; it returns nil when db is nil.
func New(db *sql.DB, log *slog.Logger, conns int) *Watch {
	if db == nil {
		return nil
	}
	return &Watch{db: db, log: log, idle: conns, idleStart: db.Stats().MaxIdleClosed}
}

// CheckOpen warns when the pool's open-connection limit is set and below
// want; why says what waits, attrs are added to the record.
func (w *Watch) CheckOpen(want int, why string, attrs ...any) {
	if w == nil {
		return
	}
	if open := w.db.Stats().MaxOpenConnections; open > 0 && open < want {
		w.log.Warn("the store's pool allows too few connections: "+why+"; raise it with sql.DB.SetMaxOpenConns",
			append([]any{"max_open", open, "want_at_least", want}, attrs...)...)
	}
}

// Check warns, once per watch, when the pool has closed more than
// [Churn] connections for want of idle slots since New.
func (w *Watch) Check() {
	if w == nil || w.warned {
		return
	}
	st := w.db.Stats()
	if closed := st.MaxIdleClosed - w.idleStart; closed > Churn {
		w.warned = true
		w.log.Warn("the store's pool closes and reopens connections for want of idle slots; raise them with sql.DB.SetMaxIdleConns, e.g. to its max open connections",
			"closed", closed, "open", st.OpenConnections, "max_open", st.MaxOpenConnections, "want_idle_at_least", w.idle)
	}
}
