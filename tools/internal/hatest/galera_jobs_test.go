//go:build linux

package hatest_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/dialects"
	"github.com/claimstore/claimstore/internal/testutil/testdb"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/tools/internal/hatest"
)

// galeraJobArgs are the args of the job-queue test's jobs.
type galeraJobArgs struct {
	Seq int `json:"seq"`
}

func (galeraJobArgs) Kind() string { return "ha_galera_job" }

// jobRunLog counts the runs of every job by id, and the runs under way.
type jobRunLog struct {
	mu      sync.Mutex
	runs    map[int64]int
	running map[int64]int
	overlap int // runs that began while another run of the same job ran
	// by lists, for every job, the nodes whose client ran it, in order,
	// and at when each run began.
	by map[int64][]int
	at map[int64][]time.Time
}

func newJobRunLog() *jobRunLog {
	return &jobRunLog{runs: map[int64]int{}, running: map[int64]int{}, by: map[int64][]int{}, at: map[int64][]time.Time{}}
}

func (l *jobRunLog) start(id int64, node int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[id]++
	l.by[id] = append(l.by[id], node)
	l.at[id] = append(l.at[id], time.Now())
	l.running[id]++
	if l.running[id] > 1 {
		l.overlap++
	}
}

func (l *jobRunLog) end(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[id]--
}

// warnLog keeps the client logs at Warn and above, which a run without
// faults should not have.
type warnLog struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	w.msgs = append(w.msgs, b.String())
	w.mu.Unlock()
	return nil
}
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnLog) WithGroup(string) slog.Handler      { return w }

// jobCycleResult is what one job-queue run measured.
type jobCycleResult struct {
	jobs, runners             int
	took                      time.Duration
	duplicated, lost, notDone int
	overlap                   int
	conflictRetries           int64
	perClient                 []jobs.Stats
	certFails, bfAborts       int64
	deadlocks                 int64
	warnings                  []string
}

func (r jobCycleResult) String() string {
	return fmt.Sprintf("%d jobs, clients running on %d node(s): %v (%.0f jobs/s); run twice %d, never %d, not completed %d, overlapping runs %d; conflict retries %d (jobs.Stats); nodes: certification failures %d, brute-force aborts %d, deadlocks %d; warnings logged %d",
		r.jobs, r.runners, r.took.Round(time.Millisecond), float64(r.jobs)/r.took.Seconds(), r.duplicated, r.lost, r.notDone, r.overlap,
		r.conflictRetries, r.certFails, r.bfAborts, r.deadlocks, len(r.warnings))
}

// TestGaleraJobQueue runs the job cycle of package jobs on the Galera
// cluster: a jobs.Client on each node (its own pool, its own stores over
// one job table), 2,000 jobs inserted through the three nodes, run first
// by the client on g1 alone, then, on a fresh table, by the clients of all
// three nodes at once. Every job must run exactly once and end completed:
// none run twice or never, none left running. The throughput of one node
// and of three and the conflicts the clients retried are logged (a
// figure, never asserted), with the nodes' certification failures,
// brute-force aborts and deadlocks, which bound the conflicts retried:
// each was a deadlock error (1213) returned to a client.
func TestGaleraJobQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	dbs := openGaleraNodes(ctx, t, c, 16)
	for i, db := range dbs {
		if v, err := dialects.DetectVariant(ctx, db); err != nil || v != dialects.Galera {
			t.Fatalf("DetectVariant on %s = %q, %v; want galera", hatest.GaleraNodes[i], v, err)
		}
	}
	const n = 2000
	var results []jobCycleResult
	for _, runners := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d-node", runners), func(t *testing.T) {
			r := galeraJobCycle(ctx, t, dbs, runners, n)
			t.Logf("%s", r)
			for i, st := range r.perClient {
				t.Logf("client on %s: %+v", hatest.GaleraNodes[i], st)
			}
			if r.duplicated > 0 || r.lost > 0 || r.notDone > 0 || r.overlap > 0 {
				t.Errorf("%d jobs run twice, %d never, %d not completed, %d runs overlapping another of the same job", r.duplicated, r.lost, r.notDone, r.overlap)
			}
			if most := r.certFails + r.bfAborts + r.deadlocks; r.conflictRetries > most {
				t.Errorf("the clients retried %d conflicts, more than the nodes' certification failures, brute-force aborts and deadlocks (%d)", r.conflictRetries, most)
			}
			for i, w := range r.warnings {
				if i == 5 {
					break
				}
				t.Logf("logged: %s", w)
			}
			results = append(results, r)
		})
	}
	if len(results) == 2 {
		one, three := results[0], results[1]
		t.Logf("job cycle: one node %.0f jobs/s, three nodes %.0f jobs/s (%.2f×)",
			float64(one.jobs)/one.took.Seconds(), float64(three.jobs)/three.took.Seconds(), one.took.Seconds()/three.took.Seconds())
	}
}

