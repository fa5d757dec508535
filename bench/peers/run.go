package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
)

// Config is one run of the peers benchmark.
type Config struct {
	// DSN is the PostgreSQL connection URL every system uses.
	DSN string
	// Rows is the number of rows, jobs or messages each system works
	// through per round.
	Rows int
	// Workers is the number of concurrent claimstore claimers.
	Workers int
	// RiverMaxWorkers lists River's MaxWorkers settings: each is measured
	// as a system of its own in every round.
	RiverMaxWorkers []int
	// Batch is the number of rows one claimstore claim asks for.
	Batch int
	// RiverFetchCooldown is River's FetchCooldown: the shortest time
	// between two fetches of one queue.
	RiverFetchCooldown time.Duration
	// WatermillBatch is Watermill's SubscribeBatchSize: the messages one
	// subscriber transaction reads and acks at once.
	WatermillBatch int
	// Rounds is how many times the systems are measured, interleaved.
	Rounds int
	// Timeout bounds each system's timed phase.
	Timeout time.Duration
	// Concurrency is the dispatch worker's Concurrency (handlers at once)
	// in the job-cycle phase, DispatchBatch its BatchSize (0: its default).
	Concurrency, DispatchBatch int
	// JobsWorkers is the jobs queue's MaxWorkers in the jobs phases.
	JobsWorkers int
	// Pool is the connection pool size of River's client and of the
	// dispatch worker.
	Pool int
	// Systems selects the systems by name (claimstore, dispatch, river,
	// watermill).
	Systems []string
}

// Result is one system's timed phase.
type Result struct {
	Round   int    `json:"round"`
	System  string `json:"system"`
	Unit    string `json:"unit"`
	Rows    int    `json:"rows"`
	Workers int    `json:"workers"`
	// Done is the number of distinct rows processed; Duplicates counts the
	// extra deliveries, Lost the rows never processed.
	Done       int           `json:"done"`
	Duplicates int           `json:"duplicates"`
	Lost       int           `json:"lost"`
	Wall       time.Duration `json:"wall_ns"`
	CPU        time.Duration `json:"cpu_ns"`
	// ServerCPU is the CPU time of the PostgreSQL backends that served
	// the phase's connections (read from /proc, so known only when the
	// server runs on this machine; 0 otherwise).
	ServerCPU  time.Duration `json:"server_cpu_ns"`
	Statements int64         `json:"statements"`
	Load1Start float64       `json:"load1_start"`
	Load1End   float64       `json:"load1_end"`
	// Setup is the untimed loading or publishing that came before.
	Setup time.Duration `json:"setup_ns"`
}

// RowsPerSec returns the rows processed per second of wall time.
func (r Result) RowsPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Done) / r.Wall.Seconds()
}

// CPUPerRow returns the process CPU time spent per row processed.
func (r Result) CPUPerRow() time.Duration {
	if r.Done == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Done)
}

// ServerCPUPerRow returns the PostgreSQL backends' CPU time per row
// processed (0 when unknown).
func (r Result) ServerCPUPerRow() time.Duration {
	if r.Done == 0 {
		return 0
	}
	return r.ServerCPU / time.Duration(r.Done)
}

// StatementsPerRow returns the statements, batches and copies sent per row
// processed.
func (r Result) StatementsPerRow() float64 {
	if r.Done == 0 {
		return 0
	}
	return float64(r.Statements) / float64(r.Done)
}

// Exact reports whether every row was processed exactly once.
func (r Result) Exact() bool { return r.Done == r.Rows && r.Duplicates == 0 && r.Lost == 0 }

// Machine is where the run measured.
type Machine struct {
	CPUs      int        `json:"cpus"`
	GoVersion string     `json:"go"`
	Server    string     `json:"server_version"`
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
}

// String returns the machine on one line.
func (m Machine) String() string {
	return fmt.Sprintf("%d CPU cores, %s, PostgreSQL %s, load average %s at start, %s at end",
		m.CPUs, m.GoVersion, m.Server, fmtLoad(m.LoadStart), fmtLoad(m.LoadEnd))
}

func fmtLoad(l [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// loadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg, zeros where the system has no such file.
func loadAverage() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		fmt.Sscanf(f[i], "%g", &l[i])
	}
	return l
}

// currentMachine returns the machine with the server's version read on db.
func currentMachine(ctx context.Context, db *sql.DB) (Machine, error) {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAverage()}
	if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&m.Server); err != nil {
		return m, fmt.Errorf("peers: server version: %w", err)
	}
	return m, nil
}

// counter is a pgx tracer that counts what a pool sends: statements,
// batches and COPYs, each one exchange with the server; it also records
// the process ids of the backends that served them.
type counter struct {
	n    atomic.Int64
	pids sync.Map // uint32 backend pid -> struct{}
}

func (c *counter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.pids.Store(conn.PgConn().PID(), struct{}{})
	return ctx
}

