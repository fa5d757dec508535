package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// JSONSchema is the version of the JSON document [Report.WriteJSON]
// writes; it changes when a field changes meaning or goes away.
const JSONSchema = 1

// JSONReport is the JSON document [Report.WriteJSON] writes, one per run,
// for comparing runs across commits. Rates are per second of wall time,
// durations are in seconds (wall) or microseconds (per claim).
type JSONReport struct {
	// Schema is [JSONSchema].
	Schema int `json:"schema"`
	// Started is when the run started (RFC 3339).
	Started time.Time `json:"started"`
	// Machine is the client machine.
	Machine JSONMachine `json:"machine"`
	// Backend is the backend's name; Server the server's version string,
	// empty for memory.
	Backend string `json:"backend"`
	Server  string `json:"server"`
	// Parameters are the run's settings.
	Parameters JSONParameters `json:"parameters"`
	// Variants are the measured variants, in the order they ran.
	Variants []JSONVariant `json:"variants"`
	// Notes are the report's remarks, partial variants included.
	Notes []string `json:"notes"`
}

// JSONMachine is [Machine] in a [JSONReport].
type JSONMachine struct {
	CPUs      int    `json:"cpus"`
	OS        string `json:"goos"`
	Arch      string `json:"goarch"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"revision,omitempty"`
}

// JSONParameters are a run's settings in a [JSONReport].
type JSONParameters struct {
	Rows    int64 `json:"rows"`
	Workers int   `json:"workers"`
	Batch   int   `json:"batch"`
	Repeat  int   `json:"repeat"`
	// BudgetSeconds is the budget per run of a variant; 0 for none.
	BudgetSeconds float64 `json:"budget_seconds"`
	// Variants are the names the run was asked for ([VariantNames]).
	Variants []string `json:"variants"`
}

// JSONVariant is one variant's figures in a [JSONReport]: those of its
// median run by rows per second when it ran more than once.
type JSONVariant struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// RowsPerSec and ClaimsPerSec are claimed rows and claim calls per
	// second of wall time.
	RowsPerSec   float64 `json:"rows_per_sec"`
	ClaimsPerSec float64 `json:"claims_per_sec"`
	// WallSeconds is the burn's wall time.
	WallSeconds float64 `json:"wall_seconds"`
	// Partial is true when the budget stopped the run; RowsClaimed of
	// RowsTotal rows were claimed then, and the rates cover those.
	Partial     bool  `json:"partial"`
	RowsClaimed int64 `json:"rows_claimed"`
	RowsTotal   int64 `json:"rows_total"`
	Calls       int64 `json:"calls"`
	// LatencyP50Micros and LatencyP99Micros are claim call latencies.
	LatencyP50Micros float64 `json:"latency_p50_us"`
	LatencyP99Micros float64 `json:"latency_p99_us"`
	// RoundTripsPerClaim is null when the variant's round trips are not
	// counted.
	RoundTripsPerClaim *float64 `json:"round_trips_per_claim"`
	// CPUPerClaimMicros is the process CPU time per claim call, null when
	// the system cannot tell.
	CPUPerClaimMicros *float64 `json:"cpu_per_claim_us"`
	// Duplicates and Lost are summed over every run of the variant.
	Duplicates int64 `json:"duplicates"`
	Lost       int64 `json:"lost"`
	// Ratio is RowsPerSec divided by that of the variant named RatioTo
	// (the raw baseline); null when that variant did not run.
	Ratio   *float64 `json:"ratio"`
	RatioTo string   `json:"ratio_to,omitempty"`
	// RunsRowsPerSec are the rows per second of every run, in the order
	// they ran.
	RunsRowsPerSec []float64 `json:"runs_rows_per_sec"`
}

// JSON returns the report as a [JSONReport].
func (r *Report) JSON() JSONReport {
	out := JSONReport{
		Schema: JSONSchema, Started: r.Started, Backend: r.Backend, Server: r.Server,
		Machine: JSONMachine(r.Machine),
		Parameters: JSONParameters{
			Rows: r.Rows, Workers: r.Workers, Batch: r.Batch, Repeat: r.Repeat,
			BudgetSeconds: r.Budget.Seconds(), Variants: append([]string{}, r.Selected...),
		},
		Variants: []JSONVariant{},
		Notes:    append([]string{}, r.allNotes()...),
	}
	for _, v := range r.Variants {
		res := v.Result
		dup, lost := v.Totals()
		jv := JSONVariant{
			Name: v.Name, Path: v.Path,
			RowsPerSec: res.RowsPerSec(), ClaimsPerSec: res.CallsPerSec(), WallSeconds: res.Wall.Seconds(),
			Partial: res.Partial, RowsClaimed: res.Tally.Claimed, RowsTotal: res.Rows, Calls: res.Calls,
			LatencyP50Micros: micros(res.Latency.P50), LatencyP99Micros: micros(res.Latency.P99),
			Duplicates: dup, Lost: lost, RunsRowsPerSec: []float64{},
		}
		if res.Counted {
			jv.RoundTripsPerClaim = ptr(res.RoundTripsPerCall())
		}
		if res.CPU > 0 {
			jv.CPUPerClaimMicros = ptr(micros(res.CPUPerCall()))
		}
		if q, ok := r.Ratio(v.Name); ok {
			jv.Ratio, jv.RatioTo = ptr(q), v.Baseline
		}
		runs := v.Runs
		if len(runs) == 0 {
			runs = []BurnResult{res}
		}
		for _, run := range runs {
			jv.RunsRowsPerSec = append(jv.RunsRowsPerSec, run.RowsPerSec())
		}
		out.Variants = append(out.Variants, jv)
	}
	return out
}

// WriteJSON writes the report to w as one indented [JSONReport]. It
// returns the encoding or write error.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r.JSON()); err != nil {
		return fmt.Errorf("bench: write JSON report: %w", err)
	}
	return nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func ptr[T any](v T) *T { return &v }
