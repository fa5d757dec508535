package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Variant is one measured way of claiming: the library, a raw-driver
// baseline or the naive loop, with its burn result.
type Variant struct {
	// Name identifies the variant in the report, such as "library".
	Name string
	// Path describes what one claim does, such as "fast path: one
	// statement (WITH … FOR UPDATE SKIP LOCKED … UPDATE … RETURNING)".
	Path string
	// Promised is the round-trip count the code promises per claim, such
	// as "1" or "1 + N"; empty when nothing is promised.
	Promised string
	// Baseline names the variant whose rows per second this one is
	// compared to; empty for none.
	Baseline string
	// Result is the measurement: with several runs, the median run by
	// rows per second.
	Result BurnResult
	// Runs holds every run of the variant, in the order they ran.
	Runs []BurnResult
}

// withRuns returns v with Runs set to runs and Result to their median run
// by rows per second (the lower of the two middle runs for an even count).
func (v Variant) withRuns(runs []BurnResult) Variant {
	v.Runs = runs
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b BurnResult) int { return cmp.Compare(a.RowsPerSec(), b.RowsPerSec()) })
	v.Result = sorted[(len(sorted)-1)/2]
	return v
}

// RowsPerSecRange returns the smallest and largest rows per second over
// the variant's runs (Result's when Runs is empty).
func (v Variant) RowsPerSecRange() (lo, hi float64) {
	lo, hi = v.Result.RowsPerSec(), v.Result.RowsPerSec()
	for _, r := range v.Runs {
		lo, hi = min(lo, r.RowsPerSec()), max(hi, r.RowsPerSec())
	}
	return lo, hi
}

