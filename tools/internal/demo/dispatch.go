package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/cli"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/tools/internal/bench"
)

// DispatchOptions describe one run of the dispatch demo. The command
// checks the counts (>= 1) and durations (> 0) before [RunDispatch].
type DispatchOptions struct {
	// Backend is sqlite, postgres, mysql or mariadb; DSN its data source
	// name, empty for the local server or, on sqlite, a file in a
	// temporary directory.
	Backend, DSN string
	// Once is the number of once schedules, due evenly over the first
	// five sixths of Duration; Cron the number of every-second cron
	// schedules, active for Duration.
	Once, Cron int
	Duration   time.Duration
	// FailRate is the fraction of fires failed on purpose.
	FailRate float64
	// Processes is the number of worker processes (at least 3: one is
	// killed with SIGKILL at 30 % of Duration, one sent SIGTERM at 50 %).
	Processes int
	// Command is the argument vector that runs the claimstore command
	// (the demo appends "dispatch run" and its flags); Env is added to
	// the children's environment.
	Command []string
	Env     []string
	// Keep keeps the table and a temporary SQLite file.
	Keep bool
	// Progress receives a line a second; Logs the children's stderr.
	Progress, Logs io.Writer
}

// worker process settings of the demo
const (
	demoLease        = 2 * time.Second
	demoTick         = 100 * time.Millisecond
	demoDrainTimeout = 100 * time.Millisecond
	demoWork         = 200 * time.Millisecond
	demoBackoffBase  = 250 * time.Millisecond
	demoBackoffMax   = 2 * time.Second
)

// child is one worker process.
type child struct {
	id     string
	cmd    *exec.Cmd
	done   chan struct{}
	fate   string // "", "SIGKILL", "SIGTERM"
	http   chan string
	events []cli.Event
}

// dispatchRun is the state of one demo run.
type dispatchRun struct {
	o       DispatchOptions
	out     io.Writer
	table   string
	dsn     string
	file    string
	store   *dao.Table[dispatch.Schedule]
	mu      sync.Mutex
	kids    []*child
	fires   int
	cronAt  time.Time // first cron occurrence
	pauseAt time.Time // when the cron schedules were paused
	readyz  string    // what /readyz of the SIGTERM'd process answered
}

// RunDispatch runs the dispatch demo that o describes and writes its
// verdict to out. It returns an error when the set-up fails or the
// verdict does not hold: every once schedule fired, no cron occurrence
// missed, no occurrence fired twice (except by the SIGKILLed process,
// which may have fired one whose outcome it never wrote).
func RunDispatch(ctx context.Context, out io.Writer, o DispatchOptions) error {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	o.Progress, o.Logs = SyncPair(o.Progress, o.Logs) // the processes write to Logs at once
	r := &dispatchRun{o: o, out: out, table: "dispatch_demo_" + outboxenv.RandomHex(4)}
	closeDB, err := r.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	start, err := r.seed(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "dispatch demo: %d once schedules + %d every-second cron schedules for %v, %d worker processes, %.0f%% induced failures; backend %s, table %s\n",
		o.Once, o.Cron, o.Duration, o.Processes, 100*o.FailRate, strings.ToLower(o.Backend), r.table)
	if r.file != "" {
		fmt.Fprintf(out, "database file: %s\n", r.file)
	}
	if err := r.spawn(ctx); err != nil {
		r.stopAll()
		return err
	}
	err = r.drive(ctx, start)
	r.stopAll()
	if err != nil {
		return err
	}
	return r.verdict(ctx)
}