// serverCPU returns the CPU time the backends c has seen have used since
// before (their CPU times then, see postgresCPU; a backend not in it
// started later and counts whole).
func (c *counter) serverCPU(before map[uint32]time.Duration) time.Duration {
	var total time.Duration
	c.pids.Range(func(k, _ any) bool {
		pid := k.(uint32)
		if now, ok := procCPU(pid); ok {
			total += now - before[pid]
		}
		return true
	})
	return total
}

// postgresCPU returns the CPU time used so far by every process of this
// machine whose command is postgres, by pid; empty where /proc is not
// readable.
func postgresCPU() map[uint32]time.Duration {
	out := map[uint32]time.Duration{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, d := range dirs {
		pid, err := strconv.ParseUint(d.Name(), 10, 32)
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + d.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if cpu, ok := procCPU(uint32(pid)); ok {
			out[uint32(pid)] = cpu
		}
	}
	return out
}

// procCPU returns the user plus system CPU time of process pid from
// /proc/<pid>/stat (in units of 1/100 s, USER_HZ); false where it cannot
// be read.
func procCPU(pid uint32) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
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
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	c.pids.Store(conn.PgConn().PID(), struct{}{})
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *counter) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	c.pids.Store(conn.PgConn().PID(), struct{}{})
	return ctx
}
func (c *counter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// openSQL opens a database/sql pool over pgx on dsn of at most conns
// connections, counting what it sends in c (when not nil), and pings it.
func openSQL(ctx context.Context, dsn string, conns int, c *counter) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("peers: dsn: %w", err)
	}
	if c != nil {
		cfg.Tracer = c
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("peers: %w: %w", errUnreachable, err)
	}
	return db, nil
}

// openPool opens a pgx pool on dsn of at most conns connections, counting
// what it sends in c (when not nil), and pings it.
func openPool(ctx context.Context, dsn string, conns int, c *counter) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("peers: dsn: %w", err)
	}
	cfg.MaxConns = int32(conns)
	if c != nil {
		cfg.ConnConfig.Tracer = c
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("peers: %w: %w", errUnreachable, err)
	}
	return pool, nil
}

// errUnreachable marks a server that did not answer.
var errUnreachable = errors.New("PostgreSQL unreachable")

// suffix returns a random suffix for the names of a round's tables and
// schemas, so that concurrent runs on one database do not meet.
func suffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cleanupContext returns a context for dropping what a phase created: not
// cancelled with ctx (an interrupt still cleans up), bounded to 30 s.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// tally counts how many times each row number 1..n was processed.
type tally struct{ seen []atomic.Int32 }

func newTally(n int) *tally { return &tally{seen: make([]atomic.Int32, n+1)} }

// mark records one processing of row i; false when i is out of range.
func (t *tally) mark(i int64) bool {
	if i < 1 || i >= int64(len(t.seen)) {
		return false
	}
	t.seen[i].Add(1)
	return true
}

// count returns the distinct rows processed, the extra deliveries and
// the rows never processed.
func (t *tally) count() (done, dup, lost int) {
	for i := 1; i < len(t.seen); i++ {
		switch n := int(t.seen[i].Load()); {
		case n == 0:
			lost++
		default:
			done++
			dup += n - 1
		}
	}
	return done, dup, lost
}

// timed measures the wall time, process CPU and load around one timed
// phase, and with a counter the CPU of the backends that served it.
type timed struct {
	start  time.Time
	cpu    time.Duration
	load1  float64
	c      *counter
	server map[uint32]time.Duration
}

func startTimer() timed {
	return timed{load1: loadAverage()[0], cpu: processCPU(), start: time.Now()}
}

// startServerTimer is startTimer that also measures the CPU of the
// PostgreSQL backends c sees during the phase.
func startServerTimer(c *counter) timed {
	t := timed{c: c, server: postgresCPU()}
	t.load1, t.cpu, t.start = loadAverage()[0], processCPU(), time.Now()
	return t
}

// stop fills r's wall time, CPU and load from the phase that t started.
func (t timed) stop(r *Result) {
	r.Wall = time.Since(t.start)
	r.CPU = processCPU() - t.cpu
	r.Load1Start, r.Load1End = t.load1, loadAverage()[0]
	if t.c != nil {
		r.ServerCPU = t.c.serverCPU(t.server)
	}
}

// openGorm opens a GORM handle (claimstore's settings) over a pool of at
// most conns connections on dsn, counting what it sends in c; close it
// with the returned function.
func openGorm(ctx context.Context, dsn string, conns int, c *counter) (*gorm.DB, func(), error) {
	sqlDB, err := openSQL(ctx, dsn, conns, c)
	if err != nil {
		return nil, nil, err
	}
	db, err := gorm.Open(gormpg.New(gormpg.Config{Conn: sqlDB}), sqlstore.Config())
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("peers: %w", err)
	}
	return db, func() { sqlDB.Close() }, nil
}

// dropTable drops the table name, also after ctx was cancelled, joining
// a failure into *err.
func dropTable(ctx context.Context, db *gorm.DB, name string, err *error) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if derr := db.WithContext(cctx).Migrator().DropTable(name); derr != nil {
		*err = errors.Join(*err, fmt.Errorf("peers: drop %s: %w", name, derr))
	}
}
