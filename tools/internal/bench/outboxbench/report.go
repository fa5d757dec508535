package outboxbench

import (
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/claimstore/claimstore/tools/internal/bench"
)

// Result is the measurement of one variant's run.
type Result struct {
	// Variant is the variant's name; Messages the messages it carried.
	Variant  string
	Messages int
	// WriteTime is the time from the first write to the last; RelayTime,
	// with Options.Prefill, from the last write to the last mark; Total
	// from the first write to the last mark.
	WriteTime, RelayTime, Total time.Duration
	// ClientCPU is the CPU time of this process (the embedded NATS server
	// included) and ServerCPU that of the PostgreSQL backends of the
	// run's connections, both over Total; CPUKnown is false when they
	// could not be read (no /proc, or not a local PostgreSQL server).
	ClientCPU, ServerCPU time.Duration
	CPUKnown             bool
	// RelayClientCPU and RelayServerCPU are the same over RelayTime
	// alone, with Options.Prefill; RelayCPUKnown says whether they were
	// read.
	RelayClientCPU, RelayServerCPU time.Duration
	RelayCPUKnown                  bool
	// Updates and HOTUpdates are, on PostgreSQL, the rows the table's
	// UPDATEs changed and those of them that were HOT updates (heap-only
	// tuples: no new index entry), from pg_stat_user_tables; HOTKnown is
	// false elsewhere or when they could not be read.
	RowUpdates, HOTUpdates int64
	HOTKnown               bool
	// Updates is the number of UPDATE statements the store sent.
	Updates int64
	// InStream is the number of messages in the stream, Distinct the
	// distinct message ids among them and Duplicates the ids stored more
	// than once.
	InStream   uint64
	Distinct   int
	Duplicates int
}

// Rate returns messages per second end to end.
func (r Result) Rate() float64 { return float64(r.Messages) / r.Total.Seconds() }

// Report is the outcome of [Run]: each variant's median run.
type Report struct {
	// Options are the run's options.
	Options Options
	// NATS describes the server: its URL, and whether it was embedded.
	NATS string
	// Results holds one result per variant, in the order of
	// Options.Variants.
	Results []Result
}

// WriteText writes the report as text to w: the set-up, a table of the
// variants, each variant's CPU per message, and the ratios of the batched
// variant to the others. It returns the first write
// error.
func (r *Report) WriteText(w io.Writer) error {
	ew := &bench.ErrWriter{W: w}
	r.writeSetup(ew)
	r.writeTable(ew)
	fmt.Fprintln(ew)
	r.writeCPU(ew)
	r.writeRatio(ew)
	return ew.Err
}

// writeSetup writes what was measured, and how.
func (r *Report) writeSetup(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "bench outbox: backend %s, NATS %s\n", o.Backend, r.NATS)
	fmt.Fprintf(w, "%d messages of %d bytes per variant; %d writers x %d per transaction; %d relays x %d workers x a window of %d batches of %d\n",
		o.Messages, o.Payload, o.Writers, o.WriteBatch, o.Relays, o.Workers, max(1, o.Window), o.Batch)
	mode := "writers and relays run at once"
	if o.Prefill {
		mode = "all messages written first, then relayed (--prefill)"
	}
	fmt.Fprintf(w, "%s; median of %d run(s) per variant\n\n", mode, o.Repeat)
}

// writeTable writes one row per variant; with Prefill, the write and relay
// phases have columns of their own.
func (r *Report) writeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	prefill := r.Options.Prefill
	if prefill {
		fmt.Fprintln(tw, "variant\tmessages\twrite\twrite msg/s\trelay\trelay msg/s\ttotal\tmsg/s end to end\tUPDATEs\tin stream\tdistinct\tduplicates\t")
	} else {
		fmt.Fprintln(tw, "variant\tmessages\twrites done\tall marked\tmsg/s end to end\tUPDATEs\tin stream\tdistinct\tduplicates\t")
	}
	for _, res := range r.Results {
		if prefill {
			fmt.Fprintf(tw, "%s\t%d\t%v\t%.0f\t%v\t%.0f\t", res.Variant, res.Messages, res.WriteTime.Round(time.Millisecond),
				float64(res.Messages)/res.WriteTime.Seconds(), res.RelayTime.Round(time.Millisecond), float64(res.Messages)/res.RelayTime.Seconds())
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%v\t", res.Variant, res.Messages, res.WriteTime.Round(time.Millisecond))
		}
		fmt.Fprintf(tw, "%v\t%.0f\t%d\t%d\t%d\t%d\t\n", res.Total.Round(time.Millisecond), res.Rate(), res.Updates, res.InStream, res.Distinct, res.Duplicates)
	}
	_ = tw.Flush() // a write error is kept by the ErrWriter below
}

// writeCPU writes each variant's CPU time per message, client and server,
// or why it was not measured.
func (r *Report) writeCPU(w io.Writer) {
	cores := runtime.NumCPU()
	for _, res := range r.Results {
		if !res.CPUKnown {
			fmt.Fprintf(w, "%s: CPU per message not measured (needs Linux /proc and a local PostgreSQL server)\n", res.Variant)
			continue
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(res.Messages) }
		c, sv := per(res.ClientCPU), per(res.ServerCPU)
		fmt.Fprintf(w, "%s: CPU per message %.1f µs in this process (relays, writers, embedded NATS) + %.1f µs in the PostgreSQL backends = %.1f µs; %d cores could carry about %.0f msg/s if nothing else ran\n",
			res.Variant, c, sv, c+sv, cores, float64(cores)*1e6/(c+sv))
		if res.RelayCPUKnown {
			c, sv := per(res.RelayClientCPU), per(res.RelayServerCPU)
			fmt.Fprintf(w, "%s: relay phase alone: CPU per message %.1f µs in this process + %.1f µs in the PostgreSQL backends = %.1f µs\n",
				res.Variant, c, sv, c+sv)
		}
		if res.HOTKnown {
			fmt.Fprintf(w, "%s: %d row updates, %d of them HOT (%.0f%%)\n", res.Variant, res.RowUpdates, res.HOTUpdates,
				100*float64(res.HOTUpdates)/float64(max(1, res.RowUpdates)))
		}
	}
}

// writeRatio writes the ratio of the batched variant to the per-message
// and earlier variants that ran.
func (r *Report) writeRatio(w io.Writer) {
	byName := map[string]*Result{}
	for i := range r.Results {
		byName[r.Results[i].Variant] = &r.Results[i]
	}
	batched := byName[VariantBatched]
	if batched == nil {
		return
	}
	wrote := false
	for _, o := range []struct{ name, what string }{
		{VariantPerMessage, "per-message marks"},
		{VariantEarlier, "earlier relay and table"},
	} {
		other := byName[o.name]
		if other == nil {
			continue
		}
		wrote = true
		fmt.Fprintf(w, "\nratio batched / %s: %.2fx end to end", o.what, batched.Rate()/other.Rate())
		if r.Options.Prefill {
			fmt.Fprintf(w, ", %.2fx relay only", other.RelayTime.Seconds()/batched.RelayTime.Seconds())
		}
	}
	if wrote {
		fmt.Fprintln(w)
	}
}
