package dispatch

import (
	"database/sql"
	"log/slog"

	"gorm.io/gorm"
)

// workerConns is the number of connections a worker's own loops can use
// at once: the claim, the outcome writes, the lease renewal and the
// leader-only maintenance.
const workerConns = 4

// idleChurn is the number of connections closed for want of an idle slot
// (sql.DBStats.MaxIdleClosed) during one Run past which the worker warns
// that the pool keeps too few idle connections.
const idleChurn = 100

// poolOf returns the database/sql pool under store, when the store runs
// on one (an SQL backend's store answers As(**gorm.DB)); nil otherwise.
func poolOf(store any) *sql.DB {
	a, ok := store.(interface{ As(target any) bool })
	if !ok {
		return nil
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

// poolWatch checks the pool of a worker's store: once when Run starts,
// that its open-connection limit leaves room for the worker's own loops
// and its handlers, and at each heartbeat whether connections are closed
// and reopened for want of idle slots (database/sql keeps 2 idle by
// default), each reported once per Run as a WARN with the fix.
type poolWatch struct {
	db          *sql.DB
	log         *slog.Logger
	idleStart   int64
	idleWarned  bool
	concurrency int
}

func newPoolWatch(db *sql.DB, log *slog.Logger, concurrency int) *poolWatch {
	if db == nil {
		return nil
	}
	p := &poolWatch{db: db, log: log, concurrency: concurrency, idleStart: db.Stats().MaxIdleClosed}
	if open := db.Stats().MaxOpenConnections; open > 0 && open < workerConns+1 {
		log.Warn("the store's pool allows too few connections: claims, outcome writes and renewals will wait for each other; raise it with sql.DB.SetMaxOpenConns",
			"max_open", open, "want_at_least", workerConns+1, "and_for_handlers_that_use_the_database", concurrency)
	}
	return p
}

// check warns, once, when the pool has closed more than idleChurn
// connections for want of idle slots since Run started.
func (p *poolWatch) check() {
	if p == nil || p.idleWarned {
		return
	}
	st := p.db.Stats()
	if closed := st.MaxIdleClosed - p.idleStart; closed > idleChurn {
		p.idleWarned = true
		p.log.Warn("the store's pool closes and reopens connections for want of idle slots; raise them with sql.DB.SetMaxIdleConns, e.g. to its max open connections",
			"closed", closed, "open", st.OpenConnections, "max_open", st.MaxOpenConnections, "want_idle_at_least", workerConns)
	}
}
