package dispatchbench

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/claimstore/claimstore/tools/internal/bench"
)

// Report is the outcome of [Run].
type Report struct {
	// Options are the run's options (without Command, Env and the
	// writers).
	Options Options
	// Started is when the run started (UTC).
	Started time.Time
	// Machine is the client machine; Backend the dialect, Server the
	// server's version; Table the table the run created.
	Machine bench.Machine
	Backend string
	Server  string
	Table   string
	// SeedTime is the time the batched inserts took.
	SeedTime time.Duration
	// Due is the next_fire_at every schedule got (the database's time);
	// ArmTime how long the UPDATE that set it took.
	Due     time.Time
	ArmTime time.Duration
	// Wall is the time from the start of that UPDATE until no schedule
	// was active (or the budget ended the run: Partial).
	Wall    time.Duration
	Partial bool
	// Fires counts every fire line; Failed those reporting an error
	// (none expected: the handler does nothing); Foreign those of a key
	// the run did not seed.
	Fires, Failed, Foreign int64
	// Distinct is the number of schedules with exactly one successful
	// fire line; Duplicates the fire lines beyond the first of a
	// schedule; Missed the schedules without a fire line that should have
	// one (every schedule, or in a partial run those the table shows
	// fired) plus, in a full run, those fired by a line that the table
	// does not show fired; Left, in a partial run, the schedules not
	// fired before the budget ended it.
	Distinct, Duplicates, Missed, Left int64
	// TableFired is the number of schedules whose status is fired at the
	// end.
	TableFired int64
	// Lag is the fire lag (claim time − next_fire_at) of the successful
	// fires.
	Lag bench.LatencySummary
	// Workers are the worker processes' results.
	Workers []WorkerResult
}

// FiresPerSec returns the schedules fired per second of Wall.
func (r *Report) FiresPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Distinct+r.Duplicates) / r.Wall.Seconds()
}

// Err returns an error when the verdict fails: a duplicate, a missed
// schedule, a failed fire or a fire of an unknown key; nil otherwise.
func (r *Report) Err() error {
	if r.Duplicates != 0 || r.Missed != 0 || r.Failed != 0 || r.Foreign != 0 {
		return fmt.Errorf("bench dispatch: verdict failed: %d duplicates, %d missed, %d failed fires, %d fires of unknown schedules",
			r.Duplicates, r.Missed, r.Failed, r.Foreign)
	}
	return nil
}

// WriteText writes the report to w: set-up, machine and server, seeding,
// fires per process, fires per second, lag and the verdict lines. It
// returns the first write error.
func (r *Report) WriteText(w io.Writer) error {
	ew := &bench.ErrWriter{W: w}
	o := r.Options
	batch := o.Batch
	if batch == 0 {
		batch = max(1, o.Concurrency/2) // dispatch.Config's default BatchSize
	}
	fmt.Fprintf(ew, "bench dispatch: %d once schedules due at once, %d worker processes x %d fires at once (claims of up to %d, poll interval %v, lease %v); table %s\n",
		o.Schedules, o.Processes, o.Concurrency, batch, o.PollInterval, o.Lease, r.Table)
	fmt.Fprintf(ew, "machine:     %s\n", r.Machine)
	server := r.Server
	if server == "" {
		server = "version unknown"
	}
	fmt.Fprintf(ew, "backend:     %s (%s)\n", r.Backend, server)
	fmt.Fprintf(ew, "seeded:      %d schedules in %v (%.0f rows/s, inserts of %d)\n", o.Schedules, r.SeedTime.Round(time.Millisecond),
		float64(o.Schedules)/r.SeedTime.Seconds(), o.LoadBatch)
	fmt.Fprintf(ew, "due:         all at %s, set by one UPDATE of %v\n", r.Due.Format(time.RFC3339Nano), r.ArmTime.Round(time.Millisecond))
	for _, wr := range r.Workers {
		fmt.Fprintf(ew, "  %-16s fires %7d", wr.ID, wr.Fires)
		if wr.Stopped {
			fmt.Fprintf(ew, "  claimed %d, outcomes %d, leases lost %d, write errors %d\n", wr.Stats.Claimed, wr.Stats.Completed, wr.Stats.LeaseLost, wr.Stats.WriteErrors)
		} else {
			fmt.Fprintf(ew, "  (no stop line)\n")
		}
	}
	fmt.Fprintf(ew, "fired:       %d of %d in %v: %.0f fires/s", r.Distinct, o.Schedules, r.Wall.Round(time.Millisecond), r.FiresPerSec())
	if r.Partial {
		fmt.Fprintf(ew, " (partial: the %v budget ended the run with %d not fired)", o.Budget, r.Left)
	}
	fmt.Fprintln(ew)
	fmt.Fprintf(ew, "fire lag:    p50 %v, p99 %v, max %v (claim time - next_fire_at, over %d fires)\n",
		r.Lag.P50.Round(time.Millisecond), r.Lag.P99.Round(time.Millisecond), r.Lag.Max.Round(time.Millisecond), r.Lag.N)
	if r.Failed > 0 || r.Foreign > 0 {
		fmt.Fprintf(ew, "failed fires %d, fires of unknown schedules %d\n", r.Failed, r.Foreign)
	}
	fmt.Fprintf(ew, "duplicates %d\n", r.Duplicates)
	fmt.Fprintf(ew, "missed %d (fired in the table: %d of %d)\n", r.Missed, r.TableFired, o.Schedules)
	switch {
	case r.Err() != nil:
		fmt.Fprintln(ew, "verdict: FAILED")
	case r.Partial:
		fmt.Fprintln(ew, "verdict: OK so far: every schedule fired before the budget ended the run fired exactly once")
	default:
		fmt.Fprintln(ew, "verdict: OK: every schedule fired exactly once")
	}
	return ew.Err
}

