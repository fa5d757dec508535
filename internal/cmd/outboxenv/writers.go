package outboxenv

import (
	"context"
	"sync"
	"sync/atomic"
)

// Writers are goroutines writing a run's messages, started by
// [StartWriters].
type Writers struct {
	// Written is the number of messages written so far.
	Written atomic.Int64
	// Errs receives the error of each writer that failed (it then
	// stops); it has room for one error per writer.
	Errs chan error
	// Done is closed when every writer has returned.
	Done chan struct{}
}

// StartWriters starts n writers that together write messages 0..total-1
// in groups of up to size: writer i calls write(ctx, first, count) for the
// groups starting at i*size, (i+n)*size, and so on, until its groups are
// written or a call fails. write does its own retries.
func StartWriters(ctx context.Context, n, size, total int, write func(ctx context.Context, first, count int) error) *Writers {
	w := &Writers{Errs: make(chan error, n), Done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for first := i * size; first < total; first += n * size {
				count := min(size, total-first)
				if err := write(ctx, first, count); err != nil {
					w.Errs <- err
					return
				}
				w.Written.Add(int64(count))
			}
		})
	}
	go func() { wg.Wait(); close(w.Done) }()
	return w
}
