package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/batchloop"
)

// MaxOutcomeBatch is the most rows one outcome write names: a larger group
// of identical outcomes is written in several statements.
const MaxOutcomeBatch = 1000

// MaxOutcomeWriters is the most outcome statements one worker runs at
// once, each on a connection of the store's pool, when the outcomes
// waiting fall into several groups.
const MaxOutcomeWriters = 4

// WriteTime is a [dao.Set] value that a [Handler] returns in its outcome
// for a time column: the worker replaces it with the time of the outcome
// write (by the worker's clock), so that outcomes that differ only in
// that time (a completion time, say) are identical Sets and are written
// together in one statement.
type WriteTime struct{}

// outcome is a finished row whose outcome waits to be written: set nil
// releases the lease only.
type outcome[T any] struct {
	it  *inflight[T]
	set dao.Set
}

// completer collects the outcomes of finished handlers and hands them to
// the worker's completer loop, which writes each group of identical
// outcomes in one fenced statement.
type completer[T any] struct {
	mu      sync.Mutex
	pending []outcome[T]
	first   time.Time // when the oldest pending outcome was queued
	closed  bool      // the loop has ended: outcomes are written at once
	kick    chan struct{}
	stop    chan struct{} // closed by Run after the drain
	done    chan struct{} // closed when the loop has written everything
}

func newCompleter[T any]() *completer[T] {
	return &completer[T]{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (c *completer[T]) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// take removes and returns every pending outcome.
func (c *completer[T]) take() []outcome[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending = nil
	return out
}

// enqueue hands the outcome of a finished handler to the completer loop,
// or writes it at once when the loop has ended (a handler that outlived
// the drain). Its row counts as unwritten, holding a handler slot, until
// the write.
func (w *Worker[T]) enqueue(ctx context.Context, it *inflight[T], set dao.Set) {
	c := w.comp
	w.unwritten.Add(1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		w.writeOutcomes(ctx, []outcome[T]{{it, set}})
		return
	}
	if len(c.pending) == 0 {
		c.first = time.Now()
	}
	c.pending = append(c.pending, outcome[T]{it, set})
	c.mu.Unlock()
	c.signal()
}

// completeLoop writes queued outcomes until Run closes c.stop: as soon as
// BatchSize of them wait, or no handler runs (nothing more will join them
// before the next claim), or the oldest has waited OutcomeDelay, or the
// worker drains (ctx ended). Then it writes what is left and returns.
func (w *Worker[T]) completeLoop(ctx context.Context) {
	c := w.comp
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	runDone := ctx.Done()
	for {
		c.mu.Lock()
		n, first := len(c.pending), c.first
		c.mu.Unlock()
		draining := runDone == nil
		if n > 0 && (draining || n >= w.cfg.BatchSize || w.inFlight.Load() == 0 || time.Since(first) >= w.cfg.OutcomeDelay) {
			w.writeOutcomes(ctx, c.take())
			continue
		}
		var due <-chan time.Time
		if n > 0 {
			timer.Reset(w.cfg.OutcomeDelay - time.Since(first))
			due = timer.C
		}
		select {
		case <-c.kick:
		case <-due:
		case <-runDone:
			runDone = nil // drain: write every outcome at once from now on
		case <-c.stop:
			c.mu.Lock()
			c.closed = true
			rest := c.pending
			c.pending = nil
			c.mu.Unlock()
			timer.Stop()
			if len(rest) > 0 {
				w.writeOutcomes(ctx, rest)
			}
			return
		}
		timer.Stop()
	}
}

// writeOutcomes writes outs: the outcomes with identical Sets together,
// at most MaxOutcomeBatch rows per statement, each row fenced by its key
// and lease owner, with the lease cleared (owner "", lease end the time of
// the write). A store without UpdateKeys (not a [dao.KeyUpdater]) gets one
// fenced Update per row.
// Each row is counted once its write committed: completed (or released,
// for a nil Set), lost when the fence refused it, a write error when the
// write failed past WriteTimeout.
func (w *Worker[T]) writeOutcomes(ctx context.Context, outs []outcome[T]) {
	defer func() {
		w.unwritten.Add(-int64(len(outs)))
		w.signalFreed()
	}()
	ku, eu := w.keyUpdater, w.eachUpdater
	if ku == nil {
		for _, o := range outs {
			w.writeEach(ctx, o)
		}
		return
	}
	groups := map[string][]outcome[T]{}
	var order []string
	// A handler that returns one shared Set for a common outcome (a
	// completion, say) has it printed once.
	keys := map[uintptr]string{}
	for _, o := range outs {
		p := reflect.ValueOf(o.set).Pointer()
		k, ok := keys[p]
		if !ok {
			k = setKey(o.set)
			keys[p] = k
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], o)
	}
	// Each group of identical outcomes is one UpdateKeys. Outcomes that
	// differ row by row (a failure's error and retry time) but write the
	// same columns are one UpdateEach per shape, where the store has it.
	var writes []func()
	each := eu != nil
	shapes := map[string][]outcome[T]{}
	var shapeOrder []string
	for _, k := range order {
		g := groups[k]
		if each && len(g) == 1 {
			if sk, ok := w.shapeKey(g[0].set); ok {
				if _, seen := shapes[sk]; !seen {
					shapeOrder = append(shapeOrder, sk)
				}
				shapes[sk] = append(shapes[sk], g[0])
				continue
			}
		}
		for len(g) > 0 {
			b := g[:min(len(g), MaxOutcomeBatch)]
			writes = append(writes, func() { w.writeGroup(ctx, ku, b) })
			g = g[len(b):]
		}
	}
	for _, sk := range shapeOrder {
		g := shapes[sk]
		if len(g) == 1 {
			writes = append(writes, func() { w.writeGroup(ctx, ku, g) })
			continue
		}
		for len(g) > 0 {
			b := g[:min(len(g), MaxOutcomeBatch)]
			writes = append(writes, func() { w.writeEachGroup(ctx, eu, b) })
			g = g[len(b):]
		}
	}
	if len(writes) == 1 {
		writes[0]()
		return
	}
	// Up to MaxOutcomeWriters statements run at once, so that their round
	// trips overlap.
	sem := make(chan struct{}, MaxOutcomeWriters)
	var wg sync.WaitGroup
	for _, write := range writes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			write()
		})
	}
	wg.Wait()
}

