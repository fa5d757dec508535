package dispatch

import (
	"context"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// heartbeat renews leases once per tick until ctx ends.
// It also checks the store's pool (see newPoolWatch).
func (w *Worker[T]) heartbeat(ctx context.Context) {
	pool := newPoolWatch(w.cfg.Store, w.log, w.cfg.Concurrency)
	t := time.NewTicker(w.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.renew(ctx)
			pool.Check()
		}
	}
}

// renew extends, in one Update fenced by key and owner token, the leases of
// the running handlers whose last renewal (or claim) was sent at least half
// a lease ago. Rows the fence refused are lost: their handlers' contexts
// are cancelled with [ErrLeaseLost]. When the Update fails, the handlers
// whose leases end (by the host's monotonic clock) before the next tick
// plus WriteTimeout are cancelled the same way, so no handler runs on past
// the lease it holds.
func (w *Worker[T]) renew(ctx context.Context) {
	sent := time.Now()
	var due []*inflight[T]
	rows := map[string][]any{}
	w.mu.Lock()
	for it := range w.items {
		if it.state == stateRunning && sent.Sub(it.renewed) >= w.cfg.Lease/2 {
			due = append(due, it)
			rows[it.owner] = append(rows[it.owner], it.key)
		}
	}
	w.mu.Unlock()
	if len(due) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	now, err := w.clock.Now(wctx)
	var n int64
	if err == nil {
		n, err = w.cfg.Store.Update(wctx, w.owned(rows), dao.Set{w.cfg.UntilField: now.Add(w.cfg.Lease)})
	}
	if err != nil {
		w.renewFailures.Add(1)
		w.log.Warn("lease renewal failed", "rows", len(due), "err", err)
		horizon := time.Now().Add(w.cfg.PollInterval + w.cfg.WriteTimeout)
		for _, it := range due {
			if !it.renewed.Add(w.cfg.Lease).After(horizon) {
				w.lose(it)
			}
		}
		return
	}
	held := map[*inflight[T]]bool{}
	if int(n) == len(due) {
		for _, it := range due {
			held[it] = true
		}
	} else {
		// Some rows were lost: read back which are still held.
		found, err := w.cfg.Store.Find(wctx, dao.Query{Where: w.owned(rows)})
		if err != nil {
			w.renewFailures.Add(1)
			w.log.Warn("lease renewal: read back failed", "err", err)
			return
		}
		keys := map[any]bool{}
		for i := range found {
			keys[w.cfg.Key(&found[i])] = true
		}
		for _, it := range due {
			held[it] = keys[it.key]
		}
	}
	w.renewed.Add(n)
	w.m.add(ctx, w.m.renewals, n)
	w.mu.Lock()
	for _, it := range due {
		if held[it] {
			it.renewed = sent
		}
	}
	w.mu.Unlock()
	for _, it := range due {
		if !held[it] {
			w.lose(it)
		}
	}
}

// lose cancels the handler of a row whose lease is lost.
func (w *Worker[T]) lose(it *inflight[T]) {
	w.mu.Lock()
	it.lost = true
	w.mu.Unlock()
	w.leaseLost.Add(1)
	w.m.add(context.Background(), w.m.lost, 1)
	w.log.Warn("lease lost; handler cancelled", "key", it.key, "owner", it.owner)
	it.hctx.CancelOwn(ErrLeaseLost)
}
