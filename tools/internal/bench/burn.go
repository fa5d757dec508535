package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimstore/claimstore/dao"
)

// ClaimFunc claims up to limit pending rows for worker w (0-based) and
// returns them in their post-claim state. On failure it returns the rows it
// did claim together with the error; an error for which
// [dao.IsRetryable] is true makes the burner retry.
type ClaimFunc func(ctx context.Context, w, limit int) ([]Job, error)

// BurnConfig describes one burn-down of a loaded table.
type BurnConfig struct {
	// Label names the variant in progress lines.
	Label string
	// Rows is the number of loaded rows; their ids are 1..Rows.
	Rows int64
	// Workers is the number of concurrent claimers (> 0).
	Workers int
	// Batch is the claim limit of every call (> 0).
	Batch int
	// Claim performs one claim call.
	Claim ClaimFunc
	// Pending reports whether some row is still claimable. The burner
	// calls it only after an empty claim while the tally is short of Rows,
	// to tell "all rows taken" from "rows still held by other claimers",
	// so it runs often under contention: make it cheap (look for one row,
	// do not count them all) and use a connection whose round trips are
	// not counted.
	Pending func(ctx context.Context) (bool, error)
	// RoundTrips returns the running total of round trips of the claim
	// path, or is nil when they cannot be counted.
	RoundTrips func() int64
	// Progress receives a progress line every ProgressEvery (default 1 s)
	// while the burn runs; nil disables it.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Stall aborts the burn when no row has been claimed for this long
	// while rows remain (default 60 s).
	Stall time.Duration
	// Budget, when > 0, is the wall time the burn may take: once it has
	// passed, no worker starts another claim call (but every worker makes
	// its first, so that a partial result has figures), the calls under
	// way finish and are counted, and the result is partial when rows
	// remain. Zero means no budget.
	Budget time.Duration
	// Remaining counts the rows still claimable in the table. A burn
	// stopped by Budget calls it once, after every worker has returned, so
	// that the rows the database shows as claimed can be held against the
	// rows the claimers returned (see [BurnResult.Partial]). Required when
	// Budget > 0; use a connection whose round trips are not counted.
	Remaining func(ctx context.Context) (int64, error)
}

// BurnResult is what one burn measured.
type BurnResult struct {
	Label   string
	Rows    int64
	Workers int
	Batch   int
	// Wall is the time from the first claim call to the last return.
	Wall time.Duration
	// Calls is the number of claim calls, empty and failed ones included;
	// EmptyCalls those that returned no row; Retries those that failed
	// with a retryable error.
	Calls, EmptyCalls, Retries int64
	// RowsClaimed is the number of rows all calls returned.
	RowsClaimed int64
	// WrongState counts returned rows not in their post-claim state
	// (status claimed, locked by the caller, attempts 1).
	WrongState int64
	// Latency summarizes the duration of every claim call.
	Latency LatencySummary
	// RoundTrips is the number of round trips of the claim path during the
	// burn; Counted is false when the variant has no hook.
	RoundTrips int64
	Counted    bool
	// CPU is the CPU time (user + system) the whole process used during
	// the burn, GC included: the client's cost, since the database server
	// runs in another process (SQLite runs in this one). Zero when the
	// system cannot tell.
	CPU time.Duration
	// Tally is the id accounting.
	Tally TallyResult
	// Partial is true when the burn stopped at [BurnConfig.Budget] with
	// rows left: Wall, the rates and the counts then cover only the
	// RowsClaimed rows claimed before, Left is the number of rows still
	// claimable in the table, and Tally.Lost counts the rows the table
	// shows as claimed that no claimer returned (Rows - Tally.Claimed -
	// Left), not the rows nobody got to.
	Partial bool
	// Budget is the budget the burn ran under; zero for none.
	Budget time.Duration
	// Left is the number of rows still claimable when a partial burn
	// stopped; zero otherwise.
	Left int64
}

// CPUPerCall returns the process CPU time per claim call.
func (r BurnResult) CPUPerCall() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Calls)
}

// CallsPerSec returns claim calls per second of wall time.
func (r BurnResult) CallsPerSec() float64 { return perSec(r.Calls, r.Wall) }

// RowsPerSec returns claimed rows per second of wall time.
func (r BurnResult) RowsPerSec() float64 { return perSec(r.RowsClaimed, r.Wall) }