// galeraJobCycle creates a fresh job table through g1, inserts n jobs
// through the three nodes' clients (a third through each, in batches of
// 100), runs the clients of the first runners nodes until every job is
// completed (read on the last node with wsrep_sync_wait), stops them and
// checks every job: run once, completed at its first attempt.
func galeraJobCycle(ctx context.Context, t *testing.T, dbs []*gorm.DB, runners, n int) jobCycleResult {
	t.Helper()
	q := newGaleraJobQueue(ctx, t, dbs, n, 15*time.Second, 0)
	table, clients, log, warns := q.table, q.clients, q.log, q.warns

	before := certStats(t, dbs)
	began := time.Now()
	var err error
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runErrs := make(chan error, runners)
	for _, cl := range clients[:runners] {
		go func() { runErrs <- cl.Run(rctx) }()
	}
	left := int64(-1)
	for left != 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		if left, err = syncedCount(ctx, dbs[len(dbs)-1], "SELECT COUNT(*) FROM "+table+" WHERE state <> 'completed'"); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	stop()
	for range runners {
		if err := <-runErrs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	after := certStats(t, dbs)

	r := jobCycleResult{jobs: n, runners: runners, took: took,
		certFails: after[0] - before[0], bfAborts: after[1] - before[1], deadlocks: after[2] - before[2]}
	for _, cl := range clients[:runners] {
		st := cl.Stats()
		r.perClient = append(r.perClient, st)
		r.conflictRetries += st.ConflictRetries
	}
	warns.mu.Lock()
	r.warnings = warns.msgs
	warns.mu.Unlock()
	var stored int64
	if stored, err = syncedCount(ctx, dbs[len(dbs)-1], "SELECT COUNT(*) FROM "+table); err != nil {
		t.Fatal(err)
	}
	if stored != int64(n) {
		t.Errorf("%d jobs stored, want %d", stored, n)
	}
	notDone, err := syncedCount(ctx, dbs[len(dbs)-1], "SELECT COUNT(*) FROM "+table+" WHERE state <> 'completed' OR finalized_at IS NULL OR attempt <> 1")
	if err != nil {
		t.Fatal(err)
	}
	r.notDone = int(notDone)
	var ids []int64
	if err := dbs[len(dbs)-1].Raw("SELECT id FROM " + table).Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, id := range ids {
		switch log.runs[id] {
		case 0:
			r.lost++
		case 1:
		default:
			r.duplicated++
		}
	}
	r.overlap = log.overlap
	if len(log.runs) != len(ids) {
		t.Errorf("%d job ids ran, %d stored", len(log.runs), len(ids))
	}
	return r
}

// galeraJobQueue is a job table and its queue table, created through g1,
// with a jobs.Client on each node over them, and n jobs inserted.
type galeraJobQueue struct {
	table   string
	clients []*jobs.Client
	log     *jobRunLog
	warns   *warnLog
}

// newGaleraJobQueue creates the tables through dbs[0] (dropped at
// cleanup), builds a client on each node (12 workers, ticks of 100 ms,
// the given lease) whose work records its run in the log and then sleeps
// for work, and inserts n jobs through the three clients in turn, 100 at
// a time.
func newGaleraJobQueue(ctx context.Context, t *testing.T, dbs []*gorm.DB, n int, lease, work time.Duration) *galeraJobQueue {
	t.Helper()
	table := testdb.Table(t, dbs[0], "ha_jobs")
	qtable := testdb.Table(t, dbs[0], "ha_job_queues")
	js, err := sqlstore.New[jobs.Row](dbs[0], sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	qs, err := sqlstore.New[jobs.Queue](dbs[0], sqlstore.WithTable(qtable))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jobs.Drop(context.Background(), js, qs) })
	if err := jobs.Migrate(ctx, js, qs); err != nil {
		t.Fatal(err)
	}
	log := newJobRunLog()
	warns := &warnLog{}
	clients := make([]*jobs.Client, len(dbs))
	for i, db := range dbs {
		ws := jobs.NewWorkers()
		if err := jobs.AddWorker(ws, jobs.WorkFunc[galeraJobArgs](func(ctx context.Context, j *jobs.Job[galeraJobArgs]) error {
			log.start(j.ID, i)
			defer log.end(j.ID)
			if work > 0 {
				time.Sleep(work)
			}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		s, err := sqlstore.New[jobs.Row](db, sqlstore.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		if st := s.Capabilities().Strategy; st != dao.StrategyFastPath {
			t.Fatalf("job store on %s claims with %v, want the fast path", hatest.GaleraNodes[i], st)
		}
		q, err := sqlstore.New[jobs.Queue](db, sqlstore.WithTable(qtable))
		if err != nil {
			t.Fatal(err)
		}
		clients[i], err = jobs.NewClient(jobs.Config{
			Store: s, QueueStore: q, Workers: ws,
			WorkerID:     "ha-" + hatest.GaleraNodes[i],
			Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 12}},
			PollInterval: 100 * time.Millisecond, Lease: lease,
			Logger: slog.New(warns),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	seq := 0
	for i := range n / 100 {
		p := make([]jobs.InsertParams, 100)
		for k := range p {
			seq++
			p[k] = jobs.InsertParams{Args: galeraJobArgs{Seq: seq}}
		}
		if _, err := clients[i%len(clients)].InsertMany(ctx, p); err != nil {
			t.Fatalf("insert through %s: %v", hatest.GaleraNodes[i%len(clients)], err)
		}
	}
	return &galeraJobQueue{table: table, clients: clients, log: log, warns: warns}
}

// galeraSuspectTimeout returns evs.suspect_timeout as the node of db
// runs with (scripts/galera-cluster.sh sets it, GALERA_SUSPECT_TIMEOUT):
// how long the others wait for a silent node before they drop it (Galera
// Cluster docs, "Galera Parameters").
func galeraSuspectTimeout(ctx context.Context, t *testing.T, db *gorm.DB) time.Duration {
	t.Helper()
	return galeraEVSPeriod(ctx, t, db, "evs.suspect_timeout")
}

// galeraEVSPeriod returns the provider option name of the node of db,
// read from wsrep_provider_options: an ISO 8601 period of seconds or
// minutes (PT2S, PT1.5S, PT1M).
func galeraEVSPeriod(ctx context.Context, t *testing.T, db *gorm.DB, name string) time.Duration {
	t.Helper()
	var v struct {
		VariableName string
		Value        string
	}
	if err := db.WithContext(ctx).Raw("SHOW GLOBAL VARIABLES LIKE 'wsrep_provider_options'").Scan(&v).Error; err != nil {
		t.Fatal(err)
	}
	for opt := range strings.SplitSeq(v.Value, ";") {
		n, val, ok := strings.Cut(opt, "=")
		if !ok || strings.TrimSpace(n) != name {
			continue
		}
		val = strings.TrimSpace(val)
		if p, ok := strings.CutPrefix(val, "PT"); ok && len(p) > 1 {
			unit := map[byte]time.Duration{'S': time.Second, 'M': time.Minute}[p[len(p)-1]]
			if f, err := strconv.ParseFloat(p[:len(p)-1], 64); err == nil && unit > 0 {
				return time.Duration(f * float64(unit))
			}
		}
		t.Fatalf("%s = %q: not a period of seconds or minutes", name, val)
	}
	t.Fatalf("no %s in wsrep_provider_options %q", name, v.Value)
	return 0
}

// TestGaleraNodeKilledMidJobQueue kills g3 with SIGKILL while a
// jobs.Client on each node runs a queue of 3,000 jobs (12 workers per
// client, each job 100 ms of work, leases of 10 s). The jobs g3's client
// had claimed are run again by the clients of g1 and g2 once their
// leases end (the rescuer), with their lost attempt recorded. Every job
// must end completed; none may be run twice by the surviving clients or
// overlap another run of itself there; a job run twice must have been
// run first on g3. After the kill, the clients on g1 and g2 must go on
// starting jobs not run before with no pause longer than the cluster's
// suspect timeout plus 2 s (the longest is printed: the cluster holds
// its commits until it drops the dead node, after evs.suspect_timeout,
// PT2S as the cluster script sets it, Galera's default PT5S, then
// reconfigures), and g3 rejoins (IST).
func TestGaleraNodeKilledMidJobQueue(t *testing.T) {
	galeraJobQueueFault(t, "killed", func(ctx context.Context, c *hatest.GaleraCluster, _, _ time.Duration) (time.Duration, error) {
		return 0, c.KillNode(ctx, "g3")
	}, func(ctx context.Context, t *testing.T, c *hatest.GaleraCluster, query string, want int64) {
		rejoinAndCount(ctx, t, c, "g3", query, want)
	})
}

// TestGaleraNodeFrozenMidJobQueue is TestGaleraNodeKilledMidJobQueue with
// g3 frozen (SIGSTOP: a hung server) for the suspect timeout plus the
// inactive timeout (evs.inactive_timeout) instead of killed, then thawed (SIGCONT): the others drop it after the
// suspect timeout and go on; g3's client, whose statements hang and then
// fail, has its claimed jobs run again by the others once their leases
// end. The same checks hold, and g3 must rejoin on its own (IST) and read
// every job completed.
func TestGaleraNodeFrozenMidJobQueue(t *testing.T) {
	galeraJobQueueFault(t, "frozen", func(ctx context.Context, c *hatest.GaleraCluster, suspect, inactive time.Duration) (time.Duration, error) {
		if err := c.FreezeNode(ctx, "g3"); err != nil {
			return 0, err
		}
		// Thawed well after the cluster declared it inactive and dropped
		// it: a thaw as the inactive timeout ends meets the view change
		// half-way, and the survivors then held their commits for 13 s,
		// past the jobs' leases.
		frozen := suspect + inactive
		go func() {
			time.Sleep(frozen)
			if err := c.ThawNode(context.Background(), "g3"); err != nil {
				t.Errorf("thaw g3: %v", err)
			}
		}()
		return frozen, nil
	}, func(ctx context.Context, t *testing.T, c *hatest.GaleraCluster, query string, want int64) {
		start := time.Now()
		for ctx.Err() == nil {
			if st, err := c.Status(ctx); err == nil && strings.Contains(st, "g3 pid") && !strings.Contains(st, "cluster_size 2") && strings.Count(st, "state Synced") == 3 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		db, err := sqlstore.Open(ctx, "mariadb", c.DSN("g3"))
		if err != nil {
			t.Fatal(err)
		}
		testdb.CloseAtCleanup(t, db)
		got, err := syncedCount(ctx, db, query)
		if err != nil || got != want {
			t.Errorf("%s read on g3 after it rejoined: %d (%v), want %d", query, got, err, want)
		}
		t.Logf("g3 Synced in a cluster of 3 again %v after the jobs completed and reads %d (%s)", time.Since(start).Round(time.Millisecond), got, query)
	})
}

// galeraJobQueueFault runs a jobs.Client on each node over a queue of
// 3,000 jobs, strikes g3 with fault 2 s in, waits until every job is
// completed, checks the runs and calls after with the count query of
// completed jobs and its expected value.
func galeraJobQueueFault(t *testing.T, what string, fault func(ctx context.Context, c *hatest.GaleraCluster, suspect, inactive time.Duration) (back time.Duration, err error),
	after func(ctx context.Context, t *testing.T, c *hatest.GaleraCluster, query string, want int64)) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := galeraCluster(ctx, t)
	dbs := openGaleraNodes(ctx, t, c, 16)
	suspect := galeraSuspectTimeout(ctx, t, dbs[0])
	const n, lease, work = 3000, 10 * time.Second, 100 * time.Millisecond
	q := newGaleraJobQueue(ctx, t, dbs, n, lease, work)

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	runErrs := make([]chan error, len(q.clients))
	for i, cl := range q.clients {
		runErrs[i] = make(chan error, 1)
		go func() { runErrs[i] <- cl.Run(rctx) }()
	}
	left := func() int64 {
		n, err := syncedCount(ctx, dbs[0], "SELECT COUNT(*) FROM "+q.table+" WHERE state <> 'completed'")
		if err != nil {
			return -1
		}
		return n
	}
	time.Sleep(2 * time.Second)
	back, err := fault(ctx, c, suspect, galeraEVSPeriod(ctx, t, dbs[0], "evs.inactive_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	struck := time.Now()
	t.Logf("g3 %s with %d jobs not completed", what, left())
	for ctx.Err() == nil && left() != 0 {
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(struck)
	stop()
	for i, ch := range runErrs {
		select {
		case err := <-ch:
			if err != nil && i != 2 {
				t.Errorf("Run on %s: %v", hatest.GaleraNodes[i], err)
			}
		case <-time.After(time.Minute):
			if i != 2 {
				t.Errorf("the client on %s did not stop within a minute", hatest.GaleraNodes[i])
			}
		}
	}

	// The longest wait, after the fault, between the first runs of jobs
	// on g1 or g2: the runs again of g3's jobs, which wait for their
	// leases, are left out.
	var starts []time.Time
	q.log.mu.Lock()
	for id, by := range q.log.by {
		if by[0] != 2 && q.log.at[id][0].After(struck) {
			starts = append(starts, q.log.at[id][0])
		}
	}
	q.log.mu.Unlock()
	slices.SortFunc(starts, time.Time.Compare)
	// The pause the fault causes is bounded; a node that comes back
	// during the run (back > 0: thawed) then catches up through flow
	// control, which may pause the others again: that later wait is
	// printed, not bounded.
	var longest, afterBack time.Duration
	prev := struck
	for _, at := range starts {
		if back > 0 && prev.After(struck.Add(back)) {
			afterBack = max(afterBack, at.Sub(prev))
		} else {
			longest = max(longest, at.Sub(prev))
		}
		prev = at
	}
	if back > 0 {
		t.Logf("longest wait between job starts on g1 or g2 once g3 came back (%v after the fault): %v", back, afterBack.Round(time.Millisecond))
	}

	var ids []int64
	if err := dbs[0].Raw("SELECT id FROM " + q.table).Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	notDone := left()
	attempt2, err := syncedCount(ctx, dbs[0], "SELECT COUNT(*) FROM "+q.table+" WHERE state = 'completed' AND attempt > 1")
	if err != nil {
		t.Fatal(err)
	}
	var lost, again, twiceBySurvivors, rerunNotFromG3 int
	q.log.mu.Lock()
	for _, id := range ids {
		by := q.log.by[id]
		if len(by) == 0 {
			lost++
			continue
		}
		survivors := 0
		for _, node := range by {
			if node != 2 {
				survivors++
			}
		}
		if survivors > 1 {
			twiceBySurvivors++
		}
		if len(by) > 1 {
			again++
			if by[0] != 2 {
				rerunNotFromG3++
			}
		}
	}
	overlap := q.log.overlap
	q.log.mu.Unlock()
	t.Logf("%d jobs, a client on each node, g3 %s after 2 s: all completed %v after the fault; not completed %d, never run %d, run twice by the g1 and g2 clients %d, run again after a first run on g3 %d (completed at attempt > 1: %d), run again after a first run elsewhere %d, overlapping runs %d; longest wait between job starts on g1 or g2 after the fault %v (evs.suspect_timeout %v)",
		len(ids), what, took.Round(time.Millisecond), notDone, lost, twiceBySurvivors, again, attempt2, rerunNotFromG3, overlap, longest.Round(time.Millisecond), suspect)
	if len(ids) != n || notDone != 0 || lost != 0 || twiceBySurvivors != 0 || rerunNotFromG3 != 0 || overlap != 0 {
		t.Errorf("%d jobs stored (want %d), %d not completed, %d never run, %d run twice by the surviving clients, %d run again after a first run not on g3, %d overlapping runs",
			len(ids), n, notDone, lost, twiceBySurvivors, rerunNotFromG3, overlap)
	}
	if longest > suspect+2*time.Second {
		t.Errorf("the clients on g1 and g2 started no job for %v after the fault, want at most %v (the suspect timeout) plus 2 s for the reconfiguration on a loaded machine",
			longest.Round(time.Millisecond), suspect)
	}
	after(ctx, t, c, "SELECT COUNT(*) FROM "+q.table+" WHERE state = 'completed'", n)
}
