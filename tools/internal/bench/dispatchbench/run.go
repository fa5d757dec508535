package dispatchbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/tools/internal/bench"
	"github.com/claimstore/claimstore/tools/internal/demo"
)

// Defaults of [Options] (the command's flag defaults).
const (
	DefaultSchedules = 200000
	DefaultProcesses = 3
	// DefaultConcurrency lets each claim take 32 schedules: the handler
	// does no work, so the processes measure the claim and the batched
	// outcome writes, not the handlers.
	DefaultConcurrency  = 64
	DefaultPollInterval = 100 * time.Millisecond
	DefaultLease        = 30 * time.Second
	DefaultLoadBatch    = 1000
	DefaultBudget       = 10 * time.Minute
)

// TablePrefix starts the name of every table a run creates; a random
// suffix keeps runs apart.
const TablePrefix = "dispatch_bench_"

// Options describe one benchmark run. The command checks them before
// [Run]: counts >= 1, Batch >= 0, PollInterval > 0, Lease >= 2 PollInterval, Budget >= 0,
// Backend one of sqlite, postgres, mysql, mariadb.
type Options struct {
	// Backend and DSN name the database; without a DSN the local server
	// of the backend (see [bench.DefaultDSN]), or on sqlite a file in a
	// temporary directory.
	Backend, DSN string
	// Schedules is the number of once schedules, all due at once.
	Schedules int
	// Processes is the number of worker processes; each runs up to
	// Concurrency fires at once and claims up to Batch schedules per
	// claim (0: the worker's default, half of Concurrency), every PollInterval
	// when idle, with leases of Lease. Each holds up to 8 database
	// connections (`claimstore dispatch run`'s pool).
	Processes, Concurrency, Batch int
	PollInterval, Lease           time.Duration
	// LoadBatch is the number of schedules per insert while seeding.
	LoadBatch int
	// Budget bounds the time from the schedules becoming due to the last
	// fire; a run stopped by it is partial. 0: no limit.
	Budget time.Duration
	// Command is the argument vector that runs the claimstore command
	// (the run appends "dispatch run" and its flags); Env is added to the
	// processes' environment.
	Command []string
	Env     []string
	// Keep keeps the table, the temporary SQLite file and the fire files.
	Keep bool
	// Progress receives progress lines; Logs the processes' stderr. Nil:
	// none.
	Progress, Logs io.Writer
}

// worker is one worker process and the file it writes its fires to.
type worker struct {
	id   string
	file string
	cmd  *exec.Cmd
	done chan struct{}
}

// run is the state of one benchmark run.
type run struct {
	o       Options
	dsn     string
	dir     string // fire files; the default SQLite file
	db      *gorm.DB
	store   *dao.Table[dispatch.Schedule]
	table   string
	rep     *Report
	workers []*worker
}

// Run seeds o.Schedules once schedules, starts o.Processes worker
// processes, makes every schedule due and waits until all have fired or
// o.Budget has passed, stops the processes and reads their fires. It
// returns the report, with the verdict (duplicates, missed) in it, and an
// error when the set-up, a process or the database fails; the report is
// nil only when the run did not get as far as the database. The table is
// dropped at the end unless o.Keep.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	o.Progress, o.Logs = demo.SyncPair(o.Progress, o.Logs) // the processes write to Logs at once
	if len(o.Command) == 0 {
		return nil, errors.New("bench dispatch: no command to start worker processes with")
	}
	r := &run{o: o, table: TablePrefix + outboxenv.RandomHex(4)}
	if r.dir, err = os.MkdirTemp("", "claimstore-bench-dispatch-"); err != nil {
		return nil, fmt.Errorf("bench dispatch: %w", err)
	}
	defer func() {
		if !o.Keep {
			_ = os.RemoveAll(r.dir)
		}
	}()
	closeDB, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	rep = r.rep
	if err := r.seed(ctx); err != nil {
		return rep, err
	}
	if err := r.spawn(ctx); err != nil {
		r.stop()
		return rep, err
	}
	err = r.measure(ctx)
	r.stop()
	if err != nil {
		return rep, err
	}
	return rep, r.tally(ctx)
}

