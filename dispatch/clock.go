package dispatch

import (
	"time"

	"github.com/claimstore/claimstore/internal/dbclock"
)

// ClockResync is how often a worker or a [Schedules] on the database
// clock reads the database's time again; in between, its estimate advances
// with the host's monotonic clock.
const ClockResync = dbclock.ClockResync

// timeSource is the clock every due-time comparison and every time written
// by this package reads: a fixed function (tests, or a caller's choice),
// or an estimate of the database's clock, or the host's clock.
type timeSource = dbclock.Source

// newTimeSource returns now when it is set, else the database clock of
// store when store reads one (hasDB), else the host's clock.
func newTimeSource(now func() time.Time, store any, hasDB bool) *timeSource {
	return dbclock.NewSource(now, store, hasDB)
}
