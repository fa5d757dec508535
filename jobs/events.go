package jobs

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/argerr"
)

// EventKind names what an [Event] reports.
type EventKind string

// The kinds of events a [Client] emits to its subscribers ([Client.Subscribe]).
const (
	// EventJobCompleted: a job's work returned nil and its completion
	// was written.
	EventJobCompleted EventKind = "job_completed"
	// EventJobFailed: an attempt failed (an error, a panic, a timeout)
	// with attempts left; the job is retryable.
	EventJobFailed EventKind = "job_failed"
	// EventJobDiscarded: a job's last attempt failed, or the rescuer
	// found its last attempt lost; the job is discarded.
	EventJobDiscarded EventKind = "job_discarded"
	// EventJobCancelled: a job ended cancelled — by its work function
	// ([Cancel]), by a cancel request while it ran, by the error handler,
	// or by [Client.Cancel] of this client before it ran.
	EventJobCancelled EventKind = "job_cancelled"
	// EventJobSnoozed: a job's work returned [Snooze]; it runs again
	// later without spending an attempt.
	EventJobSnoozed EventKind = "job_snoozed"
	// EventQueuePaused and EventQueueResumed: a queue was paused or
	// resumed, by this client or, for a queue this client runs, by
	// another (seen at the client's next read of the queue table, within
	// a tick).
	EventQueuePaused  EventKind = "queue_paused"
	EventQueueResumed EventKind = "queue_resumed"
)

// EventKinds lists every event kind.
func EventKinds() []EventKind {
	return []EventKind{EventJobCompleted, EventJobFailed, EventJobDiscarded, EventJobCancelled, EventJobSnoozed, EventQueuePaused, EventQueueResumed}
}

// Event is one thing that happened in a [Client]: a job's outcome, once
// its write committed, or a queue's pause or resume.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Job is the job as its outcome left it (its state, attempt,
	// errors and times), for job events; nil for queue events.
	Job *Row
	// Stats are the job's durations, for the job events of work this
	// client ran; nil otherwise (queue events, and jobs cancelled or
	// discarded without running here).
	Stats *JobStats
	// Queue is the queue of the job, or the queue paused or resumed.
	Queue string
	// At is when it happened, by the client's clock (UTC).
	At time.Time
}

// JobStats are the durations of one attempt of a job.
type JobStats struct {
	// QueueWait is how long the job waited to start after it was due:
	// from its scheduled time to the start of its work.
	QueueWait time.Duration
	// Run is how long its work function ran, middleware included.
	Run time.Duration
	// Complete is how long its outcome took to be written: from the end
	// of its work to the commit of the outcome write (outcomes are
	// written in batches: see dispatch.Config.OutcomeDelay).
	Complete time.Duration
}

// DefaultSubscribeChanSize is the capacity of a subscription's channel
// when SubscribeConfig.ChanSize is zero.
const DefaultSubscribeChanSize = 1000

// SubscribeConfig configures a subscription ([Client.SubscribeConfig]).
type SubscribeConfig struct {
	// Kinds are the event kinds delivered; empty delivers every kind.
	Kinds []EventKind
	// ChanSize is the capacity of the channel, in events; default
	// [DefaultSubscribeChanSize]. An event that finds the channel full
	// is dropped (never waited for) and counted in Stats.EventsDropped.
	ChanSize int
}

// Subscribe returns a channel that receives the client's events of
// kinds (every kind when none is given), and a function that ends the
// subscription and closes the channel. See [Client.SubscribeConfig].
// Errors wrap dao.ErrInvalidArgument for an unknown kind.
func (c *Client) Subscribe(kinds ...EventKind) (<-chan *Event, func(), error) {
	return c.SubscribeConfig(SubscribeConfig{Kinds: kinds})
}

// SubscribeConfig returns a channel that receives the client's events
// that cfg selects, and a function that ends the subscription and closes
// the channel (calling it again does nothing). Events are sent without
// blocking the client: read the channel promptly, or events are dropped
// once ChanSize of them wait (Stats.EventsDropped counts them, and the
// first drop of a subscription is logged). A job event is sent once its
// outcome write has committed, from the goroutine that wrote it. Errors
// wrap dao.ErrInvalidArgument: an unknown kind, a negative ChanSize.
func (c *Client) SubscribeConfig(cfg SubscribeConfig) (<-chan *Event, func(), error) {
	if cfg.ChanSize < 0 {
		return nil, nil, fmt.Errorf("jobs: subscribe: %w", argerr.Errorf("negative channel size %d", cfg.ChanSize))
	}
	for _, k := range cfg.Kinds {
		if !slices.Contains(EventKinds(), k) {
			return nil, nil, fmt.Errorf("jobs: subscribe: %w", argerr.Errorf("unknown event kind %q", k))
		}
	}
	s := &subscription{ch: make(chan *Event, cmp.Or(cfg.ChanSize, DefaultSubscribeChanSize)), kinds: map[EventKind]bool{}}
	for _, k := range cfg.Kinds {
		s.kinds[k] = true
	}
	c.events.add(s)
	var once sync.Once
	return s.ch, func() { once.Do(func() { c.events.remove(s) }) }, nil
}

