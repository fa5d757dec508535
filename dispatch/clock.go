package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ClockResync is how often a worker or a [Schedules] on the database
// clock reads the database's time again; in between, its estimate advances
// with the host's monotonic clock.
const ClockResync = time.Minute

// timeSource is the clock every due-time comparison and every time written
// by this package reads: a fixed function (tests, or a caller's choice),
// or an estimate of the database's clock, or the host's clock.
type timeSource struct {
	fixed func() time.Time                             // set: used as is
	read  func(ctx context.Context) (time.Time, error) // the database's time; nil: the host's clock
	host  func() time.Time                             // the host clock; its monotonic reading is used

	readMu sync.Mutex // held while the database's time is read

	mu      sync.Mutex
	reading bool      // a caller is reading the database's time
	ok      bool      // a sample was taken
	base    time.Time // the database's time at the sample
	at      time.Time // the host's time in the middle of the sample's round trip
}

// dbClocker is the method of a store that reads its database's time
// (dao.Table.Now).
type dbClocker interface {
	Now(ctx context.Context) (time.Time, error)
}

// newTimeSource returns now when it is set, else the database clock of
// store when store reads one (hasDB), else the host's clock.
func newTimeSource(now func() time.Time, store any, hasDB bool) *timeSource {
	ts := &timeSource{fixed: now, host: time.Now}
	if now == nil && hasDB {
		if c, ok := store.(dbClocker); ok {
			ts.read = c.Now
		}
	}
	return ts
}

// Now returns the current time in UTC by the source's clock. On the
// database clock it reads the database's time when the last sample is
// older than ClockResync (one round trip, detached from ctx's cancellation
// for at most 5 s); when that read fails an older estimate is kept, and
// without one the error is returned. While one caller reads, the others
// get the older sample's estimate at once; only the first sample is
// waited for.
func (c *timeSource) Now(ctx context.Context) (time.Time, error) {
	if c.fixed != nil {
		return c.fixed().UTC(), nil
	}
	if c.read == nil {
		return c.host().UTC(), nil
	}
	c.mu.Lock()
	if c.ok && (c.reading || c.host().Sub(c.at) < ClockResync) {
		defer c.mu.Unlock()
		return c.estimate(), nil
	}
	c.mu.Unlock()
	c.readMu.Lock() // one read at a time; without a sample, wait for it
	defer c.readMu.Unlock()
	c.mu.Lock()
	if c.ok && c.host().Sub(c.at) < ClockResync { // another caller just read
		defer c.mu.Unlock()
		return c.estimate(), nil
	}
	c.reading = true
	c.mu.Unlock()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	t0 := c.host()
	db, err := c.read(rctx)
	t1 := c.host()

	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	if err != nil {
		if c.ok {
			return c.estimate(), nil
		}
		return time.Time{}, fmt.Errorf("read the database's time: %w", err)
	}
	c.ok, c.base, c.at = true, db.UTC(), t0.Add(t1.Sub(t0)/2)
	return c.estimate(), nil
}

// peek returns the current estimate without I/O: the host's time until a
// first sample of the database's time was taken.
func (c *timeSource) peek() time.Time {
	if c.fixed != nil {
		return c.fixed().UTC()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read == nil || !c.ok {
		return c.host().UTC()
	}
	return c.estimate()
}

func (c *timeSource) estimate() time.Time { return c.base.Add(c.host().Sub(c.at)) }
