package dispatch

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/internal/dbclock"
)

// ClockResync is how often a worker or a [Schedules] on the database
// clock reads the database's time again; in between, its estimate advances
// with the host's monotonic clock.
const ClockResync = dbclock.Resync

// dbReadTimeout bounds a read of the database's time, which runs detached
// from the caller's cancellation.
const dbReadTimeout = 5 * time.Second

// timeSource is the clock every due-time comparison and every time written
// by this package reads: a fixed function (tests, or a caller's choice),
// or an estimate of the database's clock, or the host's clock.
type timeSource struct {
	fixed func() time.Time // set: used as is
	db    *dbclock.Clock   // set: the database's clock; else the host's
}

// dbClocker is the method of a store that reads its database's time
// (dao.Table.Now).
type dbClocker interface {
	Now(ctx context.Context) (time.Time, error)
}

// newTimeSource returns now when it is set, else the database clock of
// store when store reads one (hasDB), else the host's clock.
func newTimeSource(now func() time.Time, store any, hasDB bool) *timeSource {
	ts := &timeSource{fixed: now}
	if now == nil && hasDB {
		if c, ok := store.(dbClocker); ok {
			ts.db = dbclock.New(func(ctx context.Context) (time.Time, error) {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbReadTimeout)
				defer cancel()
				return c.Now(rctx)
			})
		}
	}
	return ts
}

// Now returns the current time in UTC by the source's clock. On the
// database clock it reads the database's time when the last sample is
// older than ClockResync (one round trip, detached from ctx's cancellation
// for at most 5 s; while it runs, other callers get the older sample's
// estimate); when that read fails an older estimate is kept, and without
// one the error is returned.
func (c *timeSource) Now(ctx context.Context) (time.Time, error) {
	switch {
	case c.fixed != nil:
		return c.fixed().UTC(), nil
	case c.db == nil:
		return time.Now().UTC(), nil
	}
	t, err := c.db.Now(ctx)
	return t.UTC(), err
}

// peek returns the current estimate without I/O: the host's time until a
// first sample of the database's time was taken.
func (c *timeSource) peek() time.Time {
	switch {
	case c.fixed != nil:
		return c.fixed().UTC()
	case c.db == nil:
		return time.Now().UTC()
	}
	return c.db.Peek().UTC()
}
