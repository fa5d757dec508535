//go:build linux

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dispatch"
	"github.com/claimstore/claimstore/internal/cmd/outboxenv"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/outbox"
	"github.com/claimstore/claimstore/tools/internal/bench"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// Defaults of Options.
const (
	DefaultDuration     = 10 * time.Minute
	DefaultClientPort   = 14322
	DefaultClusterPort  = 16322
	DefaultMonitorPort  = 18322
	DefaultRate         = 60
	DefaultDrainTimeout = 2 * time.Minute
	soakLease           = 2 * time.Second
	soakLeaderTTL       = 2 * time.Second
	onceEverySecond     = 4 // once schedules due per second of load
	cronSchedules       = 3
)

// Options describe one soak run. Zero fields take their defaults.
type Options struct {
	// Backend is postgres, mysql or mariadb; DSN its data source name,
	// empty for the local test server.
	Backend, DSN string
	// Duration is the length of the load and of the fault schedule;
	// draining the backlog and checking come after it. Default 10 min.
	Duration time.Duration
	// Seed draws the fault schedule; 0 draws a seed (printed, to replay).
	Seed uint64
	// Producers, Workers and Relays are the processes of each role;
	// defaults 2, 3 and 2. Subscribers is the Watermill subscriber
	// processes, default 2 when SubscriberCommand is given (none
	// without). Rate is the orders per second of each producer
	// (default 60), 5 to a transaction.
	Producers, Workers, Relays, Subscribers, Rate int
	// Command is the argument vector that runs the claimstore command; the
	// run appends "soak child" and its flags. Env is added to the
	// children's environment.
	Command []string
	Env     []string
	// SubscriberCommand is the argument vector that runs the Watermill
	// subscriber command (claimstore-soaksub, built from the watermill
	// module: `make soak` builds bin/claimstore-soaksub); the run appends
	// "migrate" or "child" and their flags. Empty: the run has no
	// Watermill message table and no subscribers.
	SubscriberCommand []string
	// NATSServer is the nats-server binary (default /usr/sbin/nats-server);
	// ClientPort, ClusterPort and MonitorPort the first node's ports
	// (defaults 14322, 16322, 18322; node i listens on port + i).
	NATSServer                           string
	ClientPort, ClusterPort, MonitorPort int
	// DrainTimeout bounds the wait, after the load, for every job,
	// message and once schedule to be done; default 2 min.
	DrainTimeout time.Duration
	// Keep keeps the run's directory (histories, logs) after a run that
	// passed; a failed run always keeps it.
	Keep bool
	// Progress receives a line every 5 s and each fault; nil: none.
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	for _, p := range []*int{&o.Producers, &o.Relays} {
		if *p == 0 {
			*p = 2
		}
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if len(o.SubscriberCommand) == 0 {
		o.Subscribers = 0
	} else if o.Subscribers == 0 {
		o.Subscribers = 2
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.NATSServer == "" {
		o.NATSServer = hatest.DefaultNATSServer
	}
	if o.ClientPort == 0 {
		o.ClientPort = DefaultClientPort
	}
	if o.ClusterPort == 0 {
		o.ClusterPort = DefaultClusterPort
	}
	if o.MonitorPort == 0 {
		o.MonitorPort = DefaultMonitorPort
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()>>1 | 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// proc is one slot's current process.
type proc struct {
	slot  string
	inc   int
	name  string // slot.inc
	cmd   *exec.Cmd
	done  chan struct{}
	state string // running, frozen, dead, stopping
}

// faultRecord is one fault as injected.
type faultRecord struct {
	PlannedFault
	seq      int
	start    time.Time
	victim   string // the process (slot.inc) or node
	skipped  string // why it was not injected
	conns    int64  // connections terminated
	maxJob   int64
	maxMsg   int64
	recovery time.Duration // -1 until recovered
}

// run is the state of one soak run.
type run struct {
	o        Options
	out      io.Writer
	tag      string
	dir      string
	tables   Tables
	backend  string
	dsn      string
	db       *gorm.DB
	cfg      ChildConfig
	h        *History
	cluster  *hatest.NATSCluster
	js       jetstream.JetStream
	stream   string
	subject  string
	users    []string     // MariaDB users made for the slots
	qc       *jobs.Client // inserts the workflows
	wfs      []PlannedWorkflow
	mu       sync.Mutex
	procs    map[string]*proc
	faults   []*faultRecord
	loadFrom time.Time
	loadEnd  time.Time
	drained  time.Duration
	cleanups []func()
}

// Run runs the soak that o describes and prints its report to out. It
// returns an error when the set-up fails or when the checker finds a
// violation; the report then names the seed that replays the fault
// schedule.
func Run(ctx context.Context, out io.Writer, o Options) (err error) {
	o.defaults()
	backend := strings.ToLower(o.Backend)
	switch backend {
	case "postgres", "postgresql":
		backend = "postgres"
	case "mysql", "mariadb":
	default:
		return fmt.Errorf("soak: %w: backend %q: want postgres, mysql or mariadb", dao.ErrInvalidArgument, o.Backend)
	}
	if len(o.Command) == 0 {
		return fmt.Errorf("soak: %w: no command to start the processes with", dao.ErrInvalidArgument)
	}
	r := &run{o: o, out: out, tag: outboxenv.RandomHex(4), backend: backend, procs: map[string]*proc{}}
	r.tables = NewTables(r.tag)
	if o.Subscribers > 0 {
		r.tables.WM = r.tables.prefix() + "wm"
	}
	defer r.cleanup()
	if r.dir, err = os.MkdirTemp("", "claimstore-soak-"+r.tag+"-"); err != nil {
		return err
	}
	passed := false
	r.onExit(func() {
		if passed && !o.Keep {
			_ = os.RemoveAll(r.dir)
			return
		}
		fmt.Fprintf(out, "histories and logs kept in %s\n", r.dir)
	})
	if r.h, err = CreateHistory(filepath.Join(r.dir, "orch.jsonl"), "orch"); err != nil {
		return err
	}
	r.onExit(func() { _ = r.h.Close() })
	if err := r.openDatabase(ctx); err != nil {
		return err
	}
	if err := r.startNATS(ctx); err != nil {
		return err
	}
	if err := r.seedSchedules(ctx); err != nil {
		return err
	}
	if err := r.writeConfig(); err != nil {
		return err
	}
	if err := r.migrateWatermill(ctx); err != nil {
		return err
	}
	plan := PlanFaults(o.Seed, o.Duration, o.Producers, o.Workers, o.Relays, o.Subscribers)
	r.wfs = PlanWorkflows(o.Seed, o.Duration)
	fmt.Fprintf(out, "soak: backend %s, seed %d, load %v, %d producers x %d orders/s, %d workers, %d relays, %d Watermill subscribers; %d faults, %d workflows planned\n",
		backend, o.Seed, o.Duration, o.Producers, o.Rate, o.Workers, o.Relays, o.Subscribers, len(plan), len(r.wfs))
	fmt.Fprintf(out, "      tables soak_%s_*, NATS cluster %s, stream %s, directory %s\n", r.tag, r.cluster.URLs(), r.stream, r.dir)
	r.onExit(r.stopAll)
	for _, slot := range slices.Sorted(maps.Keys(r.cfg.Roles)) {
		if err := r.spawn(ctx, slot); err != nil {
			return err
		}
	}
	if err := r.load(ctx, plan); err != nil {
		return err
	}
	r.stopAll()
	rep, err := r.check(ctx)
	if err != nil {
		return err
	}
	rep.Print(out, r)
	if len(rep.Violations) > 0 {
		return fmt.Errorf("soak: %d violations (replay with --seed %d)", len(rep.Violations), o.Seed)
	}
	passed = true
	return nil
}

// onExit adds f to the clean-ups, which run in reverse order when Run
// returns.
func (r *run) onExit(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *run) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// openDatabase opens the orchestrator's pool, creates the run's tables
// (dropped at the end) and the slots' data source names.
func (r *run) openDatabase(ctx context.Context) error {
	dsn, _, err := bench.CommandDSN(r.backend, r.o.DSN)
	if err != nil {
		return err
	}
	r.dsn = dsn
	if r.db, err = sqlstore.Open(ctx, r.backend, dsn); err != nil {
		return err
	}
	sqlDB, err := r.db.DB()
	if err != nil {
		return err
	}
	sqlDB.SetMaxOpenConns(4)
	r.onExit(func() { _ = sqlDB.Close() })
	t := r.tables
	r.onExit(func() {
		for _, name := range t.All() {
			if err := r.db.Migrator().DropTable(name); err != nil {
				fmt.Fprintf(r.out, "drop table %s: %v\n", name, err)
			}
		}
	})
	db := r.db.WithContext(ctx)
	for name, model := range map[string]any{t.Orders: &Order{}, t.Jobs: &Job{}, t.Fence: &Fence{}, t.FenceLog: &FenceLog{}} {
		if err := db.Table(name).AutoMigrate(model); err != nil {
			return fmt.Errorf("soak: create %s: %w", name, err)
		}
	}
	if err := db.Table(t.Fence).Create(&Fence{ID: 1}).Error; err != nil {
		return fmt.Errorf("soak: fence row: %w", err)
	}
	if err := outbox.Migrate(ctx, r.db, t.Outbox); err != nil {
		return err
	}
	if err := dispatch.MigrateSchedules(ctx, r.db, t.Schedules); err != nil {
		return err
	}
	leases, err := sqlstore.NewLeases(r.db, t.Leaders)
	if err != nil {
		return err
	}
	if err := leases.Migrate(ctx); err != nil {
		return err
	}
	qstore, err := sqlstore.New[jobs.Row](r.db, sqlstore.WithTable(t.QJobs))
	if err != nil {
		return err
	}
	r.onExit(func() {
		if err := jobs.Drop(context.WithoutCancel(ctx), qstore, nil); err != nil {
			fmt.Fprintf(r.out, "drop the job queue's table: %v\n", err)
		}
	})
	if err := jobs.Migrate(ctx, qstore, nil); err != nil {
		return err
	}
	if r.qc, err = jobs.NewClient(jobs.Config{Store: qstore, WorkerID: "orch"}); err != nil {
		return err
	}
	r.cfg = ChildConfig{Backend: r.backend, DSNs: map[string]string{}, Roles: map[string]string{}, Tables: t,
		Rate: r.o.Rate, PerTx: 5, Lease: soakLease, LeaderTTL: soakLeaderTTL, Dir: r.dir}
	if t.WM != "" {
		r.cfg.WMTopic, r.cfg.WMGroup, r.cfg.WMAdminDSN = "soak."+r.tag+".orders", "soak", dsn
	}
	for _, s := range []struct {
		prefix, role string
		n            int
	}{{"p", RoleProducer, r.o.Producers}, {"w", RoleWorker, r.o.Workers}, {"r", RoleRelay, r.o.Relays}, {"s", RoleSubscriber, r.o.Subscribers}} {
		for i := range s.n {
			slot := fmt.Sprintf("%s%d", s.prefix, i+1)
			r.cfg.Roles[slot] = s.role
			if r.cfg.DSNs[slot], err = r.slotDSN(ctx, slot); err != nil {
				return err
			}
		}
	}
	return nil
}

// dbName is what a database name taken from the DSN may be, to be written
// into a GRANT statement.
var dbName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// slotDSN returns the data source name of slot: on PostgreSQL the run's
// with application_name soak-<tag>-<slot>; on MySQL and MariaDB that of a
// user of its own, soak_<tag>_<slot>@127.0.0.1, made here (dropped at the
// end) with every privilege on the DSN's database. Either lets a fault
// find the slot's connections.
func (r *run) slotDSN(ctx context.Context, slot string) (string, error) {
	if r.backend == "postgres" {
		u, err := url.Parse(r.dsn)
		if err != nil || u.Scheme == "" {
			return "", fmt.Errorf("soak: %w: the PostgreSQL DSN must be a URL (postgres://...)", dao.ErrInvalidArgument)
		}
		q := u.Query()
		q.Set("application_name", r.appName(slot))
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	c, err := mysql.ParseDSN(r.dsn)
	if err != nil {
		return "", fmt.Errorf("soak: %w: %v", dao.ErrInvalidArgument, err)
	}
	if !dbName.MatchString(c.DBName) {
		return "", fmt.Errorf("soak: %w: database name %q", dao.ErrInvalidArgument, c.DBName)
	}
	user := r.userName(slot) // [a-z0-9_] only: made from the hex tag and the slot
	db := r.db.WithContext(ctx)
	if err := db.Exec("CREATE USER '" + user + "'@'127.0.0.1'").Error; err != nil {
		return "", fmt.Errorf("soak: create user %s: %w", user, err)
	}
	r.users = append(r.users, user)
	if len(r.users) == 1 {
		r.onExit(func() {
			for _, u := range r.users {
				if err := r.db.Exec("DROP USER IF EXISTS '" + u + "'@'127.0.0.1'").Error; err != nil {
					fmt.Fprintf(r.out, "drop user %s: %v\n", u, err)
				}
			}
		})
	}
	if err := db.Exec("GRANT ALL PRIVILEGES ON `" + c.DBName + "`.* TO '" + user + "'@'127.0.0.1'").Error; err != nil {
		return "", fmt.Errorf("soak: grant to %s: %w", user, err)
	}
	c.User, c.Passwd = user, ""
	return c.FormatDSN(), nil
}

func (r *run) appName(slot string) string  { return "soak-" + r.tag + "-" + slot }
func (r *run) userName(slot string) string { return "soak_" + r.tag + "_" + slot }

// killConnections terminates every database connection of slot and
// returns how many.
func (r *run) killConnections(ctx context.Context, slot string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	db := r.db.WithContext(ctx)
	if r.backend == "postgres" {
		var n int64
		err := db.Raw("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? AND pid <> pg_backend_pid()) AS t",
			r.appName(slot)).Scan(&n).Error
		return n, err
	}
	var ids []int64
	if err := db.Raw("SELECT id FROM information_schema.processlist WHERE user = ?", r.userName(slot)).Scan(&ids).Error; err != nil {
		return 0, err
	}
	var n int64
	for _, id := range ids {
		// KILL takes no placeholder; id is the server's own integer.
		if err := db.Exec(fmt.Sprintf("KILL CONNECTION %d", id)).Error; err == nil {
			n++
		}
	}
	return n, nil
}

// startNATS starts the three-node cluster and creates the R3 stream.
func (r *run) startNATS(ctx context.Context) error {
	if _, err := os.Stat(r.o.NATSServer); err != nil {
		return fmt.Errorf("soak: nats-server binary: %w (install the nats-server package or pass --nats-server)", err)
	}
	c, err := hatest.StartNATSCluster(hatest.NATSClusterOptions{Binary: r.o.NATSServer, Dir: filepath.Join(r.dir, "nats"),
		ClientPort: r.o.ClientPort, ClusterPort: r.o.ClusterPort, MonitorPort: r.o.MonitorPort, Name: "claimstore-soak"})
	if err != nil {
		return err
	}
	r.cluster = c
	r.onExit(c.Close)
	nc, err := nats.Connect(c.URLs(), nats.Name("claimstore soak admin"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		return fmt.Errorf("soak: connect to the NATS cluster: %w", err)
	}
	r.onExit(nc.Close)
	if r.js, err = jetstream.New(nc); err != nil {
		return err
	}
	r.stream, r.subject = "SOAK_"+strings.ToUpper(r.tag), "soak."+r.tag+".orders"
	r.cfg.NATSURLs, r.cfg.Subject = c.URLs(), r.subject
	// The window covers the whole run: a message published again at any
	// time of it is stored once.
	window := r.o.Duration + r.o.DrainTimeout + 10*time.Minute
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := r.js.CreateStream(cctx, jetstream.StreamConfig{Name: r.stream, Subjects: []string{r.subject}, Replicas: 3,
			Storage: jetstream.FileStorage, Duplicates: window})
		if err == nil {
			info, ierr := s.Info(cctx)
			if ierr == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				cancel()
				return nil
			}
		}
		cancel()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("soak: create stream %s with a leader: %v", r.stream, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// seedSchedules writes the once schedules, due evenly over the load from
// its 3rd second, and the every-second cron schedules.
func (r *run) seedSchedules(ctx context.Context) error {
	store, err := sqlstore.New[dispatch.Schedule](r.db.WithContext(ctx), sqlstore.WithTable(r.tables.Schedules))
	if err != nil {
		return err
	}
	now, err := store.Now(ctx)
	if err != nil {
		return err
	}
	start := now.Add(3 * time.Second).UTC()
	n := int(r.o.Duration/time.Second) * onceEverySecond
	rows := make([]*dispatch.Schedule, 0, n+cronSchedules)
	for i := range n {
		due := start.Add(r.o.Duration * time.Duration(i) / time.Duration(max(1, n)))
		rows = append(rows, &dispatch.Schedule{Key: fmt.Sprintf("once-%06d", i), Kind: dispatch.KindOnce, Status: dispatch.StatusActive,
			NextFireAt: due, MaxFailures: dispatch.DefaultMaxFailures, Payload: []byte("once")})
	}
	for i := range cronSchedules {
		rows = append(rows, &dispatch.Schedule{Key: fmt.Sprintf("cron-%d", i), Kind: dispatch.KindCron, Cron: "* * * * * *",
			Status: dispatch.StatusActive, NextFireAt: start.Truncate(time.Second), MaxFailures: dispatch.DefaultMaxFailures, Payload: []byte("cron")})
	}
	for batch := range slices.Chunk(rows, 500) {
		if err := store.Create(ctx, batch...); err != nil {
			return fmt.Errorf("soak: seed schedules: %w", err)
		}
	}
	return nil
}

// writeConfig writes config.json for the children.
func (r *run) writeConfig() error {
	b, err := json.MarshalIndent(r.cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.dir, "config.json"), b, 0o600)
}

// migrateWatermill runs the subscriber command's migrate, which creates
// the Watermill tables of the run and registers its consumer group.
func (r *run) migrateWatermill(ctx context.Context) error {
	if r.tables.WM == "" {
		return nil
	}
	c := r.o.SubscriberCommand
	cmd := exec.CommandContext(ctx, c[0], append(slices.Clone(c[1:]), "migrate", "--dir", r.dir)...)
	cmd.Env = append(os.Environ(), r.o.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("soak: %s migrate: %w: %s", c[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// spawn starts the next incarnation of slot.
func (r *run) spawn(ctx context.Context, slot string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[slot]
	inc := 1
	if p != nil {
		inc = p.inc + 1
	}
	name := fmt.Sprintf("%s.%d", slot, inc)
	logf, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	args := append(slices.Clone(r.o.Command[1:]), "soak", "child", "--dir", r.dir, "--slot", slot, "--inc", fmt.Sprint(inc), "--log-level", "warn")
	command := r.o.Command[0]
	if r.cfg.Roles[slot] == RoleSubscriber {
		command = r.o.SubscriberCommand[0]
		args = append(slices.Clone(r.o.SubscriberCommand[1:]), "child", "--dir", r.dir, "--slot", slot, "--inc", fmt.Sprint(inc))
	}
	cmd := exec.Command(command, args...)
	cmd.Env = append(os.Environ(), r.o.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("soak: start %s: %w", name, err)
	}
	np := &proc{slot: slot, inc: inc, name: name, cmd: cmd, done: make(chan struct{}), state: "running"}
	r.procs[slot] = np
	r.h.Add(Event{Kind: EvSpawn, Target: name, Pid: cmd.Process.Pid})
	go func() {
		err := cmd.Wait()
		logf.Close()
		e := Event{Kind: EvExit, Target: name}
		if err != nil {
			e.Err = err.Error()
		}
		r.h.Add(e)
		r.mu.Lock()
		np.state = "dead"
		r.mu.Unlock()
		close(np.done)
	}()
	return nil
}

// stopAll resumes and sends SIGTERM to every process still running, and
// waits for them (SIGKILL after 20 s).
func (r *run) stopAll() {
	r.mu.Lock()
	var all []*proc
	for _, p := range r.procs {
		if p.state != "dead" {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.state = "stopping"
		}
		all = append(all, p)
	}
	r.mu.Unlock()
	for _, p := range all {
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// inject runs fault f (and its restart or resume after f.Pause), recording
// it in the history and in r.faults.
func (r *run) inject(ctx context.Context, f PlannedFault, wg *sync.WaitGroup) {
	rec := &faultRecord{PlannedFault: f, start: time.Now(), recovery: -1}
	rec.maxJob, rec.maxMsg = r.maxIDs(ctx)
	r.mu.Lock()
	rec.seq = len(r.faults) + 1
	r.faults = append(r.faults, rec)
	var p *proc
	if f.Kind != FaultNATSKill {
		p = r.procs[f.Target]
		if p == nil || p.state != "running" {
			rec.skipped = "target not running"
		} else {
			rec.victim = p.name
		}
	} else {
		rec.victim = "n" + f.Target
	}
	if rec.skipped == "" {
		switch f.Kind {
		case FaultKill:
			p.state = "killed"
			_ = p.cmd.Process.Kill()
		case FaultFreeze:
			p.state = "frozen"
			_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		}
	}
	r.mu.Unlock()
	e := Event{Kind: EvFault, Seq: rec.seq, Fault: f.Kind, Target: rec.victim, Dur: f.Pause.Seconds()}
	if rec.skipped != "" {
		e.Err = rec.skipped
		r.h.Add(e)
		fmt.Fprintf(r.o.Progress, "  %6.1fs  fault %d skipped: %s (%s)\n", time.Since(r.loadFrom).Seconds(), rec.seq, f, rec.skipped)
		return
	}
	switch f.Kind {
	case FaultConnKill:
		n, err := r.killConnections(ctx, f.Target)
		rec.conns, e.N = n, n
		if err != nil {
			e.Err = err.Error()
		}
	case FaultNATSKill:
		r.cluster.Kill(int(f.Target[0] - '1'))
	}
	r.h.Add(e)
	what := rec.victim
	if f.Kind == FaultConnKill {
		what = fmt.Sprintf("%s, %d connections", rec.victim, rec.conns)
		if e.Err != "" {
			what += ": " + e.Err
		}
	}
	fmt.Fprintf(r.o.Progress, "  %6.1fs  fault %d: %s (%s)\n", time.Since(r.loadFrom).Seconds(), rec.seq, f, what)
	wg.Go(func() {
		if f.Pause == 0 {
			return
		}
		time.Sleep(f.Pause)
		switch f.Kind {
		case FaultKill:
			<-p.done
			if err := r.spawn(ctx, f.Target); err != nil {
				fmt.Fprintf(r.o.Progress, "  restart %s: %v\n", f.Target, err)
			}
		case FaultFreeze:
			r.mu.Lock()
			if p.state == "frozen" {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				p.state = "running"
			}
			r.mu.Unlock()
			r.h.Add(Event{Kind: EvFault, Seq: rec.seq, Fault: "resume", Target: p.name})
		case FaultNATSKill:
			i := int(f.Target[0] - '1')
			if err := r.cluster.Start(i); err != nil {
				fmt.Fprintf(r.o.Progress, "  restart NATS node n%s: %v\n", f.Target, err)
			}
			r.h.Add(Event{Kind: EvFault, Seq: rec.seq, Fault: "nats-start", Target: rec.victim})
		}
	})
}

// maxIDs returns the largest job and message ids.
func (r *run) maxIDs(ctx context.Context) (job, msg int64) {
	db := r.db.WithContext(ctx)
	_ = db.Table(r.tables.Jobs).Select("COALESCE(MAX(id), 0)").Scan(&job).Error
	_ = db.Table(r.tables.Outbox).Select("COALESCE(MAX(id), 0)").Scan(&msg).Error
	return job, msg
}

// backlog returns the smallest id of a job not done and of a message not
// published (0: none), and the once schedules still active.
func (r *run) backlog(ctx context.Context) (job, msg, once int64, err error) {
	db := r.db.WithContext(ctx)
	if err = db.Table(r.tables.Jobs).Select("COALESCE(MIN(id), 0)").Where("status <> ?", JobDone).Scan(&job).Error; err != nil {
		return
	}
	if err = db.Table(r.tables.Outbox).Select("COALESCE(MIN(id), 0)").Where("published_at IS NULL").Scan(&msg).Error; err != nil {
		return
	}
	if err = db.Table(r.tables.Schedules).Where("kind = ? AND status = ?", string(dispatch.KindOnce), string(dispatch.StatusActive)).Count(&once).Error; err != nil {
		return
	}
	var q int64
	if err = db.Table(r.tables.QJobs).Where("finalized_at IS NULL").Count(&q).Error; err != nil {
		return
	}
	once += q
	if r.tables.WM != "" {
		// The Watermill messages not fanned out yet and the deliveries
		// not acked count with the once schedules: what is left to do.
		var wm int64
		for _, table := range []string{r.tables.WM, r.tables.WMDeliveries()} {
			if err = db.Table(table).Where("published_at IS NULL").Count(&wm).Error; err != nil {
				return
			}
			once += wm
		}
	}
	return
}

// progress returns the jobs done and the messages published.
func (r *run) progress(ctx context.Context) (jobs, msgs int64) {
	db := r.db.WithContext(ctx)
	_ = db.Table(r.tables.Jobs).Where("status = ?", JobDone).Count(&jobs).Error
	_ = db.Table(r.tables.Outbox).Where("published_at IS NOT NULL").Count(&msgs).Error
	return jobs, msgs
}

// load runs the fault schedule for the load's duration while watching
// the backlog, stops the producers, and waits for the backlog to drain.
func (r *run) load(ctx context.Context, plan []PlannedFault) error {
	r.loadFrom = time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	next, nextWF := 0, 0
	watch := time.NewTicker(250 * time.Millisecond)
	defer watch.Stop()
	lastLine := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-watch.C:
		}
		el := time.Since(r.loadFrom)
		for next < len(plan) && plan[next].At <= el {
			r.inject(ctx, plan[next], &wg)
			next++
		}
		for nextWF < len(r.wfs) && r.wfs[nextWF].At <= el {
			r.insertWorkflow(ctx, r.wfs[nextWF])
			nextWF++
		}
		r.watchRecovery(ctx)
		if time.Since(lastLine) >= 5*time.Second {
			lastLine = time.Now()
			jobs, msgs := r.progress(ctx)
			r.h.Add(Event{Kind: EvSnapshot, N: jobs, M: msgs})
			fmt.Fprintf(r.o.Progress, "  %6.1fs  jobs done %d, messages published %d\n", el.Seconds(), jobs, msgs)
		}
		if el >= r.o.Duration {
			break
		}
	}
	// The load ends: restarts and resumes first, then the producers stop.
	wg.Wait()
	r.loadEnd = time.Now()
	r.h.Add(Event{Kind: EvLoadEnd})
	r.mu.Lock()
	var producers []*proc
	for _, p := range r.procs {
		if r.cfg.Roles[p.slot] == RoleProducer && p.state != "dead" {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.state = "stopping"
			producers = append(producers, p)
		}
	}
	r.mu.Unlock()
	for _, p := range producers {
		<-p.done
	}
	fmt.Fprintf(r.o.Progress, "  %6.1fs  load over, producers stopped; draining\n", time.Since(r.loadFrom).Seconds())
	deadline := time.Now().Add(r.o.DrainTimeout)
	for time.Now().Before(deadline) {
		r.watchRecovery(ctx)
		job, msg, once, err := r.backlog(ctx)
		if err == nil && job == 0 && msg == 0 && once == 0 {
			r.drained = time.Since(r.loadEnd)
			r.h.Add(Event{Kind: EvDrained, Dur: r.drained.Seconds()})
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	r.drained = -1
	return nil // the checker reports what is left
}

// watchRecovery marks the faults whose backlog is done: every job and
// message written before the fault is done and published.
func (r *run) watchRecovery(ctx context.Context) {
	r.mu.Lock()
	var open []*faultRecord
	for _, f := range r.faults {
		if f.recovery < 0 && f.skipped == "" {
			open = append(open, f)
		}
	}
	r.mu.Unlock()
	if len(open) == 0 {
		return
	}
	job, msg, _, err := r.backlog(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	for _, f := range open {
		if (job == 0 || job > f.maxJob) && (msg == 0 || msg > f.maxMsg) {
			r.mu.Lock()
			f.recovery = now.Sub(f.start)
			r.mu.Unlock()
			r.h.Add(Event{Kind: EvRecover, Seq: f.seq, Dur: f.recovery.Seconds()})
		}
	}
}

// insertWorkflow inserts w and records it in the history (with the error
// of an insert that failed, which the checker reports).
func (r *run) insertWorkflow(ctx context.Context, w PlannedWorkflow) {
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e := Event{Kind: EvWorkflow, Target: w.Label, N: int64(len(w.Tasks))}
	res, err := r.qc.InsertWorkflow(ictx, w.Workflow())
	if err != nil {
		e.Err = err.Error()
		fmt.Fprintf(r.o.Progress, "  %6.1fs  workflow %s not inserted: %v\n", time.Since(r.loadFrom).Seconds(), w.Label, err)
	} else {
		e.Key = res.ID
	}
	r.h.Add(e)
}
