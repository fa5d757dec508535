package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/internal/bench"
	"github.com/claimstore/claimstore/internal/outboxenv"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/outbox/natspub"
)

// The bench command is created in bench.go, whose init runs before this
// file's (the go tool compiles a package's files in name order).
func init() {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "bench" {
			c.AddCommand(newBenchOutboxCmd())
			return
		}
	}
	panic("claimstore: bench command not registered before bench outbox")
}

// benchOutboxOptions are the flags of `claimstore bench outbox`.
type benchOutboxOptions struct {
	messages   int
	relays     int
	workers    int
	batch      int
	writers    int
	writeBatch int
	payload    int
	lease      time.Duration
	natsURL    string
	variants   string
	prefill    bool
	repeat     int
	analyze    time.Duration
	timeout    time.Duration
	quiet      bool
	cpuProfile string
}

// Variants of `claimstore bench outbox`.
const (
	variantBatched    = "batched"
	variantPerMessage = "per-message"
)

func newBenchOutboxCmd() *cobra.Command {
	var o benchOutboxOptions
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Measure the outbox end to end: write, claim, publish to JetStream with ack, mark",
		Long: `bench outbox measures the transactional outbox end to end on the database of
--backend/--dsn and NATS JetStream (an embedded server unless --nats-url):
--writers writers add --messages messages in transactions of --write-batch
while --relays relays, each with --workers batches of --batch in flight,
claim, publish with ack and mark them. The clock runs from the first write
to the last mark; the rate is messages per second through the whole path.

Two variants run in the same process, each on a fresh table and stream:
  batched      the relay as shipped: one UPDATE ... WHERE id IN (...) per batch
  per-message  the same relay over a store that sends one UPDATE per message
               for every mark, i.e. one round trip per message marked
and the report gives their ratio. After each variant the stream is read
back: every message must be in it exactly once, else the command fails.

On PostgreSQL the table is analyzed every --analyze-every while a variant
runs, as autovacuum's auto-analyze would do on a server where it is on:
without statistics the planner scans the claim index for every mark and
joins the claim's rows by nested loop, which triples the server's CPU per
message. The report gives the CPU per message of this process and of the
PostgreSQL backends serving the run, when the server is local.`,
		Example: `  claimstore bench outbox --backend postgres
  claimstore bench outbox --backend postgres --messages 200000 --relays 2 --workers 4 --batch 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchOutbox(cmd, o) },
	}
	f := cmd.Flags()
	f.IntVar(&o.messages, "messages", 100000, "messages per variant")
	f.IntVar(&o.relays, "relays", 2, "relays, each with its own NATS connection")
	f.IntVar(&o.workers, "workers", 4, "batches in flight per relay")
	f.IntVar(&o.batch, "batch", 500, "messages claimed per batch")
	f.IntVar(&o.writers, "writers", 2, "concurrent writers")
	f.IntVar(&o.writeBatch, "write-batch", 1000, "messages per write transaction")
	f.IntVar(&o.payload, "payload", 128, "payload bytes per message")
	f.DurationVar(&o.lease, "lease", 30*time.Second, "lease of a claimed batch")
	f.StringVar(&o.natsURL, "nats-url", "", "external NATS server URL (default: an embedded server)")
	f.StringVar(&o.variants, "variants", variantBatched+","+variantPerMessage, "comma-separated variants to run")
	f.DurationVar(&o.analyze, "analyze-every", 2*time.Second, "on postgres, ANALYZE the table this often while the variant runs (and once after --prefill's writes), as autovacuum's auto-analyze does; 0: never")
	f.IntVar(&o.repeat, "repeat", 1, "run every variant this many times, alternating their order; report each variant's median run")
	f.BoolVar(&o.prefill, "prefill", false, "write every message before the relays start, and time writing and relaying apart")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up on a variant after this long")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	return cmd
}

// outboxResult is the measurement of one variant.
type outboxResult struct {
	variant    string
	messages   int
	writeTime  time.Duration
	relayTime  time.Duration // with --prefill: from the last write to the last mark
	clientCPU  time.Duration // this process, the embedded NATS server included
	serverCPU  time.Duration // the PostgreSQL backends of this run's connections
	cpuKnown   bool
	total      time.Duration
	updates    int64
	inStream   uint64
	distinct   int
	duplicates int
}

func (r outboxResult) rate() float64 { return float64(r.messages) / r.total.Seconds() }

func runBenchOutbox(cmd *cobra.Command, o benchOutboxOptions) error {
	var c flagChecks
	atLeast(&c, "messages", o.messages, 1)
	atLeast(&c, "relays", o.relays, 1)
	atLeast(&c, "workers", o.workers, 1)
	atLeast(&c, "batch", o.batch, 1)
	atLeast(&c, "writers", o.writers, 1)
	atLeast(&c, "write-batch", o.writeBatch, 1)
	atLeast(&c, "payload", o.payload, 0)
	above(&c, "lease", o.lease, 0)
	atLeast(&c, "analyze-every", o.analyze, 0)
	atLeast(&c, "repeat", o.repeat, 1)
	above(&c, "timeout", o.timeout, 0)
	if c.err != nil {
		return c.err
	}
	variants := strings.Split(o.variants, ",")
	for _, v := range variants {
		if v != variantBatched && v != variantPerMessage {
			return fmt.Errorf("--variants: %w: unknown variant %q", dao.ErrInvalidArgument, v)
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var progress io.Writer = cmd.ErrOrStderr()
	if o.quiet {
		progress = io.Discard
	}
	broker, err := outboxenv.StartBroker(o.natsURL)
	if err != nil {
		return err
	}
	defer broker.Close()
	runs := map[string][]outboxResult{}
	for r := range o.repeat {
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			fmt.Fprintf(progress, "bench outbox: variant %s, run %d of %d\n", v, r+1, o.repeat)
			res, err := benchOutboxVariant(cmd.Context(), progress, broker, o, v)
			if err != nil {
				return fmt.Errorf("variant %s: %w", v, err)
			}
			runs[v] = append(runs[v], res)
		}
	}
	var results []outboxResult
	for _, v := range variants {
		rs := runs[v]
		slices.SortFunc(rs, func(a, b outboxResult) int { return cmp.Compare(a.rate(), b.rate()) })
		results = append(results, rs[len(rs)/2])
	}
	return writeOutboxReport(cmd.OutOrStdout(), o, broker, results)
}

// perMessageMarks is a store whose Update, when its criteria name rows by
// id (id IN (...) as the first operand of an And, as every mark of the
// repository does), sends one UPDATE per id: the per-message-mark variant.
type perMessageMarks struct {
	dao.Store[outbox.Message]
	updates *atomic.Int64
}

func (s perMessageMarks) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	ch := where.Children()
	if where.Op() != dao.OpAnd || len(ch) == 0 || ch[0].Op() != dao.OpIn || ch[0].Field() != "id" {
		s.updates.Add(1)
		return s.Store.Update(ctx, where, set)
	}
	var total int64
	for _, id := range ch[0].Values() {
		s.updates.Add(1)
		n, err := s.Store.Update(ctx, dao.And(append([]dao.Criteria{dao.Eq("id", id)}, ch[1:]...)...), set)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// countingUpdates counts the UPDATE statements of the batched variant.
type countingUpdates struct {
	dao.Store[outbox.Message]
	updates *atomic.Int64
}

func (s countingUpdates) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	s.updates.Add(1)
	return s.Store.Update(ctx, where, set)
}

func benchOutboxVariant(ctx context.Context, progress io.Writer, broker *outboxenv.Broker, o benchOutboxOptions, variant string) (outboxResult, error) {
	res := outboxResult{variant: variant, messages: o.messages}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tag := outboxenv.RandomHex(4)
	table := "outbox_bench_" + tag
	var updates atomic.Int64
	app := "claimstore-bench-" + tag
	restore := globalFlags.DSN
	if strings.EqualFold(globalFlags.Backend, "postgres") {
		globalFlags.DSN = withApplicationName(globalFlags.DSN, app)
	}
	env, err := openOutbox(ctx, outboxenv.Options{Table: table, Migrate: true, TempSQLite: true, Pool: o.relays*o.workers + o.writers + 2})
	globalFlags.DSN = restore
	if err != nil {
		return res, err
	}
	defer env.Close()
	if env.DB != nil {
		defer func() { _ = env.DB.Migrator().DropTable(table) }()
	}
	wrap := func(s dao.Store[outbox.Message]) dao.Store[outbox.Message] {
		if variant == variantPerMessage {
			return perMessageMarks{s, &updates}
		}
		return countingUpdates{s, &updates}
	}
	repo, err := outboxenv.Wrapped(env.Repo.Store(), wrap, wrap, outbox.WithLease(o.lease))
	if err != nil {
		return res, err
	}

	stream := "CLAIMSTORE_BENCH_" + tag
	subject := "claimstore.bench." + tag
	admin, err := outboxenv.ConnectNATS(broker.URL, "claimstore bench outbox")
	if err != nil {
		return res, err
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		return res, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{subject}, Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage,
	}); err != nil {
		return res, fmt.Errorf("create stream: %w", err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_ = js.DeleteStream(dctx, stream)
	}()

	relayCtx, stopRelays := context.WithCancel(ctx)
	var relayWG sync.WaitGroup
	defer func() { stopRelays(); relayWG.Wait() }()
	relays := make([]*outbox.Relay, o.relays)
	var runRelays []func()
	for i := range relays {
		nc, err := outboxenv.ConnectNATS(broker.URL, fmt.Sprintf("claimstore bench relay %d", i))
		if err != nil {
			return res, err
		}
		defer nc.Close()
		pub, err := natspub.New(nc, natspub.Config{MaxPending: max(8192, 2*o.batch*o.workers)})
		if err != nil {
			return res, err
		}
		relays[i], err = outbox.NewRelay(repo, pub, outbox.RelayConfig{
			WorkerID: fmt.Sprintf("bench-%s-%d", tag, i), BatchSize: o.batch, Concurrency: o.workers, Lease: o.lease,
			PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond, MarkTimeout: o.lease, Logger: relayLogger(),
		})
		if err != nil {
			return res, err
		}
		runRelays = append(runRelays, func() { relayWG.Go(func() { _ = relays[i].Run(relayCtx) }) })
	}
	startRelays := func() {
		for _, run := range runRelays {
			run()
		}
	}
	if !o.prefill {
		startRelays()
	}
	published := func() (n int64) {
		for _, r := range relays {
			n += r.Stats().Published
		}
		return n
	}

	analyze := func() {}
	if env.DB != nil && env.DB.Dialector.Name() == "postgres" && o.analyze > 0 {
		// On a connection of its own, outside the run's backends, as
		// autovacuum runs in a process of its own.
		adb, err := sqlstore.Open(ctx, "postgres", withApplicationName(restore, "claimstore-bench-analyze"))
		if err != nil {
			return res, err
		}
		if sqlDB, err := adb.DB(); err == nil {
			sqlDB.SetMaxOpenConns(1)
			defer sqlDB.Close()
		}
		analyze = func() { _ = adb.WithContext(ctx).Exec("ANALYZE ?", clause.Table{Name: table}).Error }
		actx, stopAnalyze := context.WithCancel(ctx)
		var awg sync.WaitGroup
		defer func() { stopAnalyze(); awg.Wait() }()
		awg.Go(func() {
			t := time.NewTicker(o.analyze)
			defer t.Stop()
			for {
				select {
				case <-actx.Done():
					return
				case <-t.C:
					analyze()
				}
			}
		})
	}

	payload := strings.Repeat("x", o.payload)
	cpu0, clientOK := procCPU("self")
	srv0, serverOK := backendCPU(ctx, env, app)
	start := time.Now()
	var written atomic.Int64
	var writeWG sync.WaitGroup
	writeErr := make(chan error, o.writers)
	for w := range o.writers {
		writeWG.Go(func() {
			for first := w * o.writeBatch; first < o.messages; first += o.writers * o.writeBatch {
				n := min(o.writeBatch, o.messages-first)
				ms := make([]*outbox.Message, n)
				for i := range ms {
					ms[i] = &outbox.Message{MessageID: fmt.Sprintf("m-%d", first+i), Topic: subject, Type: "bench", Payload: []byte(payload)}
				}
				_, err := outboxenv.Retry(ctx, func() error {
					for _, m := range ms { // a failed attempt may have filled ids in
						m.ID = 0
					}
					if env.DB != nil {
						return env.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return repo.Add(ctx, tx, ms...) })
					}
					return repo.Add(ctx, nil, ms...)
				})
				if err != nil {
					writeErr <- err
					return
				}
				written.Add(int64(n))
			}
		})
	}
	writersDone := make(chan struct{})
	go func() { writeWG.Wait(); close(writersDone) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastReport := start
	for {
		select {
		case err := <-writeErr:
			return res, fmt.Errorf("write: %w", err)
		case <-ctx.Done():
			n := published()
			return res, fmt.Errorf("%d of %d published: %w", n, o.messages, ctx.Err())
		case <-writersDone:
			writersDone = nil
			res.writeTime = time.Since(start)
			if o.prefill {
				analyze()
				startRelays()
			}
		case <-tick.C:
		}
		n := published()
		if time.Since(lastReport) >= time.Second {
			lastReport = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(progress, "  %5.1fs  written %d  published %d  (%.0f msg/s)\n", el, written.Load(), n, float64(n)/el)
			if writersDone == nil && n < int64(o.messages) {
				// After a failed mark the relays' totals undercount; the
				// table is the reference.
				c, err := repo.Counts(ctx)
				if err != nil {
					return res, err
				}
				n = c[outbox.StatusPublished]
			}
		}
		if n >= int64(o.messages) {
			break
		}
	}
	res.total = time.Since(start)
	res.relayTime = res.total - res.writeTime
	cpu1, clientOK1 := procCPU("self")
	srv1, serverOK1 := backendCPU(ctx, env, app)
	if res.cpuKnown = clientOK && clientOK1 && serverOK && serverOK1; res.cpuKnown {
		res.clientCPU, res.serverCPU = cpu1-cpu0, srv1-srv0
	}
	stopRelays()
	relayWG.Wait()
	res.updates = updates.Load()
	c, err := repo.Counts(ctx)
	if err != nil {
		return res, err
	}
	if c[outbox.StatusPublished] != int64(o.messages) {
		return res, fmt.Errorf("table counts %v, want %d published", c, o.messages)
	}
	audit, err := natspub.Audit(ctx, js, stream)
	if err != nil {
		return res, err
	}
	res.inStream, res.distinct, res.duplicates = audit.Messages, audit.Distinct(), audit.Duplicates()
	if audit.Messages != uint64(o.messages) || audit.Distinct() != o.messages || audit.Duplicates() != 0 {
		return res, errors.New("the stream does not hold every message exactly once")
	}
	return res, nil
}

func writeOutboxReport(out io.Writer, o benchOutboxOptions, broker *outboxenv.Broker, results []outboxResult) error {
	where := broker.URL
	if broker.Embedded() {
		where += " (embedded, file storage)"
	}
	fmt.Fprintf(out, "bench outbox: backend %s, NATS %s\n", globalFlags.Backend, where)
	fmt.Fprintf(out, "%d messages of %d bytes per variant; %d writers x %d per transaction; %d relays x %d batches of %d in flight\n",
		o.messages, o.payload, o.writers, o.writeBatch, o.relays, o.workers, o.batch)
	mode := "writers and relays run at once"
	if o.prefill {
		mode = "all messages written first, then relayed (--prefill)"
	}
	fmt.Fprintf(out, "%s; median of %d run(s) per variant\n\n", mode, o.repeat)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	if o.prefill {
		fmt.Fprintln(w, "variant\tmessages\twrite\twrite msg/s\trelay\trelay msg/s\ttotal\tmsg/s end to end\tUPDATEs\tin stream\tdistinct\tduplicates\t")
	} else {
		fmt.Fprintln(w, "variant\tmessages\twrites done\tall marked\tmsg/s end to end\tUPDATEs\tin stream\tdistinct\tduplicates\t")
	}
	for _, r := range results {
		if o.prefill {
			fmt.Fprintf(w, "%s\t%d\t%v\t%.0f\t%v\t%.0f\t", r.variant, r.messages, r.writeTime.Round(time.Millisecond),
				float64(r.messages)/r.writeTime.Seconds(), r.relayTime.Round(time.Millisecond), float64(r.messages)/r.relayTime.Seconds())
		} else {
			fmt.Fprintf(w, "%s\t%d\t%v\t", r.variant, r.messages, r.writeTime.Round(time.Millisecond))
		}
		fmt.Fprintf(w, "%v\t%.0f\t%d\t%d\t%d\t%d\t\n", r.total.Round(time.Millisecond), r.rate(), r.updates, r.inStream, r.distinct, r.duplicates)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	for _, r := range results {
		if !r.cpuKnown {
			fmt.Fprintf(out, "%s: CPU per message not measured (needs Linux /proc and a local PostgreSQL server)\n", r.variant)
			continue
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.messages) }
		c, sv := per(r.clientCPU), per(r.serverCPU)
		fmt.Fprintf(out, "%s: CPU per message %.1f µs in this process (relays, writers, embedded NATS) + %.1f µs in the PostgreSQL backends = %.1f µs; %d cores could carry about %.0f msg/s if nothing else ran\n",
			r.variant, c, sv, c+sv, runtime.NumCPU(), float64(runtime.NumCPU())*1e6/(c+sv))
	}
	var batched, single *outboxResult
	for i := range results {
		switch results[i].variant {
		case variantBatched:
			batched = &results[i]
		case variantPerMessage:
			single = &results[i]
		}
	}
	if batched != nil && single != nil {
		fmt.Fprintf(out, "\nratio batched / per-message marks: %.2fx end to end", batched.rate()/single.rate())
		if o.prefill {
			fmt.Fprintf(out, ", %.2fx relay only", single.relayTime.Seconds()/batched.relayTime.Seconds())
		}
		fmt.Fprintln(out)
	}
	return nil
}

// withApplicationName returns the PostgreSQL DSN dsn (a URL or key=value
// pairs; empty means the local test server) with application_name set, so
// that the run's backends can be found in pg_stat_activity.
func withApplicationName(dsn, name string) string {
	if dsn == "" {
		dsn, _, _ = bench.DefaultDSN("postgres")
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name
}

// procCPU returns the user plus system CPU time of process pid ("self" for
// this one) from /proc/<pid>/stat, in which times are in units of 1/100 s
// (USER_HZ); false where /proc is not available.
func procCPU(pid string) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, true
}

// backendCPU returns the CPU time used so far by the PostgreSQL backends
// serving this run's connections (application_name app), read from /proc:
// it works when the server runs on this machine and this process may read
// its /proc entries. Background processes (WAL writer, checkpointer,
// autovacuum) are not included.
func backendCPU(ctx context.Context, env *outboxenv.Env, app string) (time.Duration, bool) {
	if env.DB == nil || env.DB.Dialector.Name() != "postgres" {
		return 0, false
	}
	var pids []int
	if err := env.DB.WithContext(ctx).Raw("SELECT pid FROM pg_stat_activity WHERE application_name = ?", app).Scan(&pids).Error; err != nil || len(pids) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, pid := range pids {
		d, ok := procCPU(strconv.Itoa(pid))
		if !ok {
			return 0, false
		}
		total += d
	}
	return total, true
}