// Err returns the first accounting error of any run of v.
func (v Variant) Err() error {
	if err := v.Result.Err(); err != nil {
		return err
	}
	for _, r := range v.Runs {
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Totals returns duplicates and lost ids summed over every run.
func (v Variant) Totals() (duplicates, lost int64) {
	if len(v.Runs) == 0 {
		return v.Result.Tally.Duplicates, v.Result.Tally.Lost
	}
	for _, r := range v.Runs {
		duplicates += r.Tally.Duplicates
		lost += r.Tally.Lost
	}
	return duplicates, lost
}

// Report is the outcome of one benchmark run: every variant measured on
// fresh tables of the same shape and size, one after the other, in one
// process.
type Report struct {
	// Machine is the client machine the run measured on.
	Machine Machine
	// Started is when the run started.
	Started time.Time
	// Backend is the backend's name; for SQL backends the dialect the
	// server announced ("mariadb" for a MariaDB server reached as mysql).
	Backend string
	// Server is the server's version string: PostgreSQL's
	// server_version, MySQL's and MariaDB's VERSION(), SQLite's
	// sqlite_version(); empty for the memory backend.
	Server  string
	Rows    int64
	Workers int
	Batch   int
	// Repeat is the number of runs of each variant.
	Repeat int
	// Budget is the wall time each run of a variant could take; zero for
	// none.
	Budget time.Duration
	// Selected are the variant names the run was asked for (see
	// [VariantNames]).
	Selected []string
	// Variants are in the order of [VariantNames], those the backend has.
	Variants []Variant
	// Notes are remarks printed after the figures.
	Notes []string
}

// Err returns the first accounting error of any run of any variant:
// duplicates, lost or unknown ids, or rows not in their post-claim state.
func (r *Report) Err() error {
	for _, v := range r.Variants {
		if err := v.Err(); err != nil {
			return err
		}
	}
	return nil
}

// repeated reports whether some variant ran more than once.
func (r *Report) repeated() bool {
	for _, v := range r.Variants {
		if len(v.Runs) > 1 {
			return true
		}
	}
	return false
}

// Variant returns the variant called name, or nil.
func (r *Report) Variant(name string) *Variant {
	for i := range r.Variants {
		if r.Variants[i].Name == name {
			return &r.Variants[i]
		}
	}
	return nil
}

// Ratio returns variant name's rows per second divided by those of its
// baseline, and false when it has no baseline or either rate is zero.
func (r *Report) Ratio(name string) (float64, bool) {
	v := r.Variant(name)
	if v == nil || v.Baseline == "" {
		return 0, false
	}
	b := r.Variant(v.Baseline)
	if b == nil || b.Result.RowsPerSec() == 0 || v.Result.RowsPerSec() == 0 {
		return 0, false
	}
	return v.Result.RowsPerSec() / b.Result.RowsPerSec(), true
}

// WriteText writes the report as text: the machine and the server, a
// block of figures for the first variant (the library, when selected),
// then, with more than one variant, a table of all of them. A partial
// variant (stopped by the budget) is marked as such with the rows it
// claimed of the rows loaded. It returns the first write error.
func (r *Report) WriteText(w io.Writer) error {
	ew := &ErrWriter{W: w}
	r.writeHead(ew)
	if len(r.Variants) > 0 {
		r.writeFirst(ew)
	}
	if len(r.Variants) > 1 {
		fmt.Fprintln(ew)
		r.writeTable(ew)
		fmt.Fprintln(ew)
		for _, v := range r.Variants {
			fmt.Fprintf(ew, "%-*s %s\n", nameWidth(r.Variants)+1, v.Name+":", v.Path)
		}
	}
	if notes := r.allNotes(); len(notes) > 0 {
		fmt.Fprintln(ew)
		for _, n := range notes {
			fmt.Fprintf(ew, "note: %s\n", n)
		}
	}
	return ew.Err
}

// allNotes returns the report's notes followed by one per partial
// variant.
func (r *Report) allNotes() []string {
	notes := slices.Clone(r.Notes)
	for _, v := range r.Variants {
		if v.Result.Partial {
			notes = append(notes, fmt.Sprintf("%s is partial: it stopped at the %v budget with %d of %d rows claimed; its rates cover those rows",
				v.Name, v.Result.Budget, v.Result.Tally.Claimed, r.Rows))
		}
	}
	return notes
}

// writeHead writes the machine and the backend with its server version.
func (r *Report) writeHead(w io.Writer) {
	server := r.Backend
	if r.Server != "" {
		server += " (" + r.Server + ")"
	} else {
		server += " (no server)"
	}
	fmt.Fprintf(w, "machine:         %s\n", r.Machine)
	fmt.Fprintf(w, "backend:         %s\n", server)
}

// done returns the rows column of a variant's run: the rows loaded, or
// "claimed/loaded partial" for a run its budget stopped.
func done(res BurnResult) string {
	if res.Partial {
		return fmt.Sprintf("%d/%d partial", res.Tally.Claimed, res.Rows)
	}
	return fmt.Sprintf("%d", res.Rows)
}

// writeFirst writes the block of figures of the first variant.
func (r *Report) writeFirst(w io.Writer) {
	v := r.Variants[0]
	res := v.Result
	if v.Name != VariantLibrary {
		fmt.Fprintf(w, "variant:         %s\n", v.Name)
	}
	fmt.Fprintf(w, "path:            %s\n", v.Path)
	fmt.Fprintf(w, "rows:            %d\n", r.Rows)
	if res.Partial {
		fmt.Fprintf(w, "partial:         stopped at the %v budget: %d of %d rows claimed, %d left\n", res.Budget, res.Tally.Claimed, r.Rows, res.Left)
	}
	fmt.Fprintf(w, "workers:         %d\n", r.Workers)
	fmt.Fprintf(w, "batch:           %d\n", r.Batch)
	if len(v.Runs) > 1 {
		lo, hi := v.RowsPerSecRange()
		fmt.Fprintf(w, "runs:            %d, figures of the median run by rows/s (rows/s range %.0f-%.0f)\n", len(v.Runs), lo, hi)
	}
	fmt.Fprintf(w, "wall time:       %s\n", res.Wall.Round(time.Millisecond))
	fmt.Fprintf(w, "claim calls:     %d (%d empty, %d retried)\n", res.Calls, res.EmptyCalls, res.Retries)
	fmt.Fprintf(w, "claims/s:        %.0f\n", res.CallsPerSec())
	fmt.Fprintf(w, "rows/s:          %.0f\n", res.RowsPerSec())
	fmt.Fprintf(w, "latency p50/p99: %s / %s (max %s)\n", fmtDur(res.Latency.P50), fmtDur(res.Latency.P99), fmtDur(res.Latency.Max))
	if res.CPU > 0 {
		fmt.Fprintf(w, "client CPU:      %s per claim (%s in all)\n", fmtDur(res.CPUPerCall()), res.CPU.Round(time.Millisecond))
	}
	if res.Counted {
		fmt.Fprintf(w, "round trips:     %d = %.3f per claim, %.3f per claimed row (promised: %s)\n",
			res.RoundTrips, res.RoundTripsPerCall(), res.RoundTripsPerRow(), orDash(v.Promised))
	} else {
		fmt.Fprintf(w, "round trips:     not counted (promised: %s)\n", orDash(v.Promised))
	}
	dup, lost := v.Totals()
	fmt.Fprintf(w, "duplicates:      %d\n", dup)
	fmt.Fprintf(w, "lost:            %d\n", lost)
	if res.Tally.Unknown != 0 || res.WrongState != 0 {
		fmt.Fprintf(w, "unknown ids:     %d\nwrong state:     %d\n", res.Tally.Unknown, res.WrongState)
	}
}

// writeTable writes one row per variant, with the rows/s range when the
// variants ran more than once.
func (r *Report) writeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rangeHead := ""
	if r.repeated() {
		rangeHead = "rows/s range\t"
	}
	fmt.Fprintln(tw, "variant\trows\trows/s\t"+rangeHead+"claims/s\tp50\tp99\tcpu/claim\trt/claim\trt/row\tdup\tlost\tratio\t")
	for _, v := range r.Variants {
		res := v.Result
		rangeCol := ""
		if r.repeated() {
			lo, hi := v.RowsPerSecRange()
			rangeCol = fmt.Sprintf("%.0f-%.0f\t", lo, hi)
		}
		dup, lost := v.Totals()
		rt, rtRow := "-", "-"
		if res.Counted {
			rt, rtRow = fmt.Sprintf("%.3f", res.RoundTripsPerCall()), fmt.Sprintf("%.3f", res.RoundTripsPerRow())
		}
		ratioText := "-"
		if q, ok := r.Ratio(v.Name); ok {
			ratioText = fmt.Sprintf("%.3fx %s", q, v.Baseline)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t\n", v.Name, done(res), res.RowsPerSec(), rangeCol, res.CallsPerSec(),
			fmtDur(res.Latency.P50), fmtDur(res.Latency.P99), fmtDur(res.CPUPerCall()), rt, rtRow, dup, lost, ratioText)
	}
	tw.Flush()
}

func nameWidth(vs []Variant) int {
	n := 0
	for _, v := range vs {
		n = max(n, len(v.Name))
	}
	return n
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// fmtDur prints d in seconds, milliseconds (two decimals) or whole
// microseconds, whichever fits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}

// ErrWriter writes to W until a write fails, then keeps that error in Err
// and writes nothing more, so a report can write many lines and check one
// error at the end.
type ErrWriter struct {
	W   io.Writer
	Err error
}

// Write writes p to W unless an earlier write failed; it returns that
// earlier error then.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	e.Err = err
	return n, err
}
