package conformance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// limitArgs is the args of the limit checks' jobs: Part is the field
// they are partitioned by.
type limitArgs struct {
	N    int `json:"n"`
	Part int `json:"part"`
	// Block makes the first attempt's work wait until its context ends.
	Block bool `json:"block,omitempty"`
}

func (limitArgs) Kind() string { return "conformance_limit" }

// limitProbe records the runs of limit jobs across the clients of one
// check: how many run at once in each partition and in all, the most
// seen, each job's runs and start times.
type limitProbe struct {
	work time.Duration

	mu      sync.Mutex
	now     map[int]int // partition -> running now
	maxPart map[int]int // partition -> most running at once
	total   int
	maxAll  int
	runs    map[int64]int
	starts  []time.Time
	started chan int64
}

func newLimitProbe(work time.Duration) *limitProbe {
	return &limitProbe{work: work, now: map[int]int{}, maxPart: map[int]int{}, runs: map[int64]int{}, started: make(chan int64, 10000)}
}

// worker returns the work function of limitArgs recording into p.
func (p *limitProbe) worker() jobs.Worker[limitArgs] {
	return jobs.WorkFunc[limitArgs](func(ctx context.Context, j *jobs.Job[limitArgs]) error {
		p.mu.Lock()
		p.now[j.Args.Part]++
		p.total++
		p.maxPart[j.Args.Part] = max(p.maxPart[j.Args.Part], p.now[j.Args.Part])
		p.maxAll = max(p.maxAll, p.total)
		p.runs[j.ID]++
		p.starts = append(p.starts, time.Now())
		p.mu.Unlock()
		p.started <- j.ID
		block := j.Args.Block && j.Attempt == 1
		if block {
			<-ctx.Done()
		} else {
			time.Sleep(p.work)
		}
		p.mu.Lock()
		p.now[j.Args.Part]--
		p.total--
		p.mu.Unlock()
		if block {
			return ctx.Err()
		}
		return nil
	})
}

// startLimited starts a client over st running the default queue with
// limit lim and maxWorkers workers, its work recorded by p, stopped at
// t's cleanup.
func startLimited(t *testing.T, st JobStores, p *limitProbe, lim jobs.Limit, maxWorkers int, lease time.Duration) *jobClient {
	t.Helper()
	return startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		if err := jobs.AddWorker(ws, p.worker()); err != nil {
			t.Fatal(err)
		}
		cfg.Queues = map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: maxWorkers, Limit: &lim}}
		cfg.Lease = lease
	})
}

// limitLease is the lease of the limit checks' clients (but the crash
// check's): long enough that no lease ends under a loaded SQLite whose
// writers wait seconds for its lock (with -race on 2 cores), which
// would run a job again as the at-least-once delivery does.
const limitLease = 30 * time.Second

