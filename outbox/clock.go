package outbox

import (
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/dbclock"
)

// ClockResync is how often a repository on the database clock reads the
// database's time again; in between, its estimate advances with the
// host's monotonic clock. It is dispatch.ClockResync.
const ClockResync = dbclock.ClockResync

// DatabaseClockResync is ClockResync.
//
// Deprecated: use ClockResync.
const DatabaseClockResync = ClockResync

// databaseClockOf returns the database clock of a store that reads its
// database's time (a store whose Capabilities().DatabaseClock is true and
// that has the method Now of dao.Table), or nil.
func databaseClockOf(store dao.Store[Message]) *dbclock.Clock {
	c, ok := store.(dao.Clock)
	if !ok || !store.Capabilities().DatabaseClock {
		return nil
	}
	return dbclock.New(c.Now)
}
