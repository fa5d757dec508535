package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/outbox"
)

// dispatchRunOptions are the flags of `claimstore dispatch run`.
type dispatchRunOptions struct {
	table        string
	leaderTable  string
	http         string
	workerID     string
	concurrency  int
	batch        int
	pollInterval time.Duration
	lease        time.Duration
	drainTimeout time.Duration
	backoffBase  time.Duration
	backoffMax   time.Duration
	misfire      string
	misfireGrace time.Duration
	migrate      bool
	maintenance  bool
	maintEvery   time.Duration
	rescueAfter  time.Duration
	retention    time.Duration
	leaderLease  time.Duration
	failRate     float64
	work         time.Duration
}

func newDispatchCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dispatch",
		Short: "Run a schedule worker (package dispatch)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDispatchRunCmd(g))
	return cmd
}

func newDispatchRunCmd(g *Globals) *cobra.Command {
	var o dispatchRunOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Fire due schedules until SIGTERM, with /readyz and /livez",
		Long: `run fires the due schedules of the table given by --backend, --dsn and --table
and writes each fire as one JSON line on stdout (type "fire": key, due time,
lag, end, ok or error, ladder step, payload), after a "start" line and
before a "stop" line with the worker's totals. Run as many as you like:
claims never overlap and outcomes are fenced by the lease.

--http serves /readyz (503 from the moment a drain starts) and /livez (200
until exit). SIGINT or SIGTERM drains: claiming stops, in-flight fires get
--drain-timeout to finish, the rest are cancelled and their leases released.

With --maintenance (default) the processes elect a leader over the lease
table --leader-table (claimstore_leaders), which runs the rescuer (leases expired more than
--rescue-after ago) and, with --retention, deletes fired and failed
schedules older than that, every --maintenance-every.

--fail-rate and --work make fires fail or take time on purpose, for demos
and tests.`,
		Example: `  claimstore dispatch run --backend postgres --http :8080
  claimstore dispatch run --backend sqlite --dsn app.db --concurrency 20 --retention 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDispatch(cmd, *g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.table, "table", dispatch.DefaultScheduleTable, "schedule table name")
	f.StringVar(&o.http, "http", ":8080", "address of the /readyz and /livez server (empty: none)")
	f.StringVar(&o.workerID, "worker-id", "", "worker id written to lease_owner (default host-pid-random)")
	f.IntVar(&o.concurrency, "concurrency", dispatch.DefaultConcurrency, "most fires running at once")
	f.IntVar(&o.batch, "batch", 0, "most schedules one claim takes (default: half of --concurrency)")
	f.DurationVar(&o.pollInterval, "poll-interval", 0, "heartbeat: wait between claims when idle, and lease renewal period (0: 1s, or a quarter of a shorter lease)")
	DeprecatedAlias(f, "tick", "poll-interval")
	f.DurationVar(&o.lease, "lease", dispatch.DefaultLease, "lease of a claimed schedule (at least two poll intervals)")
	f.DurationVar(&o.drainTimeout, "drain-timeout", dispatch.DefaultDrainTimeout, "how long in-flight fires may finish after SIGTERM")
	f.DurationVar(&o.backoffBase, "backoff-base", dispatch.DefaultBackoffBase, "wait before the first retry of a failed fire (doubling)")
	f.DurationVar(&o.backoffMax, "backoff-max", dispatch.DefaultBackoffMax, "cap of the retry wait")
	f.StringVar(&o.misfire, "misfire", "fire-once", "late cron fires: fire-once (one fire for all missed) or skip")
	f.DurationVar(&o.misfireGrace, "misfire-grace", dispatch.DefaultMisfireGrace, "how late a cron fire may be and still count as on time")
	f.BoolVar(&o.migrate, "migrate", true, "create the schedule table when missing")
	f.BoolVar(&o.maintenance, "maintenance", true, "elect a leader that runs the rescuer and the retention sweep")
	f.DurationVar(&o.maintEvery, "maintenance-every", dispatch.DefaultMaintenanceEvery, "period of the maintenance tasks")
	f.DurationVar(&o.rescueAfter, "rescue-after", dispatch.DefaultRescueAfter, "rescue leases expired longer ago than this")
	f.DurationVar(&o.retention, "retention", 0, "delete fired and failed schedules older than this (0: keep them)")
	f.StringVar(&o.leaderTable, "leader-table", dialects.DefaultLeaseTable, "lease table of the maintenance leader election")
	f.DurationVar(&o.leaderLease, "leader-lease", coord.DefaultLeaderLease, "lease of the maintenance leader")
	DeprecatedAlias(f, "leader-ttl", "leader-lease")
	f.Float64Var(&o.failRate, "fail-rate", 0, "fraction of fires failed on purpose, 0..1 (demos, tests)")
	f.DurationVar(&o.work, "work", 0, "each fire takes a random time up to this (demos, tests)")
	return cmd
}

// check checks the flags of the run and its target, g.
func (o *dispatchRunOptions) check(g Globals) error {
	var c FlagChecks
	AtLeast(&c, "concurrency", o.concurrency, 1)
	AtLeast(&c, "batch", o.batch, 0)
	AtLeast(&c, "poll-interval", o.pollInterval, 0)
	if o.pollInterval > 0 {
		AtLeast(&c, "lease", o.lease, 2*o.pollInterval)
	} else {
		Above(&c, "lease", o.lease, 0)
	}
	AtLeast(&c, "drain-timeout", o.drainTimeout, 0)
	Above(&c, "backoff-base", o.backoffBase, 0)
	AtLeast(&c, "backoff-max", o.backoffMax, o.backoffBase)
	Above(&c, "misfire-grace", o.misfireGrace, 0)
	Above(&c, "maintenance-every", o.maintEvery, 0)
	Above(&c, "rescue-after", o.rescueAfter, 0)
	AtLeast(&c, "retention", o.retention, 0)
	Above(&c, "leader-lease", o.leaderLease, 0)
	Between(&c, "fail-rate", o.failRate, 0, 1)
	AtLeast(&c, "work", o.work, 0)
	if c.err != nil {
		return c.err
	}
	if o.misfire != "fire-once" && o.misfire != "skip" {
		return fmt.Errorf("%w: --misfire %q: want fire-once or skip", dao.ErrInvalidArgument, o.misfire)
	}
	if len(o.workerID) > dispatch.MaxWorkerIDLen {
		return fmt.Errorf("%w: --worker-id longer than %d bytes", dao.ErrInvalidArgument, dispatch.MaxWorkerIDLen)
	}
	if err := dispatch.CheckTable(o.leaderTable); err != nil {
		return fmt.Errorf("--leader-table: %w", err)
	}
	return checkScheduleTarget(g, o.table)
}

// eventWriter writes [Event] lines, one at a time.
type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) write(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(e)
}

// dispatchRunPool is the connection pool of `dispatch run`: the worker's
// loops use up to four connections at once (claim, outcome writes, lease
// renewal, maintenance; docs/dispatch.md, "Pool sizing") and its handler
// none, so eight leave room without holding a connection per fire.
const dispatchRunPool = 8

func runDispatch(cmd *cobra.Command, g Globals, o dispatchRunOptions) error {
	if err := o.check(g); err != nil {
		return err
	}
	ctx := cmd.Context()
	s, err := openSchedules(ctx, g, o.table, o.migrate, dispatchRunPool)
	if err != nil {
		return err
	}
	defer s.close()
	if o.workerID == "" {
		o.workerID = outbox.DefaultWorkerID()
	}
	log := slog.Default()
	out := &eventWriter{enc: json.NewEncoder(cmd.OutOrStdout())}
	policy := dispatch.Policy{Backoff: dispatch.Doubling(o.backoffBase, o.backoffMax, 0), MisfireGrace: o.misfireGrace}
	if o.misfire == "skip" {
		policy.Misfire = dispatch.MisfireSkip
	}
	cfg := dispatch.Config[dispatch.Schedule]{
		WorkerID: o.workerID, Concurrency: o.concurrency, BatchSize: o.batch, PollInterval: o.pollInterval, Lease: o.lease,
		DrainTimeout: o.drainTimeout, Logger: log,
	}
	var elector *coord.Elector
	if o.maintenance {
		if elector, cfg.Maintenance, err = o.maintenanceOf(ctx, s, log); err != nil {
			return err
		}
	}
	w, err := dispatch.NewScheduleWorker(s.store, o.fire(out), policy, cfg)
	if err != nil {
		return err
	}
	addr, stopHTTP, err := serveHealth(o.http, w.Worker)
	if err != nil {
		return err
	}
	defer stopHTTP()
	out.write(Event{Type: "start", Worker: o.workerID, HTTP: addr})
	var bg sync.WaitGroup
	if elector != nil {
		bg.Go(func() { _ = elector.Run(ctx) })
	}
	runErr := w.Run(ctx)
	bg.Wait()
	st, fs := w.Stats(), w.ScheduleStats()
	out.write(Event{Type: "stop", Worker: o.workerID, Stats: &st, Fires: &fs})
	return runErr
}

// maintenanceOf returns the elector and the leader-gated maintenance of
// the run: the rescuer, and the retention sweep when --retention is set.
func (o *dispatchRunOptions) maintenanceOf(ctx context.Context, s *scheduleDB, log *slog.Logger) (*coord.Elector, *dispatch.Maintenance, error) {
	leases, err := sqlstore.NewLeases(s.db, o.leaderTable)
	if err != nil {
		return nil, nil, err
	}
	if err := leases.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	e, err := coord.NewElector(leases, coord.ElectorConfig{Name: "claimstore-dispatch:" + o.table, ID: o.workerID, Lease: o.leaderLease.Round(time.Millisecond), Logger: log})
	if err != nil {
		return nil, nil, err
	}
	rescuer, err := dispatch.ScheduleRescuer(s.store, dispatch.RescueConfig[dispatch.Schedule]{After: o.rescueAfter, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	m := &dispatch.Maintenance{Every: o.maintEvery, Leader: dispatch.ElectorGate(e), Tasks: []dispatch.Task{rescuer.Task()}}
	if o.retention > 0 {
		r, err := dispatch.NewRetention(s.store, dispatch.RetentionConfig{OlderThan: o.retention, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		m.Tasks = append(m.Tasks, r.Task())
	}
	return e, m, nil
}

// errInduced is the error of a fire failed on purpose by --fail-rate.
var errInduced = errors.New("induced failure (--fail-rate)")

// fire returns the fire function: it takes a random time up to --work
// (ending early when its context does), fails at --fail-rate, and writes
// the fire's line.
func (o *dispatchRunOptions) fire(out *eventWriter) dispatch.FireFunc {
	return func(ctx context.Context, f dispatch.Fire) error {
		start := time.Now()
		if o.work > 0 {
			t := time.NewTimer(rand.N(o.work))
			select {
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx) // drained or lease lost: no fire
			case <-t.C:
			}
		}
		var err error
		if o.failRate > 0 && rand.Float64() < o.failRate {
			err = errInduced
		}
		s := f.Schedule
		e := Event{Type: "fire", Worker: o.workerID, Key: s.Key, ID: s.ID, Due: s.NextFireAt.UTC(), Lag: f.Lag.Seconds(),
			End: s.NextFireAt.Add(f.Lag + time.Since(start)).UTC(), OK: err == nil, Attempt: s.FailureCount + 1,
			Cron: s.Kind == dispatch.KindCron, Payload: string(s.Payload)}
		if err != nil {
			e.Error = err.Error()
		}
		out.write(e)
		return err
	}
}

// serveHealth serves /readyz and /livez of w on addr ("" serves nothing)
// and returns the address it listens on and a function that stops it.
func serveHealth(addr string, w *dispatch.Worker[dispatch.Schedule]) (string, func(), error) {
	if addr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--http: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/readyz", w.Ready())
	mux.Handle("/livez", w.Live())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