// insertLimited inserts n limit jobs, job i in partition i%parts, and
// returns their ids.
func insertLimited(t *testing.T, c *jobs.Client, n, parts int) []int64 {
	t.Helper()
	params := make([]jobs.InsertParams, n)
	for i := range params {
		params[i] = jobs.InsertParams{Args: limitArgs{N: i, Part: i % parts}}
	}
	res, err := c.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("insert %d limit jobs: %v", n, err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids
}

// waitLimited waits up to timeout until every job of ids ran, then
// checks each ran exactly once and is completed; it prints and returns
// the counts.
func waitLimited(t *testing.T, admin *jobs.Client, p *limitProbe, ids []int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		ran := len(p.runs)
		p.mu.Unlock()
		if ran >= len(ids) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var lost, dup []int64
	p.mu.Lock()
	for _, id := range ids {
		switch n := p.runs[id]; {
		case n == 0:
			lost = append(lost, id)
		case n > 1:
			dup = append(dup, id)
		}
	}
	p.mu.Unlock()
	for _, id := range ids {
		if len(lost) > 0 {
			break
		}
		waitJob(t, admin, id, 30*time.Second, "completed", inState(jobs.StateCompleted))
	}
	t.Logf("jobs %d: ran %d, lost %d, duplicated %d; most running at once: %d in all, by partition %v",
		len(ids), len(ids)-len(lost), len(lost), len(dup), p.maxAll, p.maxPart)
	if len(lost) > 0 || len(dup) > 0 {
		t.Fatalf("lost %v, duplicated %v; want every job run exactly once", lost, dup)
	}
}

// testJobGlobalLimit runs 90 jobs of 30 ms on 3 clients of 20 workers
// each over a queue limited to 3 running at once: never more than 3 run
// at once across the clients (sampled by the work), every job runs
// exactly once, and the limit is used (2 or more ran at once).
func testJobGlobalLimit(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	admin := newJobClient(t, st)
	p := newLimitProbe(30 * time.Millisecond)
	const limit = 3
	for range 3 {
		startLimited(t, st, p, jobs.Limit{Max: limit}, 20, limitLease)
	}
	ids := insertLimited(t, admin, 90, 1)
	waitLimited(t, admin, p, ids, 2*time.Minute)
	if p.maxAll > limit {
		t.Errorf("%d jobs ran at once across the clients, limit %d", p.maxAll, limit)
	}
	if p.maxAll < 2 {
		t.Errorf("at most %d job ran at once; the limit of %d was never used", p.maxAll, limit)
	}
}

// testJobPartitionLimit runs 120 jobs of 30 ms in 6 partitions (an args
// field) on 3 clients of 20 workers each, limit 2 per partition: never
// more than 2 of a partition run at once, several partitions run
// together (more than 2 in all at some time), every job runs exactly
// once.
func testJobPartitionLimit(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	admin := newJobClient(t, st)
	p := newLimitProbe(30 * time.Millisecond)
	const limit, parts = 2, 6
	for range 3 {
		startLimited(t, st, p, jobs.Limit{Max: limit, ByKind: true, ByArgs: []string{"part"}}, 20, limitLease)
	}
	ids := insertLimited(t, admin, 120, parts)
	waitLimited(t, admin, p, ids, 2*time.Minute)
	for part, m := range p.maxPart {
		if m > limit {
			t.Errorf("partition %d: %d jobs ran at once, limit %d", part, m, limit)
		}
	}
	if len(p.maxPart) != parts || p.maxAll <= limit {
		t.Errorf("partitions seen %d (want %d), most running in all %d: want partitions to run together (> %d)", len(p.maxPart), parts, p.maxAll, limit)
	}
}

// killableStore is a job store whose writes fail once killed, as a
// process that died would write nothing: no renewal, no outcome, no
// release. Its claims go on (a killed client is also stopped).
type killableStore struct {
	fullJobStore
	killed *atomic.Bool
}

var errKilled = fmt.Errorf("conformance: client killed: %w", dao.ErrUnavailable)

func (s killableStore) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if s.killed.Load() {
		return 0, errKilled
	}
	return s.fullJobStore.Update(ctx, where, set)
}

func (s killableStore) UpdateKeys(ctx context.Context, where dao.Criteria, set dao.Set) ([]any, error) {
	if s.killed.Load() {
		return nil, errKilled
	}
	return s.fullJobStore.UpdateKeys(ctx, where, set)
}

func (s killableStore) UpdateEach(ctx context.Context, match []string, where dao.Criteria, common dao.Set, rows []dao.RowSet) ([]any, error) {
	if s.killed.Load() {
		return nil, errKilled
	}
	return s.fullJobStore.UpdateEach(ctx, match, where, common, rows)
}

// killableBasic is killableStore over a store without the optional
// interfaces (the memory store's wrapper: its outcomes are then written
// by Update).
type killableBasic struct {
	dao.Store[jobs.Row]
	killed *atomic.Bool
}

func (s killableBasic) Update(ctx context.Context, where dao.Criteria, set dao.Set) (int64, error) {
	if s.killed.Load() {
		return 0, errKilled
	}
	return s.Store.Update(ctx, where, set)
}

// killable returns st with its job store's writes failing once the
// returned flag is set.
func killable(st JobStores) (JobStores, *atomic.Bool) {
	var killed atomic.Bool
	if full, ok := st.Jobs.(fullJobStore); ok {
		st.Jobs = killableStore{fullJobStore: full, killed: &killed}
	} else {
		st.Jobs = killableBasic{Store: st.Jobs, killed: &killed}
	}
	return st, &killed
}

