package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// DatabaseClockResync is how often a repository on the database clock
// reads the database's time again; in between, its estimate advances with
// the host's monotonic clock.
const DatabaseClockResync = time.Minute

// dbClock estimates the database's current time. It reads it with one
// query at most every DatabaseClockResync and, in between, adds the time
// elapsed on the host's monotonic clock, so neither the host's wall clock
// (skewed or stepped) nor a round trip per call enters the estimate. The
// error of an estimate is half the sample's round trip plus the drift of
// the two clocks' rates since the sample (typically well under a
// millisecond per minute).
type dbClock struct {
	read func(ctx context.Context) (time.Time, error)
	host func() time.Time // the host clock; its monotonic reading is used

	read1 sync.Mutex // held by the one caller that reads the database's time

	mu   sync.Mutex
	ok   bool      // a sample was taken
	base time.Time // the database's time at the sample
	at   time.Time // the host's time at the middle of the sample's round trip
}

// estimate returns base advanced by the host time elapsed since at; the
// caller holds mu and has checked ok.
func (c *dbClock) estimate() time.Time { return c.base.Add(c.host().Sub(c.at)) }

// now returns the database's current time, reading it when the last
// sample is older than DatabaseClockResync. One caller reads at a time;
// while it does, the others use the older estimate when there is one. When
// the read fails the older estimate is kept; without one now returns the
// read's error.
func (c *dbClock) now(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	fresh := c.ok && c.host().Sub(c.at) < DatabaseClockResync
	if fresh {
		t := c.estimate()
		c.mu.Unlock()
		return t, nil
	}
	if c.ok && !c.read1.TryLock() {
		t := c.estimate() // another caller is reading
		c.mu.Unlock()
		return t, nil
	}
	ok := c.ok
	c.mu.Unlock()
	if ok {
		defer c.read1.Unlock()
	} else {
		c.read1.Lock() // no estimate yet: wait for the read under way, if any
		defer c.read1.Unlock()
		c.mu.Lock()
		done := c.ok
		t := c.estimate()
		c.mu.Unlock()
		if done {
			return t, nil
		}
	}
	t0 := c.host()
	db, err := c.read(ctx)
	t1 := c.host()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.ok {
			return c.estimate(), nil
		}
		return time.Time{}, fmt.Errorf("read the database's time: %w", err)
	}
	c.ok, c.base, c.at = true, db, t0.Add(t1.Sub(t0)/2)
	return c.estimate(), nil
}

// peek returns the estimate without any I/O: the host's time until a
// first sample was taken.
func (c *dbClock) peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return c.host()
	}
	return c.estimate()
}

// databaseClockOf returns the database clock of a store that reads its
// database's time (a store whose Capabilities().DatabaseClock is true and
// that has the method Now of dao.Table), or nil.
func databaseClockOf(store dao.Store[Message]) *dbClock {
	c, ok := store.(interface {
		Now(ctx context.Context) (time.Time, error)
	})
	if !ok || !store.Capabilities().DatabaseClock {
		return nil
	}
	return &dbClock{host: time.Now, read: c.Now}
}