// open opens the database, reads the server's version and creates the
// table; the function it returns drops the table (unless Keep) and closes
// the database.
func (r *run) open(ctx context.Context) (func(), error) {
	backend := strings.ToLower(r.o.Backend)
	r.dsn = r.o.DSN
	switch {
	case r.dsn == "" && backend == "sqlite":
		r.dsn = sqlstore.SQLiteDSN(filepath.Join(r.dir, "dispatch.db"))
	default:
		d, _, err := bench.CommandDSN(backend, r.dsn)
		if err != nil {
			return nil, err
		}
		r.dsn = d
	}
	db, err := sqlstore.Open(ctx, backend, r.dsn)
	if err != nil {
		return nil, fmt.Errorf("bench dispatch: %w", err)
	}
	r.db = db
	closeDB := func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	}
	if r.store, err = sqlstore.New[dispatch.Schedule](db.WithContext(ctx), sqlstore.WithTable(r.table)); err != nil {
		closeDB()
		return nil, fmt.Errorf("bench dispatch: %w", err)
	}
	var dialect dialects.Name
	if !r.store.As(&dialect) {
		closeDB()
		return nil, errors.New("bench dispatch: the store gives no dialect")
	}
	r.rep = &Report{Options: r.o, Started: time.Now().UTC(), Machine: bench.CurrentMachine(), Backend: string(dialect), Table: r.table}
	r.rep.Options.Command, r.rep.Options.Env, r.rep.Options.Progress, r.rep.Options.Logs = nil, nil, nil, nil
	if r.rep.Server, err = bench.ServerVersion(ctx, db, dialect); err != nil {
		closeDB()
		return nil, err
	}
	if err := dispatch.MigrateSchedules(ctx, db, r.table); err != nil {
		closeDB()
		return nil, fmt.Errorf("bench dispatch: %w", err)
	}
	return func() {
		if !r.o.Keep {
			if err := db.Migrator().DropTable(r.table); err != nil {
				fmt.Fprintf(r.o.Progress, "bench dispatch: drop table %s: %v\n", r.table, err)
			}
		}
		closeDB()
	}, nil
}

// key returns the key of the i-th schedule.
func key(i int) string { return fmt.Sprintf("bench-%07d", i) }

// seed adds the schedules with Schedules.AddMany, LoadBatch per call,
// due a day from now: measure makes them due.
func (r *run) seed(ctx context.Context) error {
	sc, err := dispatch.NewSchedules(r.store, dispatch.SchedulesConfig{})
	if err != nil {
		return fmt.Errorf("bench dispatch: %w", err)
	}
	now, err := r.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("bench dispatch: %w", err)
	}
	start := time.Now()
	specs := make([]dispatch.Spec, 0, r.o.LoadBatch)
	for i := 0; i < r.o.Schedules; {
		specs = specs[:0]
		for ; i < r.o.Schedules && len(specs) < r.o.LoadBatch; i++ {
			specs = append(specs, dispatch.Spec{Key: key(i), At: now.Add(24 * time.Hour)})
		}
		n, err := sc.AddMany(ctx, specs)
		if err != nil {
			return fmt.Errorf("bench dispatch: seed schedules: %w", err)
		}
		if n != len(specs) {
			return fmt.Errorf("bench dispatch: seed schedules: %d of %d created", n, len(specs))
		}
		if i%100000 == 0 && i < r.o.Schedules {
			fmt.Fprintf(r.o.Progress, "  seeded %d of %d\n", i, r.o.Schedules)
		}
	}
	r.rep.SeedTime = time.Since(start)
	fmt.Fprintf(r.o.Progress, "  seeded %d schedules in %v (%.0f/s)\n", r.o.Schedules, r.rep.SeedTime.Round(time.Millisecond), float64(r.o.Schedules)/r.rep.SeedTime.Seconds())
	return nil
}

