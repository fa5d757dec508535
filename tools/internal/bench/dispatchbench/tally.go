package dispatchbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/tools/internal/bench"
)

// WorkerResult is what one worker process did.
type WorkerResult struct {
	// ID is the worker id.
	ID string
	// Fires is the number of fire lines it wrote.
	Fires int
	// Stats are the totals of its stop line; Stopped is false when it
	// wrote none (it did not stop cleanly).
	Stats   dispatch.Stats
	Stopped bool
}

// tally reads every worker's fires and the table and fills in the
// verdict: each seeded schedule must have exactly one successful fire
// line and be fired in the table (in a partial run: each schedule the
// table shows fired must have its line).
func (r *run) tally(ctx context.Context) error {
	rep := r.rep
	lines := make([]uint8, r.o.Schedules) // fire lines per schedule, capped at 255
	var lags bench.Latencies
	for _, w := range r.workers {
		res := WorkerResult{ID: w.id}
		err := w.events(func(e *cli.Event) {
			switch e.Type {
			case "stop":
				res.Stopped = e.Stats != nil
				if e.Stats != nil {
					res.Stats = *e.Stats
				}
			case "fire":
				res.Fires++
				rep.Fires++
				if !e.OK {
					rep.Failed++
					return
				}
				i, ok := index(e.Key, r.o.Schedules)
				if !ok {
					rep.Foreign++
					return
				}
				if lines[i] < 255 {
					lines[i]++
				}
				lags.Add(time.Duration(e.Lag * float64(time.Second)))
			}
		})
		if err != nil {
			return err
		}
		rep.Workers = append(rep.Workers, res)
	}
	rep.Lag = lags.Summary()
	notFired, err := r.notFired(ctx)
	if err != nil {
		return err
	}
	rep.TableFired = int64(r.o.Schedules - len(notFired))
	for i, n := range lines {
		switch {
		case n > 1:
			rep.Duplicates += int64(n) - 1
		case n == 1:
			rep.Distinct++
		}
		if n > 0 {
			continue
		}
		if _, left := notFired[i]; left && rep.Partial {
			rep.Left++ // not reached before the budget ran out
			continue
		}
		rep.Missed++ // fired in the table with no fire line, or never fired
	}
	if !rep.Partial {
		for i := range notFired {
			if lines[i] > 0 {
				rep.Missed++ // a fire line, but the table does not say fired
			}
		}
	}
	return nil
}

// index returns i for the key of the i-th of n schedules.
func index(k string, n int) (int, bool) {
	s, ok := strings.CutPrefix(k, "bench-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n || key(i) != k {
		return 0, false
	}
	return i, true
}

// notFired returns the indexes of the schedules whose status is not
// fired, read from the table in pages by key.
func (r *run) notFired(ctx context.Context) (map[int]struct{}, error) {
	out := map[int]struct{}{}
	after := ""
	for {
		rows, err := r.store.Find(ctx, dao.Query{
			Where:   dao.And(dao.Ne(dispatch.ColStatus, string(dispatch.StatusFired)), dao.Gt(dispatch.ColKey, after)),
			OrderBy: []dao.Order{dao.Asc(dispatch.ColKey)},
			Limit:   5000,
		})
		if err != nil {
			return nil, fmt.Errorf("bench dispatch: read the schedules not fired: %w", err)
		}
		for _, s := range rows {
			if i, ok := index(s.Key, r.o.Schedules); ok {
				out[i] = struct{}{}
			}
			after = s.Key
		}
		if len(rows) < 5000 {
			return out, nil
		}
	}
}