// shapeKey returns a text equal for Sets that write the same columns
// (the lease columns aside, which every outcome clears), and false for a
// Set an UpdateEach cannot write: nil, holding an Increment, or writing
// nothing but the lease.
func (w *Worker[T]) shapeKey(set dao.Set) (string, bool) {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if k == w.cfg.OwnerField || k == w.cfg.UntilField {
			continue
		}
		if _, inc := set[k].(dao.Increment); inc {
			return "", false
		}
		b.WriteString(strconv.Quote(k))
		b.WriteByte(';')
	}
	return b.String(), b.Len() > 0
}

// writeEachGroup writes outs, whose Sets differ but write the same
// columns, in one fenced UpdateEach (each row matched by its key and
// lease owner), retried on a retryable error until WriteTimeout.
func (w *Worker[T]) writeEachGroup(ctx context.Context, eu dao.EachUpdater, outs []outcome[T]) {
	keys, err := timedWrite(ctx, w, func(wctx context.Context, now time.Time) ([]any, error) {
		rows := make([]dao.RowSet, len(outs))
		for i, o := range outs {
			set := make(dao.Set, len(o.set))
			for k, v := range o.set {
				if k == w.cfg.OwnerField || k == w.cfg.UntilField {
					continue // cleared for every row, below
				}
				if _, ok := v.(WriteTime); ok {
					v = now
				}
				set[k] = v
			}
			rows[i] = dao.RowSet{Match: []any{o.it.key, o.it.owner}, Set: set}
		}
		common := dao.Set{w.cfg.OwnerField: "", w.cfg.UntilField: now}
		return eu.UpdateEach(wctx, []string{w.cfg.KeyField, w.cfg.OwnerField}, dao.Criteria{}, common, rows)
	})
	w.written(ctx, outs, keys, err)
}

// writeGroup writes outs, whose Sets are identical, in one fenced
// UpdateKeys, retried on a retryable error until WriteTimeout.
func (w *Worker[T]) writeGroup(ctx context.Context, ku dao.KeyUpdater, outs []outcome[T]) {
	rows := map[string][]any{}
	for _, o := range outs {
		rows[o.it.owner] = append(rows[o.it.owner], o.it.key)
	}
	fence := w.owned(rows)
	keys, err := timedWrite(ctx, w, func(wctx context.Context, now time.Time) ([]any, error) {
		return ku.UpdateKeys(wctx, fence, w.outcomeSet(outs[0].set, now))
	})
	w.written(ctx, outs, keys, err)
}

// written counts the outcome writes of outs: keys are the rows written,
// err the write's error.
func (w *Worker[T]) written(ctx context.Context, outs []outcome[T], keys []any, err error) {
	if err != nil {
		w.writeErrors.Add(int64(len(outs)))
		w.log.Error("outcomes not written; the rows are claimable again when their leases end", "rows", len(outs), "err", err)
		for _, o := range outs {
			w.forget(o.it)
		}
		return
	}
	written := newKeySet(keys)
	for _, o := range outs {
		w.counted(ctx, o, written.has(o.it.key))
	}
}

