package dispatch

import (
	"log/slog"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/poolwatch"
)

// workerConns is the number of connections a worker's own loops can use
// at once: the claim, the outcome writes, the lease renewal and the
// leader-only maintenance.
const workerConns = 4

// newPoolWatch watches the pool of a worker's store (when it runs on
// one): once when Run starts, that its open-connection limit leaves room
// for the worker's own loops and its handlers, and at each heartbeat
// whether connections are closed and reopened for want of idle slots,
// each reported once per Run as a WARN with the fix. On SQLite the
// open-connection limit is not checked: its writes wait for one another
// whatever the pool, and a small pool is the intended one (the SQLite
// adapter's, sqlstore.OpenSQLiteConns).
func newPoolWatch(store any, log *slog.Logger, concurrency int) *poolwatch.Watch {
	w := poolwatch.New(poolwatch.Of(store), log, workerConns)
	var d dialects.Name
	if a, ok := store.(dao.Aser); ok && a.As(&d) && d == dialects.SQLite {
		return w
	}
	w.CheckOpen(workerConns+1, "claims, outcome writes and renewals will wait for each other",
		"and_for_handlers_that_use_the_database", concurrency)
	return w
}
