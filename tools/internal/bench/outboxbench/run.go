package outboxbench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
)

// Variants of the benchmark.
const (
	// VariantBatched is the relay as shipped: one UPDATE ... WHERE id IN
	// (...) per batch of marks.
	VariantBatched = "batched"
	// VariantPerMessage is the same relay over a store that sends one
	// UPDATE per message for every mark.
	VariantPerMessage = "per-message"
	// VariantEarlier is the relay and table layout of the previous
	// release: a window of one batch per loop and, on PostgreSQL, the
	// claim index on status IN ('pending', 'processing', 'failed') with
	// the default fillfactor (so that no claim is a HOT update), as a
	// table made by an earlier outbox.Migrate keeps.
	VariantEarlier = "earlier"
)

// KnownVariant reports whether name is one of the variants.
func KnownVariant(name string) bool {
	return name == VariantBatched || name == VariantPerMessage || name == VariantEarlier
}

// Options describe one benchmark run. The counts must be >= 1 (Payload
// >= 0), Lease and Timeout > 0 and Analyze >= 0, and every variant known
// (see [KnownVariant]); the command checks them before calling [Run].
type Options struct {
	// Backend and DSN name the database, as [outboxenv.Options] says;
	// without a DSN, SQLite uses a file in a temporary directory.
	Backend, DSN string
	// Messages is the number of messages per variant, of Payload bytes
	// each.
	Messages, Payload int
	// Relays run concurrently, each with its own NATS connection and
	// Workers loops claiming batches of Batch messages; Lease is the lease of
	// a claimed batch.
	Relays, Workers, Batch int
	Lease                  time.Duration
	// Window is each relay loop's window of batches claimed and not yet
	// marked (outbox.RelayConfig.Window); 0: the relay's default.
	Window int
	// Writers write concurrently, WriteBatch messages per transaction.
	Writers, WriteBatch int
	// NATSURL is an external NATS server; empty starts an embedded one.
	NATSURL string
	// Variants are the variants to run, in this order in the first round.
	Variants []string
	// Prefill writes every message before the relays start, and times
	// writing and relaying apart.
	Prefill bool
	// Repeat runs every variant this many times, the order of the
	// variants rotated by one each round; the report gives each variant's
	// median run by rate.
	Repeat int
	// Analyze is, on PostgreSQL, how often the table is analyzed while a
	// variant runs (and once after Prefill's writes), as autovacuum's
	// auto-analyze would; 0: never.
	Analyze time.Duration
	// Timeout bounds each variant.
	Timeout time.Duration
	// Progress receives progress lines; nil: none.
	Progress io.Writer
	// Logger receives the relays' logs; nil: slog.Default().
	Logger *slog.Logger
}

// Run starts or connects to the NATS server, measures every variant of o
// o.Repeat times and returns the report with each variant's median run.
// It returns an error, and no report, when a variant fails: its set-up, a
// write, the timeout, or the check that the table and the stream hold
// every message exactly once; the error names the variant.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	broker, err := outboxenv.StartBroker(o.NATSURL)
	if err != nil {
		return nil, err
	}
	defer broker.Close()
	runs := map[string][]Result{}
	for r := range o.Repeat {
		for i := range o.Variants {
			v := o.Variants[(i+r)%len(o.Variants)]
			fmt.Fprintf(o.Progress, "bench outbox: variant %s, run %d of %d\n", v, r+1, o.Repeat)
			res, err := runVariant(ctx, o, broker, v)
			if err != nil {
				return nil, fmt.Errorf("variant %s: %w", v, err)
			}
			runs[v] = append(runs[v], res)
		}
	}
	rep := &Report{Options: o, NATS: broker.URL}
	if broker.Embedded() {
		rep.NATS += " (embedded, file storage)"
	}
	for _, v := range o.Variants {
		rs := runs[v]
		slices.SortFunc(rs, func(a, b Result) int { return cmp.Compare(a.Rate(), b.Rate()) })
		rep.Results = append(rep.Results, rs[len(rs)/2])
	}
	return rep, nil
}