// RoundTripsPerCall returns round trips divided by claim calls (0 when
// nothing was counted).
func (r BurnResult) RoundTripsPerCall() float64 { return ratio(r.RoundTrips, r.Calls) }

// RoundTripsPerRow returns round trips divided by claimed rows.
func (r BurnResult) RoundTripsPerRow() float64 { return ratio(r.RoundTrips, r.RowsClaimed) }

// Err returns nil when the accounting found no duplicate, lost or unknown
// id and every returned row was in its post-claim state.
func (r BurnResult) Err() error {
	if err := r.Tally.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.Label, err)
	}
	if r.WrongState != 0 {
		return fmt.Errorf("bench: %s: %d claimed rows were not returned in their post-claim state", r.Label, r.WrongState)
	}
	return nil
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// ErrStalled reports that rows remained claimable but no claim returned any
// of them for [BurnConfig.Stall].
var ErrStalled = errors.New("bench: burn stalled")

// Burn runs cfg.Workers goroutines, each calling cfg.Claim with limit
// cfg.Batch until no row is left, marks every returned id in a [Tally] and
// returns the measurements. It returns an error, together with the partial
// result, when a claim fails with an error that is not retryable, when
// Pending fails, when the burn stalls ([ErrStalled]) or when ctx ends; the
// accounting outcome itself is reported by [BurnResult.Err].
func Burn(ctx context.Context, cfg BurnConfig) (BurnResult, error) {
	res := BurnResult{Label: cfg.Label, Rows: cfg.Rows, Workers: cfg.Workers, Batch: cfg.Batch}
	if cfg.Workers <= 0 || cfg.Batch <= 0 || cfg.Rows < 0 || cfg.Claim == nil || cfg.Pending == nil ||
		cfg.Budget < 0 || (cfg.Budget > 0 && cfg.Remaining == nil) {
		return res, fmt.Errorf("bench: burn: %w: workers %d and batch %d must be > 0, rows %d >= 0, budget %v >= 0, Claim and Pending set, Remaining set with a budget",
			dao.ErrInvalidArgument, cfg.Workers, cfg.Batch, cfg.Rows, cfg.Budget)
	}
	res.Budget = cfg.Budget
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = time.Second
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 60 * time.Second
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b := &burner{cfg: cfg, cancel: cancel, tally: NewTally(cfg.Rows), lats: make([]Latencies, cfg.Workers)}
	var rt0 int64
	if cfg.RoundTrips != nil {
		rt0 = cfg.RoundTrips()
	}
	cpu0, cpuOK := processCPU()
	b.start = time.Now()
	b.lastProgress.Store(b.start.UnixNano())
	stopProgress := b.startProgress()
	if cfg.Budget > 0 {
		budget := time.AfterFunc(cfg.Budget, func() { b.overBudget.Store(true) })
		defer budget.Stop()
	}
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() { b.work(ctx, w) })
	}
	wg.Wait()
	res.Wall = time.Since(b.start)
	if cpu1, ok := processCPU(); ok && cpuOK {
		res.CPU = cpu1 - cpu0
	}
	stopProgress()
	if cfg.RoundTrips != nil {
		res.RoundTrips = cfg.RoundTrips() - rt0
		res.Counted = true
	}
	b.fill(&res)
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	if b.overBudget.Load() && res.Tally.Claimed < cfg.Rows {
		if err := settlePartial(ctx, cfg, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// settlePartial marks res, a burn stopped by its budget with rows left,
// as partial: it counts the rows still claimable with cfg.Remaining and
// sets Tally.Lost to the rows the table shows as claimed that no claimer
// returned. A returned row the table still shows as claimable is counted
// in WrongState, since the claim that returned it did not change it.
func settlePartial(ctx context.Context, cfg BurnConfig, res *BurnResult) error {
	left, err := cfg.Remaining(ctx)
	if err != nil {
		return fmt.Errorf("bench: %s: count the rows left after the budget: %w", cfg.Label, err)
	}
	res.Partial, res.Left = true, left
	res.Tally.SampleLost = nil // the never-claimed ids are not lost here
	lost := cfg.Rows - res.Tally.Claimed - left
	res.Tally.Lost = max(lost, 0)
	if lost < 0 {
		res.WrongState += -lost
	}
	return nil
}

// burner is the state of one burn that its workers share.
type burner struct {
	cfg    BurnConfig
	cancel context.CancelCauseFunc // ends the burn with its cause
	tally  *Tally
	lats   []Latencies // one per worker
	start  time.Time

	calls, empty, retries, rowsClaimed, wrong atomic.Int64
	lastProgress                              atomic.Int64 // unix nanos of the last call that claimed a row
	overBudget                                atomic.Bool  // set when the budget has passed: start no more calls
}

// work is worker w: it claims until no row is left, the burn fails, the
// budget has passed (after its first call) or ctx ends.
func (b *burner) work(ctx context.Context, w int) {
	name := WorkerName(w)
	backoff := time.Millisecond
	for first := true; ctx.Err() == nil && (first || !b.overBudget.Load()); first = false {
		n, err := b.claim(ctx, w, name)
		switch {
		case err != nil && dao.IsRetryable(err):
			b.retries.Add(1)
			sleep(ctx, backoff)
			backoff = min(backoff*2, 50*time.Millisecond)
			continue
		case err != nil:
			b.cancel(fmt.Errorf("bench: %s: worker %d: %w", b.cfg.Label, w, err))
			return
		}
		backoff = time.Millisecond
		if n > 0 {
			continue
		}
		b.empty.Add(1)
		if !b.rowsLeft(ctx) {
			return
		}
		sleep(ctx, time.Millisecond)
	}
}

// claim makes one claim call for worker w (locked_by name), times it and
// accounts for the rows it returned; it returns their number and the
// call's error.
func (b *burner) claim(ctx context.Context, w int, name string) (int, error) {
	t0 := time.Now()
	rows, err := b.cfg.Claim(ctx, w, b.cfg.Batch)
	b.lats[w].Add(time.Since(t0))
	b.calls.Add(1)
	for i := range rows {
		b.tally.Mark(rows[i].ID)
		if rows[i].Status != StatusClaimed || rows[i].LockedBy != name || rows[i].Attempts != 1 {
			b.wrong.Add(1)
		}
	}
	b.rowsClaimed.Add(int64(len(rows)))
	if len(rows) > 0 {
		b.lastProgress.Store(time.Now().UnixNano())
	}
	return len(rows), err
}

// rowsLeft, after an empty claim, reports whether the worker should go on
// claiming: some row is still claimable. It ends the burn (through
// b.cancel) when Pending fails or when no row has been claimed for
// cfg.Stall although some remain.
func (b *burner) rowsLeft(ctx context.Context) bool {
	if b.tally.Claimed() >= b.cfg.Rows {
		return false
	}
	pending, err := b.cfg.Pending(ctx)
	if err != nil {
		b.cancel(fmt.Errorf("bench: %s: look for pending rows: %w", b.cfg.Label, err))
		return false
	}
	if !pending {
		return false
	}
	if time.Since(time.Unix(0, b.lastProgress.Load())) > b.cfg.Stall {
		b.cancel(fmt.Errorf("%w: rows still claimable, none claimed for %v", ErrStalled, b.cfg.Stall))
		return false
	}
	return true
}

// startProgress writes a progress line to cfg.Progress every
// cfg.ProgressEvery until the returned function is called, which waits
// for the writer to stop. Without cfg.Progress it does nothing.
func (b *burner) startProgress() (stop func()) {
	if b.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(b.cfg.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				el := time.Since(b.start)
				n := b.rowsClaimed.Load()
				fmt.Fprintf(b.cfg.Progress, "%s: %d/%d rows claimed (%.1f%%) in %d calls, %.0f rows/s, %s elapsed\n",
					b.cfg.Label, n, b.cfg.Rows, 100*ratio(n, max(b.cfg.Rows, 1)), b.calls.Load(), perSec(n, el), el.Round(time.Millisecond))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// fill sets res's latencies, counts and accounting from the burn's.
func (b *burner) fill(res *BurnResult) {
	var all Latencies
	for i := range b.lats {
		all.Merge(&b.lats[i])
	}
	res.Latency = all.Summary()
	res.Calls, res.EmptyCalls, res.Retries = b.calls.Load(), b.empty.Load(), b.retries.Load()
	res.RowsClaimed, res.WrongState = b.rowsClaimed.Load(), b.wrong.Load()
	res.Tally = b.tally.Result()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
