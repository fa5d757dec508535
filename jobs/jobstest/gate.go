package jobstest

import (
	"context"
	"sync"
)

// Gate holds the work of jobs in a test until the test opens it: a work
// function that calls [Gate.Wait] reports its job on [Gate.Started] and
// returns once the gate is open. A test uses it to keep jobs running
// while it looks at what a limit, a console page or a command shows of
// them, and then to let them finish:
//
//	gate := jobstest.NewGate(10)
//	defer gate.Open()
//	jobs.AddWorker(ws, jobs.WorkFunc[ReportArgs](func(ctx context.Context, j *jobs.Job[ReportArgs]) error {
//		return gate.Wait(ctx, j.ID)
//	}))
//	// … insert jobs, run the client …
//	<-gate.Started() // a job runs
//	gate.Open()      // every job held returns
//
// A Gate is safe for concurrent use.
type Gate struct {
	started chan int64
	open    chan struct{}
	once    sync.Once
}

// NewGate returns a closed gate whose Started channel holds up to n job
// ids that no one has received yet; a Wait beyond them blocks until the
// test receives one, the gate opens or its context ends.
func NewGate(n int) *Gate {
	return &Gate{started: make(chan int64, n), open: make(chan struct{})}
}

// Wait reports id on Started, then blocks until the gate is open (it
// returns nil) or ctx ends (it returns ctx.Err(), as a work function
// cancelled or stopped by a drain does). Once the gate is open, a Wait
// that has not reported its id yet returns nil without reporting it.
func (g *Gate) Wait(ctx context.Context, id int64) error {
	select {
	case g.started <- id:
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Started returns the channel on which Wait reports the id of each job it
// holds, in the order they came.
func (g *Gate) Started() <-chan int64 { return g.started }

// Open opens the gate: every Wait returns nil, those blocked now and
// those to come. It may be called more than once.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }
