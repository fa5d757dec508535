// Package dbclock estimates a database's current time from one sample of
// it taken at most every [ClockResync], advanced in between with the host's
// monotonic clock, for the packages that write times on the database
// clock (outbox, dispatch).
package dbclock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ClockResync is how often a [Clock] reads the database's time again.
const ClockResync = time.Minute

// Clock estimates the database's current time. It reads it with Read at
// most every [ClockResync] and, in between, adds the time elapsed on the host's
// monotonic clock, so neither the host's wall clock (skewed or stepped)
// nor a round trip per call enters the estimate. The error of an estimate
// is half the sample's round trip (the shortest of up to [MaxReads]
// readings, see [GoodRoundTrip]) plus the drift of the two clocks' rates
// since the sample (typically well under a millisecond per minute). A
// Clock is safe for concurrent use; set Read and Host before first use.
type Clock struct {
	// Read returns the database's time: one round trip.
	Read func(ctx context.Context) (time.Time, error)
	// Host is the host clock (time.Now); its monotonic reading is used.
	Host func() time.Time

	read1 sync.Mutex // held by the one caller that reads the database's time

	mu   sync.Mutex
	ok   bool      // a sample was taken
	base time.Time // the database's time at the sample
	at   time.Time // the host's time at the middle of the sample's round trip
}

// New returns the Clock that samples the database with read, on the
// host's clock time.Now.
func New(read func(ctx context.Context) (time.Time, error)) *Clock {
	return &Clock{Read: read, Host: time.Now}
}

// estimate returns base advanced by the host time elapsed since at; the
// caller holds mu and has checked ok.
func (c *Clock) estimate() time.Time { return c.base.Add(c.Host().Sub(c.at)) }

// Now returns the database's current time, reading it with ctx when the
// last sample is older than [ClockResync]. One caller reads at a time; while
// it does, the others get the older sample's estimate at once, and only
// the first sample is waited for. When a read fails the older estimate is
// kept; without one Now returns the read's error, wrapped.
func (c *Clock) Now(ctx context.Context) (time.Time, error) {
	c.mu.Lock()
	if c.ok && c.Host().Sub(c.at) < ClockResync {
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
	if !ok {
		c.read1.Lock() // no estimate yet: wait for the read under way, if any
		c.mu.Lock()
		done, t := c.ok, c.estimate()
		c.mu.Unlock()
		if done {
			c.read1.Unlock()
			return t, nil
		}
	}
	defer c.read1.Unlock()
	db, at, err := c.sample(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.ok {
			return c.estimate(), nil
		}
		return time.Time{}, fmt.Errorf("read the database's time: %w", err)
	}
	c.ok, c.base, c.at = true, db, at
	return c.estimate(), nil
}

// GoodRoundTrip is the round trip below which one reading of the
// database's time is taken as the sample; a slower reading is followed
// by others, up to [MaxReads] in all, and the one with the shortest
// round trip is kept.
const GoodRoundTrip = 5 * time.Millisecond

// MaxReads is how many times one sample reads the database's time at
// most (see [GoodRoundTrip]).
const MaxReads = 3

// sample reads the database's time and returns it with the host time it
// is taken to stand for: the middle of the read's round trip. The error
// of that pairing is up to half the round trip, and it leans one way: the
// first query on a new connection waits for the connection to be set up
// before the database reads its clock, so its time belongs near the end
// of the round trip, not the middle, and a midpoint estimate runs ahead
// by about half the setup time (seconds on a loaded host). A worker whose
// clock runs ahead takes other workers' leases before they end. So a
// reading slower than GoodRoundTrip is followed by others (on the
// connection the first one opened, once the pool holds it), and the reading with the shortest
// round trip is kept. An error is returned only when the first reading
// fails; a later failure keeps the best reading so far.
func (c *Clock) sample(ctx context.Context) (db, at time.Time, err error) {
	best := time.Duration(-1)
	for i := 0; i < MaxReads; i++ {
		t0 := c.Host()
		d, err := c.Read(ctx)
		t1 := c.Host()
		if err != nil {
			if best < 0 {
				return time.Time{}, time.Time{}, err
			}
			break
		}
		rtt := t1.Sub(t0)
		if best < 0 || rtt < best {
			best, db, at = rtt, d, t0.Add(rtt/2)
		}
		if rtt <= GoodRoundTrip {
			break
		}
	}
	return db, at, nil
}

// Peek returns the estimate without any I/O: the host's time until a
// first sample was taken.
func (c *Clock) Peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return c.Host()
	}
	return c.estimate()
}

// readTimeout bounds a read of the database's time by a [Source], which
// runs detached from the caller's cancellation.
const readTimeout = 5 * time.Second

// Source is the clock a component's due-time comparisons and written
// times read: a fixed function (tests, or a caller's choice), or an
// estimate of the database's clock ([Clock]), or the host's clock.
type Source struct {
	fixed func() time.Time // set: used as is
	db    *Clock           // set: the database's clock; else the host's
}

// Reader is the method of a store that reads its database's time
// (dao.Table.Now).
type Reader interface {
	Now(ctx context.Context) (time.Time, error)
}

// NewSource returns a source that reads now when it is set, else the
// database clock of store when store reads one (hasDB: the store's
// capabilities say so, and store is a [Reader]), else the host's clock.
func NewSource(now func() time.Time, store any, hasDB bool) *Source {
	s := &Source{fixed: now}
	if now == nil && hasDB {
		if r, ok := store.(Reader); ok {
			s.db = New(func(ctx context.Context) (time.Time, error) {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
				defer cancel()
				return r.Now(rctx)
			})
		}
	}
	return s
}

// Now returns the current time in UTC by the source's clock. On the
// database clock it reads the database's time when the last sample is
// older than ClockResync (one round trip, detached from ctx's cancellation for
// at most 5 s; while it runs, other callers get the older sample's
// estimate); when that read fails an older estimate is kept, and without
// one the error is returned.
func (s *Source) Now(ctx context.Context) (time.Time, error) {
	switch {
	case s.fixed != nil:
		return s.fixed().UTC(), nil
	case s.db == nil:
		return time.Now().UTC(), nil
	}
	t, err := s.db.Now(ctx)
	return t.UTC(), err
}

// Peek returns the current estimate without I/O: the host's time until a
// first sample of the database's time was taken.
func (s *Source) Peek() time.Time {
	switch {
	case s.fixed != nil:
		return s.fixed().UTC()
	case s.db == nil:
		return time.Now().UTC()
	}
	return s.db.Peek().UTC()
}