// testJobLimitCrash: a client holding every slot of a limited queue
// dies (its writes fail, then it stops: its leases are left behind). A
// second client starts no job of the queue before those leases end, and
// then runs the dead client's jobs and the others, each once.
func testJobLimitCrash(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	admin := newJobClient(t, st)
	ctx := context.Background()
	const limit = 2
	lim := jobs.Limit{Max: limit}
	const lease = 3 * time.Second
	dead := newLimitProbe(0)
	kst, killed := killable(st)
	a := startLimited(t, kst, dead, lim, 10, lease)
	var held []int64
	for i := range limit {
		held = append(held, insert(t, admin, limitArgs{N: i, Block: true}, nil).ID)
	}
	for range limit {
		select {
		case <-dead.started:
		case <-time.After(30 * time.Second):
			t.Fatal("the first client did not start its jobs within 30 s")
		}
	}
	killed.Store(true)
	// It stops claiming at once; its drain goes on in the background,
	// its writes failing, until the check's cleanup.
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_ = a.StopAndCancel(sctx)
	cancel()
	var leaseEnd time.Time
	for _, id := range held {
		r, err := st.Jobs.Get(ctx, id)
		if err != nil || r.LeaseOwner == "" || r.LeaseUntil == nil {
			t.Fatalf("job %d of the dead client: %+v, %v; want its lease left behind", id, r, err)
		}
		if r.LeaseUntil.After(leaseEnd) {
			leaseEnd = *r.LeaseUntil
		}
	}
	// The database's clock may differ a little from this host's.
	const skew = 250 * time.Millisecond
	more := insertLimited(t, admin, 4, 1)
	p := newLimitProbe(10 * time.Millisecond)
	startLimited(t, st, p, lim, 10, lease)
	var first time.Time
	select {
	case <-p.started:
		first = time.Now()
	case <-time.After(lease + 30*time.Second):
		t.Fatal("no job started within 30 s after the dead client's leases end")
	}
	early := leaseEnd.Sub(first)
	t.Logf("dead client's leases end at %v; first job on the next client started %v before that", leaseEnd.Format(time.StampMilli), early)
	if early > skew {
		t.Errorf("a job started %v before the dead client's leases ended: its slots came back early", early)
	}
	waitLimited(t, admin, p, append(more, held...), 2*time.Minute)
	if p.maxAll > limit {
		t.Errorf("%d jobs ran at once, limit %d", p.maxAll, limit)
	}
}

// testJobRateLimit runs jobs on 3 clients over a queue limited to 20
// started per second (burst 4): over the window from the first second
// after the first start to the last start, the starts stay within the
// token bucket's bound (rate × window + burst, and a second burst of
// slack for the delay from claim to start)
// and above a quarter of the rate; every job runs once.
func testJobRateLimit(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	admin := newJobClient(t, st)
	p := newLimitProbe(time.Millisecond)
	const rate, burst, n = 20, 4, 100
	for range 3 {
		startLimited(t, st, p, jobs.Limit{Rate: rate, Burst: burst}, 20, limitLease)
	}
	ids := insertLimited(t, admin, n, 1)
	waitLimited(t, admin, p, ids, 2*time.Minute)
	p.mu.Lock()
	starts := append([]time.Time(nil), p.starts...)
	p.mu.Unlock()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	from := starts[0].Add(time.Second)
	var in int
	for _, s := range starts {
		if !s.Before(from) {
			in++
		}
	}
	window := starts[len(starts)-1].Sub(from).Seconds()
	// A job is recorded when its work starts, a little after its claim:
	// jobs claimed just before the window may start in it, so the bound
	// allows a second bucket's worth.
	most := rate*window + 2*burst + 2
	t.Logf("starts after the first second: %d over %.2f s = %.1f/s (limit %d/s, burst %d); whole run %.2f s",
		in, window, float64(in)/window, rate, burst, starts[len(starts)-1].Sub(starts[0]).Seconds())
	if float64(in) > most {
		t.Errorf("%d jobs started over %.2f s, more than rate × window + 2 × burst = %.1f", in, window, most)
	}
	// The lower bound only shows jobs keep starting near the rate: a
	// loaded SQLite under -race claims slower than 20 a second.
	if window < 1 || float64(in) < rate*window/4 {
		t.Errorf("%d jobs started over %.2f s: below a quarter of the rate of %d/s", in, window, rate)
	}
}

// testJobLimitInvalid: a Limit that limits nothing or has negative
// settings is refused with dao.ErrInvalidArgument.
func testJobLimitInvalid(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	for _, lim := range []jobs.Limit{{}, {Max: -1}, {Rate: -1}, {Max: 1, Burst: 2}, {Max: 1, ByArgs: []string{"a", "a"}}, {Max: 1, ByArgs: []string{""}}} {
		ws := jobs.NewWorkers()
		if err := jobs.AddWorker(ws, newLimitProbe(0).worker()); err != nil {
			t.Fatal(err)
		}
		_, err := jobs.NewClient(jobs.Config{Store: st.Jobs, Workers: ws, Queues: map[string]jobs.QueueConfig{"q": {Limit: &lim}}})
		if !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("limit %+v: %v, want dao.ErrInvalidArgument", lim, err)
		}
	}
}
