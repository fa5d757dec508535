package jobs

import (
	"container/heap"
	"sync"
	"time"
)

// wakeGrain is the granularity of due wake-ups: retries and snoozes due
// within one grain of each other share one timer firing.
const wakeGrain = 10 * time.Millisecond

// dueWakes calls wake when jobs a queue's own handlers made retryable or
// scheduled a short time ahead (see [ScheduleAhead]) become due, so that
// the client makes them available and claims them then rather than at
// the scheduler's next tick. It keeps one timer, armed for the earliest
// pending time.
type dueWakes struct {
	wake func()

	mu    sync.Mutex
	due   grainHeap      // pending times, in grains since the epoch
	set   map[int64]bool // the members of due
	timer *time.Timer    // armed for due[0], or nil
	armed int64          // the grain the timer is armed for
}

// add asks for a wake-up at at (rounded up to the next grain, plus one
// grain for the outcome write that makes the job due).
func (d *dueWakes) add(at time.Time) {
	g := at.UnixNano()/int64(wakeGrain) + 2
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.set[g] {
		return
	}
	if d.set == nil {
		d.set = map[int64]bool{}
	}
	d.set[g] = true
	heap.Push(&d.due, g)
	d.arm()
}

// arm sets the timer for the earliest pending grain; d.mu is held.
func (d *dueWakes) arm() {
	if len(d.due) == 0 {
		return
	}
	g := d.due[0]
	if d.timer != nil && d.armed == g {
		return
	}
	wait := time.Until(time.Unix(0, g*int64(wakeGrain)))
	d.armed = g
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
		return
	}
	d.timer.Reset(wait)
}

// fire drops the grains that have come, wakes the worker and arms the
// timer for the next one.
func (d *dueWakes) fire() {
	now := time.Now().UnixNano() / int64(wakeGrain)
	d.mu.Lock()
	for len(d.due) > 0 && d.due[0] <= now {
		delete(d.set, heap.Pop(&d.due).(int64))
	}
	d.armed = 0
	d.arm()
	d.mu.Unlock()
	d.wake()
}

// stop stops the timer and forgets the pending times.
func (d *dueWakes) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.due, d.set, d.armed = nil, nil, 0
}

// grainHeap is a min-heap of grains (container/heap).
type grainHeap []int64

func (h grainHeap) Len() int           { return len(h) }
func (h grainHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h grainHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *grainHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *grainHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