// open opens the database and creates the schedule table.
func (r *dispatchRun) open(ctx context.Context) (func(), error) {
	backend := strings.ToLower(r.o.Backend)
	var cleanup []func()
	closeAll := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	r.dsn = r.o.DSN
	switch {
	case r.dsn == "" && backend == "sqlite":
		dir, err := os.MkdirTemp("", "claimstore-dispatch-")
		if err != nil {
			return nil, err
		}
		r.file = filepath.Join(dir, "dispatch.db")
		if !r.o.Keep {
			cleanup = append(cleanup, func() { _ = os.RemoveAll(dir) })
		}
		r.dsn = sqlstore.SQLiteDSN(r.file)
	default:
		d, _, err := bench.CommandDSN(backend, r.dsn)
		if err != nil {
			return nil, err
		}
		r.dsn = d
	}
	db, err := sqlstore.Open(ctx, backend, r.dsn)
	if err != nil {
		closeAll()
		return nil, err
	}
	cleanup = append(cleanup, func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	if err := dispatch.MigrateSchedules(ctx, db, r.table); err != nil {
		closeAll()
		return nil, err
	}
	if !r.o.Keep {
		// The worker processes create the lease table of their leader
		// election; it goes with the schedule table.
		cleanup = append(cleanup, func() { _ = db.Migrator().DropTable(r.table, r.leaderTable()) })
	}
	if r.store, err = sqlstore.New[dispatch.Schedule](db.WithContext(ctx), sqlstore.WithTable(r.table)); err != nil {
		closeAll()
		return nil, err
	}
	return closeAll, nil
}

// leaderTable is the lease table of the worker processes' leader
// election: the schedule table's name and "_leaders".
func (r *dispatchRun) leaderTable() string { return r.table + "_leaders" }

// seed writes the schedules: the once schedules due evenly from 1 s after
// the workers start over five sixths of the run, and the cron schedules.
func (r *dispatchRun) seed(ctx context.Context) (time.Time, error) {
	now, err := r.store.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	start := now.Add(2 * time.Second) // the workers are up by then
	spread := r.o.Duration * 5 / 6
	rows := make([]*dispatch.Schedule, 0, r.o.Once+r.o.Cron)
	for i := range r.o.Once {
		due := start.Add(spread * time.Duration(i) / time.Duration(r.o.Once))
		rows = append(rows, &dispatch.Schedule{Key: fmt.Sprintf("once-%05d", i), Kind: dispatch.KindOnce, Status: dispatch.StatusActive,
			NextFireAt: due.UTC(), MaxFailures: dispatch.DefaultMaxFailures, Payload: []byte("once")})
	}
	r.cronAt = start.Truncate(time.Second).Add(time.Second).UTC()
	for i := range r.o.Cron {
		rows = append(rows, &dispatch.Schedule{Key: fmt.Sprintf("cron-%03d", i), Kind: dispatch.KindCron, Cron: "* * * * * *",
			Status: dispatch.StatusActive, NextFireAt: r.cronAt, MaxFailures: dispatch.DefaultMaxFailures, Payload: []byte("cron")})
	}
	for batch := range slices.Chunk(rows, 500) {
		if err := r.store.Create(ctx, batch...); err != nil {
			return time.Time{}, fmt.Errorf("seed schedules: %w", err)
		}
	}
	return start, nil
}

// spawn starts the worker processes.
func (r *dispatchRun) spawn(ctx context.Context) error {
	if len(r.o.Command) == 0 {
		return errors.New("dispatch demo: no command to start worker processes with")
	}
	for i := range r.o.Processes {
		c := &child{id: fmt.Sprintf("demo-worker-%d", i+1), done: make(chan struct{}), http: make(chan string, 1)}
		args := append(slices.Clone(r.o.Command[1:]), "dispatch", "run",
			"--backend", strings.ToLower(r.o.Backend), "--dsn", r.dsn, "--table", r.table, "--migrate=false",
			"--http", "127.0.0.1:0", "--worker-id", c.id, "--concurrency", "32",
			"--poll-interval", demoTick.String(), "--lease", demoLease.String(), "--drain-timeout", demoDrainTimeout.String(),
			"--backoff-base", demoBackoffBase.String(), "--backoff-max", demoBackoffMax.String(),
			"--fail-rate", fmt.Sprint(r.o.FailRate), "--work", demoWork.String(),
			"--maintenance-every", "5s", "--rescue-after", "10s", "--leader-lease", "3s", "--leader-table", r.leaderTable(),
			"--log-level", "warn")
		c.cmd = exec.CommandContext(ctx, r.o.Command[0], args...)
		c.cmd.Env = append(os.Environ(), r.o.Env...)
		c.cmd.Stderr = r.o.Logs
		pipe, err := c.cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := c.cmd.Start(); err != nil {
			return fmt.Errorf("start worker process: %w", err)
		}
		r.kids = append(r.kids, c)
		go r.read(c, pipe)
	}
	return nil
}

// read collects a child's event lines until it exits.
func (r *dispatchRun) read(c *child, pipe io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var e cli.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		r.mu.Lock()
		c.events = append(c.events, e)
		if e.Type == "fire" {
			r.fires++
		}
		r.mu.Unlock()
		if e.Type == "start" {
			c.http <- e.HTTP
		}
	}
	_ = c.cmd.Wait()
}