// spawn starts the worker processes, each writing its output to a file,
// and waits until each has written its start line.
func (r *run) spawn(ctx context.Context) error {
	for i := range r.o.Processes {
		w := &worker{id: fmt.Sprintf("bench-worker-%d", i+1), done: make(chan struct{})}
		w.file = filepath.Join(r.dir, w.id+".jsonl")
		f, err := os.Create(w.file)
		if err != nil {
			return fmt.Errorf("bench dispatch: %w", err)
		}
		args := append(slices.Clone(r.o.Command[1:]), "dispatch", "run",
			"--backend", strings.ToLower(r.o.Backend), "--dsn", r.dsn, "--table", r.table, "--migrate=false",
			"--http", "", "--maintenance=false", "--worker-id", w.id,
			"--concurrency", fmt.Sprint(r.o.Concurrency), "--batch", fmt.Sprint(r.o.Batch),
			"--poll-interval", r.o.PollInterval.String(), "--lease", r.o.Lease.String(), "--log-level", "warn")
		w.cmd = exec.CommandContext(ctx, r.o.Command[0], args...)
		w.cmd.Cancel = func() error { return w.cmd.Process.Signal(syscall.SIGTERM) } // drain, not SIGKILL
		w.cmd.WaitDelay = 30 * time.Second
		w.cmd.Env = append(os.Environ(), r.o.Env...)
		w.cmd.Stdout, w.cmd.Stderr = f, r.o.Logs
		err = w.cmd.Start()
		f.Close() // the process has its own descriptor
		if err != nil {
			return fmt.Errorf("bench dispatch: start worker process: %w", err)
		}
		r.workers = append(r.workers, w)
		go func() { _ = w.cmd.Wait(); close(w.done) }()
	}
	deadline := time.Now().Add(time.Minute)
	for _, w := range r.workers {
		for {
			b, err := os.ReadFile(w.file)
			if err == nil && strings.Contains(string(b), `"type":"start"`) {
				break
			}
			select {
			case <-w.done:
				return fmt.Errorf("bench dispatch: worker process %s exited before it started: %v", w.id, w.cmd.ProcessState)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench dispatch: worker process %s not started after a minute", w.id)
			}
		}
	}
	fmt.Fprintf(r.o.Progress, "  %d worker processes started\n", len(r.workers))
	return nil
}

// active is the criteria of the schedules not yet fired.
var active = dao.Eq(dispatch.ColStatus, string(dispatch.StatusActive))

// measure makes every schedule due at the database's current time in one
// UPDATE, then counts the active schedules every 100 ms until none is
// left or the budget has passed.
func (r *run) measure(ctx context.Context) error {
	due, err := r.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("bench dispatch: %w", err)
	}
	armStart := time.Now()
	n, err := r.store.Update(ctx, dao.And(active, dao.Gt(dispatch.ColNextFireAt, due.UTC())),
		dao.Set{dispatch.ColNextFireAt: due.UTC()})
	if err != nil {
		return fmt.Errorf("bench dispatch: make the schedules due: %w", err)
	}
	if n != int64(r.o.Schedules) {
		return fmt.Errorf("bench dispatch: made %d schedules due, want %d", n, r.o.Schedules)
	}
	r.rep.Due, r.rep.ArmTime = due.UTC(), time.Since(armStart)
	fmt.Fprintf(r.o.Progress, "  %d schedules due at %s (UPDATE took %v)\n", n, r.rep.Due.Format(time.RFC3339Nano), r.rep.ArmTime.Round(time.Millisecond))
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	lastProgress := time.Now()
	for {
		left, err := r.store.Count(ctx, active)
		if err != nil {
			return fmt.Errorf("bench dispatch: count active schedules: %w", err)
		}
		el := time.Since(armStart)
		if left == 0 {
			r.rep.Wall = el
			fmt.Fprintf(r.o.Progress, "  %6.1fs  all fired\n", el.Seconds())
			return nil
		}
		if r.o.Budget > 0 && el >= r.o.Budget {
			r.rep.Wall, r.rep.Partial = el, true
			fmt.Fprintf(r.o.Progress, "  %6.1fs  budget of %v spent with %d schedules active\n", el.Seconds(), r.o.Budget, left)
			return nil
		}
		if time.Since(lastProgress) >= 5*time.Second {
			lastProgress = time.Now()
			fmt.Fprintf(r.o.Progress, "  %6.1fs  %d of %d fired\n", el.Seconds(), int64(r.o.Schedules)-left, r.o.Schedules)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
	}
}

// stop sends SIGTERM to the worker processes and waits for them (SIGKILL
// after 30 s).
func (r *run) stop() {
	for _, w := range r.workers {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, w := range r.workers {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}

// events reads the event lines of a worker's file, calling fn for each.
func (w *worker) events(fn func(e *cli.Event)) error {
	f, err := os.Open(w.file)
	if err != nil {
		return fmt.Errorf("bench dispatch: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var e cli.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("bench dispatch: %s: line %q: %w", w.file, sc.Text(), err)
		}
		fn(&e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("bench dispatch: read %s: %w", w.file, err)
	}
	return nil
}