// subscription is one subscriber's channel and the kinds it wants
// (empty: all).
type subscription struct {
	ch      chan *Event
	kinds   map[EventKind]bool
	dropped bool // a drop was logged
}

// hub holds a client's subscriptions.
type hub struct {
	n       atomic.Int32 // subscriptions, read without the lock
	mu      sync.Mutex
	subs    []*subscription
	dropped atomic.Int64
}

func (h *hub) add(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs = append(h.subs, s)
	h.n.Store(int32(len(h.subs)))
}

func (h *hub) remove(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := slices.Index(h.subs, s); i >= 0 {
		h.subs = slices.Delete(h.subs, i, i+1)
		close(s.ch)
	}
	h.n.Store(int32(len(h.subs)))
}

// active reports whether anyone subscribed.
func (h *hub) active() bool { return h.n.Load() > 0 }

// emit sends ev to the subscriptions that want its kind, without
// blocking; it returns the subscriptions whose first drop this was.
func (h *hub) emit(ev *Event) (firstDrops int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if len(s.kinds) > 0 && !s.kinds[ev.Kind] {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			h.dropped.Add(1)
			if !s.dropped {
				s.dropped = true
				firstDrops++
			}
		}
	}
	return firstDrops
}

// emit sends ev to the client's subscribers.
func (c *Client) emit(ev *Event) {
	if n := c.events.emit(ev); n > 0 {
		c.log.Warn("event subscriber too slow: events dropped (counted in Stats.EventsDropped)", "kind", ev.Kind, "subscriptions", n)
	}
}

// attemptInfo is what the client keeps of a claimed job's attempt for
// its event: the outcome's event kind and the work's start and end (host
// clock).
type attemptInfo struct {
	event        EventKind // "" for an outcome that emits none (drain, lease lost)
	began, ended time.Time
	output       json.RawMessage // recorded by RecordOutput
	settled      bool            // completed by CompleteTx
	settledAt    time.Time       // when the work returned after CompleteTx
}

// written is the worker's Config.Written: it emits the event of a job
// whose outcome write committed, and hands a job that the outcome made
// wait again (retryable, scheduled, available) to finishCancelled, since
// a cancel request may have come while its work ran.
func (c *Client) written(j *dispatch.Job[Row], set dao.Set) {
	row := &j.Row
	if state, _ := set[ColState].(string); set != nil && !row.info.settled && !State(state).Final() {
		c.recheck.add(row.ID)
	} else if set != nil && (row.info.settled || State(state).Final()) {
		c.promos.add(row)
	}
	if set == nil || row.info.event == "" || !c.events.active() {
		return
	}
	at := c.clock.Peek()
	job := *row
	job.args = decodedArgs{}
	job.info = attemptInfo{}
	if row.info.settled {
		set = withOutput(row, dao.Set{ColState: string(StateCompleted), ColFinalizedAt: row.info.settledAt})
	}
	job.applyOutcome(set, at)
	stats := &JobStats{Run: row.info.ended.Sub(row.info.began), Complete: time.Since(row.info.ended)}
	if row.AttemptedAt != nil {
		stats.QueueWait = max(row.AttemptedAt.Sub(row.ScheduledAt), 0)
	}
	c.emit(&Event{Kind: row.info.event, Job: &job, Stats: stats, Queue: row.Queue, At: at})
}

// emitJob emits an event of kind for row, a job this client changed
// without running it (cancelled before it ran, discarded by the rescuer).
func (c *Client) emitJob(kind EventKind, row *Row, at time.Time) {
	if !c.events.active() {
		return
	}
	job := *row
	c.emit(&Event{Kind: kind, Job: &job, Queue: row.Queue, At: at.UTC()})
}

// emitQueue emits a queue event.
func (c *Client) emitQueue(kind EventKind, name string) {
	if !c.events.active() {
		return
	}
	c.emit(&Event{Kind: kind, Queue: name, At: c.clock.Peek()})
}

// applyOutcome sets the columns an outcome Set writes on r, as the write
// at at left them: the lease cleared, write times set to at.
func (r *Row) applyOutcome(set dao.Set, at time.Time) {
	for k, v := range set {
		if _, ok := v.(dispatch.WriteTime); ok {
			v = at
		}
		switch k {
		case ColState:
			if st, ok := v.(string); ok {
				r.State = State(st)
			}
		case ColScheduledAt:
			if t, ok := v.(time.Time); ok {
				r.ScheduledAt = t
			}
		case ColErrors:
			if e, ok := v.(string); ok {
				r.Errors = e
			}
		case ColAttempt:
			if n, ok := v.(int); ok {
				r.Attempt = n
			}
		case ColFinalizedAt:
			if t, ok := v.(time.Time); ok {
				r.FinalizedAt = &t
			}
		case ColUniqueKey:
			r.UniqueKey = nil
		case ColSequenceHead:
			if k, ok := v.(string); ok {
				r.SequenceHead = &k
			} else {
				r.SequenceHead = nil
			}
		case ColMetadata:
			if m, ok := v.(string); ok {
				r.Metadata = m
			}
		}
	}
	r.LeaseOwner = ""
	r.LeaseUntil = &at
}