// drive runs the timeline: SIGKILL at 30 %, SIGTERM at 50 % (reading
// /readyz right after), cron schedules paused at the end, then waits for
// the once schedules to be done.
func (r *dispatchRun) drive(ctx context.Context, start time.Time) error {
	began := time.Now()
	lead := time.Until(start) // the first schedules are due then
	killAt, termAt := lead+r.o.Duration*3/10, lead+r.o.Duration/2
	end := lead + r.o.Duration
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var killed, termed bool
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		el := time.Since(began)
		r.mu.Lock()
		fires := r.fires
		r.mu.Unlock()
		fmt.Fprintf(r.o.Progress, "  %5.1fs  fire lines %d\n", el.Seconds(), fires)
		if !killed && el >= killAt {
			killed = true
			r.kids[0].fate = "SIGKILL"
			fmt.Fprintf(r.o.Progress, "  -- %s: SIGKILL\n", r.kids[0].id)
			_ = r.kids[0].cmd.Process.Kill()
		}
		if !termed && el >= termAt {
			termed = true
			r.sigterm(r.kids[1])
		}
		if el >= end {
			break
		}
	}
	now, err := r.store.Now(ctx)
	if err != nil {
		return err
	}
	r.pauseAt = now
	if _, err := r.store.Update(ctx, dao.Eq(dispatch.ColKind, string(dispatch.KindCron)), dao.Set{dispatch.ColStatus: string(dispatch.StatusPaused)}); err != nil {
		return fmt.Errorf("pause the cron schedules: %w", err)
	}
	fmt.Fprintf(r.o.Progress, "  -- cron schedules paused; waiting for the once schedules\n")
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		n, err := r.store.Count(ctx, dao.And(dao.Eq(dispatch.ColKind, string(dispatch.KindOnce)), dao.Eq(dispatch.ColStatus, string(dispatch.StatusActive))))
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("dispatch demo: once schedules still active a minute after the run")
}

// sigterm sends SIGTERM to c and reads its /readyz at once.
func (r *dispatchRun) sigterm(c *child) {
	c.fate = "SIGTERM"
	var addr string
	select {
	case addr = <-c.http:
	default:
	}
	fmt.Fprintf(r.o.Progress, "  -- %s: SIGTERM (drain)\n", c.id)
	if addr == "" {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		r.readyz = "not served"
		return
	}
	// Probe /readyz from just before the signal until the process stops
	// answering, and report the first answer other than 200.
	cl := http.Client{Timeout: time.Second}
	r.readyz = "the process exited before it answered again"
	signalled := false
	for i := range 400 {
		resp, err := cl.Get("http://" + addr + "/readyz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			r.readyz = resp.Status
			break
		}
		if i == 399 {
			r.readyz = "still 200 after 400 probes: FAILED"
		}
		if !signalled {
			signalled = true
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			continue
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !signalled {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// stopAll sends SIGTERM to the processes still running and waits for
// them (SIGKILL after 15 s).
func (r *dispatchRun) stopAll() {
	for _, c := range r.kids {
		if c.fate == "" {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, c := range r.kids {
		select {
		case <-c.done:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}
