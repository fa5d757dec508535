package bench

import (
	"fmt"
	"io"
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
	// Result is the measurement.
	Result BurnResult
}

// Report is the outcome of one benchmark run: every variant measured on
// fresh tables of the same shape and size, one after the other, in one
// process.
type Report struct {
	Backend string
	// Server is the server's version string, when known.
	Server  string
	Rows    int64
	Workers int
	Batch   int
	// Variants are in the order they ran; the first is the library.
	Variants []Variant
	// Notes are remarks printed after the figures.
	Notes []string
}

// Err returns the first variant's accounting error, if any.
func (r *Report) Err() error {
	for _, v := range r.Variants {
		if err := v.Result.Err(); err != nil {
			return err
		}
	}
	return nil
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

// WriteText writes the report as text: a block of figures for the first
// variant (the library), then, with more than one variant, a table of all
// of them. It returns the first write error.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	if len(r.Variants) > 0 {
		v := r.Variants[0]
		res := v.Result
		server := r.Backend
		if r.Server != "" {
			server += " (" + r.Server + ")"
		}
		fmt.Fprintf(ew, "backend:         %s\n", server)
		fmt.Fprintf(ew, "path:            %s\n", v.Path)
		fmt.Fprintf(ew, "rows:            %d\n", r.Rows)
		fmt.Fprintf(ew, "workers:         %d\n", r.Workers)
		fmt.Fprintf(ew, "batch:           %d\n", r.Batch)
		fmt.Fprintf(ew, "wall time:       %s\n", res.Wall.Round(time.Millisecond))
		fmt.Fprintf(ew, "claim calls:     %d (%d empty, %d retried)\n", res.Calls, res.EmptyCalls, res.Retries)
		fmt.Fprintf(ew, "claims/s:        %.0f\n", res.CallsPerSec())
		fmt.Fprintf(ew, "rows/s:          %.0f\n", res.RowsPerSec())
		fmt.Fprintf(ew, "latency p50/p99: %s / %s (max %s)\n", fmtDur(res.Latency.P50), fmtDur(res.Latency.P99), fmtDur(res.Latency.Max))
		if res.Counted {
			fmt.Fprintf(ew, "round trips:     %d = %.3f per claim, %.3f per claimed row (promised: %s)\n",
				res.RoundTrips, res.RoundTripsPerCall(), res.RoundTripsPerRow(), orDash(v.Promised))
		} else {
			fmt.Fprintf(ew, "round trips:     not counted (promised: %s)\n", orDash(v.Promised))
		}
		fmt.Fprintf(ew, "duplicates:      %d\n", res.Tally.Duplicates)
		fmt.Fprintf(ew, "lost:            %d\n", res.Tally.Lost)
		if res.Tally.Unknown != 0 || res.WrongState != 0 {
			fmt.Fprintf(ew, "unknown ids:     %d\nwrong state:     %d\n", res.Tally.Unknown, res.WrongState)
		}
	}
	if len(r.Variants) > 1 {
		fmt.Fprintln(ew)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "variant\trows/s\tclaims/s\tp50\tp99\trt/claim\trt/row\tdup\tlost\tratio\t")
		for _, v := range r.Variants {
			res := v.Result
			rt, rtRow := "-", "-"
			if res.Counted {
				rt, rtRow = fmt.Sprintf("%.3f", res.RoundTripsPerCall()), fmt.Sprintf("%.3f", res.RoundTripsPerRow())
			}
			ratioText := "-"
			if q, ok := r.Ratio(v.Name); ok {
				ratioText = fmt.Sprintf("%.3fx %s", q, v.Baseline)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t\n", v.Name, res.RowsPerSec(), res.CallsPerSec(),
				fmtDur(res.Latency.P50), fmtDur(res.Latency.P99), rt, rtRow, res.Tally.Duplicates, res.Tally.Lost, ratioText)
		}
		tw.Flush()
		fmt.Fprintln(ew)
		for _, v := range r.Variants {
			fmt.Fprintf(ew, "%-*s %s\n", nameWidth(r.Variants)+1, v.Name+":", v.Path)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(ew)
		for _, n := range r.Notes {
			fmt.Fprintf(ew, "note: %s\n", n)
		}
	}
	return ew.err
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

// errWriter remembers the first write error and drops later writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