// keySet is the set of the keys an outcome write returned. A key matches
// one of them when both print alike (fmt.Sprint), whatever their types
// (a driver may return an integer key as another integer type than the
// row's); the keys of a common comparable type are first looked up as
// they are, so that a write whose keys come back as the rows hold them
// prints none.
type keySet struct {
	keys    []any
	direct  map[any]struct{}
	printed map[string]bool // made at the first key not found directly
}

// newKeySet returns the set of keys.
func newKeySet(keys []any) *keySet {
	s := &keySet{keys: keys, direct: make(map[any]struct{}, len(keys))}
	for _, k := range keys {
		if directKey(k) {
			s.direct[k] = struct{}{}
		}
	}
	return s
}

// has reports whether key is in the set.
func (s *keySet) has(key any) bool {
	if directKey(key) {
		if _, ok := s.direct[key]; ok {
			return true
		}
	}
	if s.printed == nil {
		s.printed = make(map[string]bool, len(s.keys))
		for _, k := range s.keys {
			s.printed[fmt.Sprint(k)] = true
		}
	}
	return s.printed[fmt.Sprint(key)]
}

// directKey reports whether k is of a type keySet looks up as it is:
// integers and strings, comparable and equal only when they print alike.
func directKey(k any) bool {
	switch k.(type) {
	case int64, int32, int, uint64, uint32, uint, string:
		return true
	}
	return false
}

// writeEach writes the outcome of one row in one fenced Update, retried
// on a retryable error until WriteTimeout: the path of a store without
// UpdateKeys.
func (w *Worker[T]) writeEach(ctx context.Context, o outcome[T]) {
	n, err := timedWrite(ctx, w, func(wctx context.Context, now time.Time) (int64, error) {
		return w.cfg.Store.Update(wctx, w.fence(o.it.key, o.it.owner), w.outcomeSet(o.set, now))
	})
	if err != nil {
		w.writeErrors.Add(1)
		w.log.Error("outcome not written; the row is claimable again when its lease ends", "key", o.it.key, "err", err)
		w.forget(o.it)
		return
	}
	w.counted(ctx, o, n > 0)
}

// timedWrite runs write with the worker's current time as a
// batchloop.Write: detached from ctx's cancellation (a drain still
// writes), bounded by WriteTimeout, retrying an error a retry can cure (a
// busy database, a lost connection): left unwritten, a row would run
// again after its lease.
func timedWrite[T, V any](ctx context.Context, w *Worker[T], write func(wctx context.Context, now time.Time) (V, error)) (V, error) {
	return batchloop.Write(ctx, w.cfg.WriteTimeout, func(wctx context.Context) (V, error) {
		now, err := w.clock.Now(wctx)
		if err != nil {
			var zero V
			return zero, err
		}
		return write(wctx, now)
	})
}

// counted records the write of one outcome: written, or refused by the
// fence (the lease was lost; counted once, also if a renewal found it).
func (w *Worker[T]) counted(ctx context.Context, o outcome[T], written bool) {
	switch {
	case !written:
		w.mu.Lock()
		counted := o.it.lost
		w.mu.Unlock()
		if !counted {
			w.leaseLost.Add(1)
			w.m.add(ctx, w.m.lost, 1)
		}
		w.log.Warn("outcome refused by the fence", "key", o.it.key, "owner", o.it.owner, "err", ErrLeaseLost)
	case o.set == nil:
		w.released.Add(1)
	default:
		w.completed.Add(1)
	}
	if written && w.cfg.Written != nil && o.it.job != nil {
		w.cfg.Written(o.it.job, o.set)
	}
	w.forget(o.it)
}

// outcomeSet returns set with the lease cleared at now and every
// WriteTime value replaced by now; set is not changed.
func (w *Worker[T]) outcomeSet(set dao.Set, now time.Time) dao.Set {
	out := make(dao.Set, len(set)+2)
	for k, v := range set {
		if _, ok := v.(WriteTime); ok {
			v = now
		}
		out[k] = v
	}
	out[w.cfg.OwnerField] = ""
	out[w.cfg.UntilField] = now
	return out
}

// setKey returns a text that is equal for two Sets holding equal values
// of equal types: the outcomes a single statement can write. Sets whose
// values print alike but differ are never equal here, since %#v prints a
// value with its type's form; a value it cannot tell apart (a pointer
// printed as an address) only keeps two equal Sets apart.
func setKey(set dao.Set) string {
	if set == nil {
		return "\x00nil"
	}
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(set), cmp.Compare[string]) {
		fmt.Fprintf(&b, "%q=%T:%#v;", k, set[k], set[k])
	}
	return b.String()
}