// JSONSchema is the version of the JSON document [Report.WriteJSON]
// writes; it changes when a field changes meaning or goes away.
const JSONSchema = 1

// JSONReport is the JSON document [Report.WriteJSON] writes. Durations
// are in seconds.
type JSONReport struct {
	Schema     int               `json:"schema"`
	Started    time.Time         `json:"started"`
	Machine    bench.JSONMachine `json:"machine"`
	Backend    string            `json:"backend"`
	Server     string            `json:"server"`
	Parameters JSONParameters    `json:"parameters"`
	// SeedSeconds is the seeding time; ArmSeconds that of the UPDATE that
	// made the schedules due; WallSeconds from that UPDATE's start to the
	// last fire.
	SeedSeconds float64 `json:"seed_seconds"`
	ArmSeconds  float64 `json:"arm_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	Partial     bool    `json:"partial"`
	FiresPerSec float64 `json:"fires_per_sec"`
	// LagP50Seconds, LagP99Seconds and LagMaxSeconds are the fire lag
	// (claim time − next_fire_at).
	LagP50Seconds float64 `json:"lag_p50_seconds"`
	LagP99Seconds float64 `json:"lag_p99_seconds"`
	LagMaxSeconds float64 `json:"lag_max_seconds"`
	Fires         int64   `json:"fires"`
	Distinct      int64   `json:"distinct"`
	Duplicates    int64   `json:"duplicates"`
	Missed        int64   `json:"missed"`
	Left          int64   `json:"left"`
	Failed        int64   `json:"failed"`
	TableFired    int64   `json:"table_fired"`
	// FiresPerProcess are the fire lines of each worker process, in
	// start order.
	FiresPerProcess []int `json:"fires_per_process"`
}

// JSONParameters are a run's settings in a [JSONReport].
type JSONParameters struct {
	Schedules     int     `json:"schedules"`
	Processes     int     `json:"processes"`
	Concurrency   int     `json:"concurrency"`
	Batch         int     `json:"batch"`
	TickSeconds   float64 `json:"tick_seconds"`
	LeaseSeconds  float64 `json:"lease_seconds"`
	LoadBatch     int     `json:"load_batch"`
	BudgetSeconds float64 `json:"budget_seconds"`
}

// JSON returns the report as a [JSONReport].
func (r *Report) JSON() JSONReport {
	o := r.Options
	out := JSONReport{
		Schema: JSONSchema, Started: r.Started, Machine: bench.JSONMachine(r.Machine), Backend: r.Backend, Server: r.Server,
		Parameters: JSONParameters{Schedules: o.Schedules, Processes: o.Processes, Concurrency: o.Concurrency, Batch: o.Batch,
			TickSeconds: o.PollInterval.Seconds(), LeaseSeconds: o.Lease.Seconds(), LoadBatch: o.LoadBatch, BudgetSeconds: o.Budget.Seconds()},
		SeedSeconds: r.SeedTime.Seconds(), ArmSeconds: r.ArmTime.Seconds(), WallSeconds: r.Wall.Seconds(), Partial: r.Partial,
		FiresPerSec: r.FiresPerSec(), LagP50Seconds: r.Lag.P50.Seconds(), LagP99Seconds: r.Lag.P99.Seconds(), LagMaxSeconds: r.Lag.Max.Seconds(),
		Fires: r.Fires, Distinct: r.Distinct, Duplicates: r.Duplicates, Missed: r.Missed, Left: r.Left, Failed: r.Failed,
		TableFired: r.TableFired, FiresPerProcess: []int{},
	}
	for _, w := range r.Workers {
		out.FiresPerProcess = append(out.FiresPerProcess, w.Fires)
	}
	return out
}

// WriteJSON writes the report to w as one indented [JSONReport]. It
// returns the encoding or write error.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r.JSON()); err != nil {
		return fmt.Errorf("bench dispatch: write JSON report: %w", err)
	}
	return nil
}
