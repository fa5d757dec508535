package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
)

// seqArgs is the args of a job of the Sequence and Batch checks: it
// records its attempts' start and end under Key, fails its first Fail
// attempts, and with Mode "cancel" ends cancelled, with "gate" waits
// for the check's gate before it ends.
type seqArgs struct {
	Key  string `json:"key"`
	N    int    `json:"n"`
	Fail int    `json:"fail,omitempty"`
	Mode string `json:"mode,omitempty"`
}

func (seqArgs) Kind() string { return "conformance_seq" }

// batchDoneArgs is the args of a batch's callback.
type batchDoneArgs struct {
	Round int `json:"round"`
}

func (batchDoneArgs) Kind() string { return "conformance_batch_done" }

// seqLog records the runs of seqArgs and batchDoneArgs jobs.
type seqLog struct {
	mu       sync.Mutex
	active   map[string]int     // key -> attempts running now
	overlaps map[string]int     // key -> attempts that started while another ran
	starts   map[string][]int   // key -> N of each attempt started, in start order
	done     map[string][]int   // key -> N of each success, in order
	ok       map[int64]int      // job id -> successful attempts
	started  atomic.Int64       // attempts started
	gate     chan struct{}      // closed to let "gate" jobs end
	callback map[int64][]string // callback job id -> the BatchCounts each run saw
}

func newSeqLog() *seqLog {
	return &seqLog{
		active: map[string]int{}, overlaps: map[string]int{}, starts: map[string][]int{}, done: map[string][]int{},
		ok: map[int64]int{}, gate: make(chan struct{}), callback: map[int64][]string{},
	}
}

// addSeqWorkers registers the seqArgs and batchDoneArgs workers of l in
// ws, with a retry backoff of 100 ms.
func addSeqWorkers(t *testing.T, ws *jobs.Workers, l *seqLog) {
	t.Helper()
	backoff := jobs.WithBackoff(func(int) time.Duration { return 100 * time.Millisecond })
	err := jobs.AddWorker(ws, jobs.WorkFunc[seqArgs](func(ctx context.Context, j *jobs.Job[seqArgs]) error {
		a := j.Args
		l.mu.Lock()
		if l.active[a.Key] > 0 {
			l.overlaps[a.Key]++
		}
		l.active[a.Key]++
		l.starts[a.Key] = append(l.starts[a.Key], a.N)
		l.mu.Unlock()
		l.started.Add(1)
		switch a.Mode {
		case "gate":
			select {
			case <-l.gate:
			case <-ctx.Done():
			}
		default:
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.active[a.Key]--
		switch {
		case a.Mode == "cancel":
			return jobs.Cancel(errors.New("seq job asks to be cancelled"))
		case j.Attempt <= a.Fail:
			return fmt.Errorf("seq job %s/%d attempt %d fails", a.Key, a.N, j.Attempt)
		}
		l.done[a.Key] = append(l.done[a.Key], a.N)
		l.ok[j.ID]++
		return nil
	}), backoff)
	if err != nil {
		t.Fatal(err)
	}
	err = jobs.AddWorker(ws, jobs.WorkFunc[batchDoneArgs](func(ctx context.Context, j *jobs.Job[batchDoneArgs]) error {
		bc := j.BatchCounts()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.callback[j.ID] = append(l.callback[j.ID], fmt.Sprintf("%+v", bc))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
}

// startSeqClients starts n clients over st, each running the default
// queue with workers workers and the seqArgs workers of l.
func startSeqClients(t *testing.T, st JobStores, n, workers int, l *seqLog) []*jobClient {
	t.Helper()
	out := make([]*jobClient, n)
	for i := range out {
		out[i] = startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
			cfg.Queues = map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: workers}}
			// A lease long enough that the outcome writes of a loaded
			// database (SQLite under the race detector) land within it:
			// a lapsed lease runs a job again, which the checks count.
			cfg.Lease = 30 * time.Second
			addSeqWorkers(t, ws, l)
		})
	}
	return out
}

// whileRetryable runs insert again while it fails with an error a retry
// can cure (dao.IsRetryable: SQLite's busy database under the load of
// three clients, a deadlock), for up to a minute, and returns its last
// error.
func whileRetryable(insert func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := insert()
		if err == nil || !dao.IsRetryable(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testJobSequence checks sequences: 3 clients of 4 workers run 10 keys ×
// 12 jobs, one job in four failing its first attempt: per key the jobs
// start in insertion order (a failed job's retry before the next job),
// never two at once, each completed once; a discarded or cancelled job
// holds its sequence unless its options say to continue, and a held
// sequence goes on once the job is retried and completes.
func testJobSequence(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	l := newSeqLog()
	cs := startSeqClients(t, st, 3, 4, l)
	c := cs[0]
	ctx := context.Background()
	const keys, perKey = 10, 12
	var params []jobs.InsertParams
	for n := range perKey {
		for k := range keys {
			key := fmt.Sprintf("k%02d", k)
			fail := 0
			if (n+k)%4 == 0 {
				fail = 1
			}
			params = append(params, jobs.InsertParams{Args: seqArgs{Key: key, N: n, Fail: fail}, Opts: &jobs.InsertOpts{Sequence: jobs.SequenceOpts{Key: key}}})
		}
	}
	// Half in one InsertMany, the rest one by one, through several
	// clients.
	half := len(params) / 2
	if err := whileRetryable(func() error { _, err := c.InsertMany(ctx, params[:half]); return err }); err != nil {
		t.Fatalf("insert many: %v", err)
	}
	for i, p := range params[half:] {
		if err := whileRetryable(func() error { _, err := cs[i%len(cs)].Insert(ctx, p.Args, p.Opts); return err }); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	waitCount(t, st, dao.Eq(jobs.ColState, string(jobs.StateCompleted)), keys*perKey, 90*time.Second)

	l.mu.Lock()
	var dup, lost, overlaps, disorder int
	for id, n := range l.ok {
		if n > 1 {
			// Delivery is at least once: a success whose outcome write
			// the database refused (SQLite busy past its timeout, logged
			// "outcomes not written") runs again once its lease ends,
			// right after itself. Counted, not failed; overlaps and
			// order are checked below.
			dup += n - 1
			t.Logf("job %d ran to success %d times (an outcome write refused?)", id, n)
		}
	}
	lost = keys*perKey - len(l.ok)
	for k := range keys {
		key := fmt.Sprintf("k%02d", k)
		overlaps += l.overlaps[key]
		for i, n := range slices.Compact(slices.Clone(l.done[key])) {
			if n != i {
				disorder++
				t.Errorf("sequence %s: completions in order %v, want 0..%d", key, l.done[key], perKey-1)
				break
			}
		}
		for i := 1; i < len(l.starts[key]); i++ {
			if l.starts[key][i] < l.starts[key][i-1] {
				disorder++
				t.Errorf("sequence %s: attempts started in order %v", key, l.starts[key])
				break
			}
		}
	}
	l.mu.Unlock()
	t.Logf("sequences: %d keys × %d jobs over %d clients: completed %d, duplicated %d, lost %d, overlapping starts %d, out of order %d",
		keys, perKey, len(cs), keys*perKey-lost, dup, lost, overlaps, disorder)
	if overlaps > 0 || lost != 0 {
		t.Errorf("overlapping starts %d, lost %d: want 0", overlaps, lost)
	}

	t.Run("Discard", func(t *testing.T) {
		type step struct {
			key          string
			opts         jobs.SequenceOpts
			args         seqArgs
			final        jobs.State
			continues    bool
			maxAttempts1 bool
		}
		for _, s := range []step{
			{key: "discard-stop", args: seqArgs{Fail: 1}, final: jobs.StateDiscarded, maxAttempts1: true},
			{key: "discard-go", opts: jobs.SequenceOpts{ContinueOnDiscarded: true}, args: seqArgs{Fail: 1}, final: jobs.StateDiscarded, continues: true, maxAttempts1: true},
			{key: "cancel-stop", opts: jobs.SequenceOpts{ContinueOnDiscarded: true}, args: seqArgs{Mode: "cancel"}, final: jobs.StateCancelled},
			{key: "cancel-go", opts: jobs.SequenceOpts{ContinueOnCancelled: true}, args: seqArgs{Mode: "cancel"}, final: jobs.StateCancelled, continues: true},
		} {
			t.Run(s.key, func(t *testing.T) {
				s.opts.Key, s.args.Key = s.key, s.key
				first := &jobs.InsertOpts{Sequence: s.opts}
				if s.maxAttempts1 {
					first.MaxAttempts = 1
				}
				// Inserted together, so that the second is pending
				// whatever the first's speed.
				var res []jobs.InsertResult
				err := whileRetryable(func() (err error) {
					res, err = c.InsertMany(ctx, []jobs.InsertParams{
						{Args: s.args, Opts: first},
						{Args: seqArgs{Key: s.key, N: 1}, Opts: &jobs.InsertOpts{Sequence: jobs.SequenceOpts{Key: s.key}}},
					})
					return err
				})
				if err != nil {
					t.Fatalf("insert: %v", err)
				}
				a, b := res[0].Job, res[1].Job
				if b.State != jobs.StatePending {
					t.Fatalf("second job of sequence %s inserted %s, want pending", s.key, b.State)
				}
				waitJob(t, c.Client, a.ID, 30*time.Second, string(s.final), inState(s.final))
				if s.continues {
					waitJob(t, c.Client, b.ID, 30*time.Second, "completed", inState(jobs.StateCompleted))
					return
				}
				// Held: many ticks of every client's maintenance later,
				// the next job still waits.
				time.Sleep(20 * jobsTick)
				if got := waitJob(t, c.Client, b.ID, time.Second, "read", func(*jobs.Row) bool { return true }); got.State != jobs.StatePending {
					t.Fatalf("job after a %s job of a stopping sequence is %s, want pending", s.final, got.State)
				}
				checkHeldSequence(t, c.Client, s.key, a.ID, b.ID, s.final)
				if s.final == jobs.StateCancelled {
					// A cancelled job that retries cancels again: delete it.
					if _, err := c.Delete(ctx, a.ID); err != nil {
						t.Fatalf("delete: %v", err)
					}
				} else if _, err := c.Retry(ctx, a.ID); err != nil {
					t.Fatalf("retry: %v", err)
				}
				waitJob(t, c.Client, b.ID, 30*time.Second, "completed once the held sequence goes on", inState(jobs.StateCompleted))
				if s.final == jobs.StateDiscarded {
					waitJob(t, c.Client, a.ID, time.Second, "completed by its retry", inState(jobs.StateCompleted))
				}
			})
		}
	})
}

// testJobBatch checks batches: in each of 3 rounds a batch of 30 jobs (20
// completing, 5 discarded, 5 cancelled) runs on 3 clients of 10 workers,
// all 30 at once, held until all have started and then let go together,
// so that the clients finish the batch's last jobs at the same moment:
// the callback is pending until then, runs exactly once, and sees the
// counts by final state.
func testJobBatch(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	ctx := context.Background()
	for round := range 3 {
		l := newSeqLog()
		cs := startSeqClients(t, st, 3, 10, l)
		const size = 30
		params := make([]jobs.InsertParams, size)
		for i := range params {
			a := seqArgs{Key: fmt.Sprintf("b%d-%d", round, i), N: 0, Mode: "gate"}
			opts := &jobs.InsertOpts{}
			switch {
			case i%6 == 1:
				a.Fail, opts.MaxAttempts = 1, 1
			case i%6 == 4:
				a.Mode = "cancel"
			}
			params[i] = jobs.InsertParams{Args: a, Opts: opts}
		}
		var res *jobs.BatchResult
		err := whileRetryable(func() (err error) {
			res, err = cs[round%3].InsertBatch(ctx, params, jobs.BatchOpts{Callback: batchDoneArgs{Round: round}})
			return err
		})
		if err != nil {
			t.Fatalf("insert batch: %v", err)
		}
		if res.Callback.State != jobs.StatePending || res.Callback.BatchCallback == nil || *res.Callback.BatchCallback != res.ID {
			t.Fatalf("callback inserted %s for batch %v, want pending for %s", res.Callback.State, res.Callback.BatchCallback, res.ID)
		}
		for _, j := range res.Jobs {
			if j.Job.BatchID == nil || *j.Job.BatchID != res.ID {
				t.Fatalf("job %d of batch %s has batch %v", j.Job.ID, res.ID, j.Job.BatchID)
			}
		}
		// The gated jobs wait until all have started (the cancelled ones
		// end at once, freeing their workers for the rest).
		deadline := time.Now().Add(60 * time.Second)
		for l.started.Load() < size {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d jobs started", round, l.started.Load(), size)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if cb, err := cs[0].Get(ctx, res.Callback.ID); err != nil || cb.State != jobs.StatePending {
			t.Fatalf("callback before the batch's end: %v, %v; want pending", cb, err)
		}
		checkBatchInfo(t, cs[0].Client, res, size, nil)
		close(l.gate)
		cb := waitJob(t, cs[0].Client, res.Callback.ID, 60*time.Second, "completed", inState(jobs.StateCompleted))
		time.Sleep(10 * jobsTick) // room for a second run, should one come
		l.mu.Lock()
		runs := l.callback[cb.ID]
		var ok int
		for _, j := range res.Jobs {
			ok += l.ok[j.Job.ID]
		}
		l.mu.Unlock()
		want := jobs.BatchCounts{ID: res.ID, Total: size, Done: true, Completed: 20, Cancelled: 5, Discarded: 5}
		t.Logf("batch round %d: callback runs %d, counts %v, completed jobs run %d", round, len(runs), runs, ok)
		if len(runs) != 1 || runs[0] != fmt.Sprintf("%+v", &want) {
			t.Fatalf("callback ran %d times with %v, want once with %+v", len(runs), runs, &want)
		}
		if got := cb.BatchCounts(); got == nil || *got != want {
			t.Fatalf("callback's stored counts %+v, want %+v", got, want)
		}
		if ok != 20 {
			t.Fatalf("completed jobs ran %d times in all, want 20", ok)
		}
		checkBatchInfo(t, cs[0].Client, res, size, map[jobs.State]int64{jobs.StateCompleted: 20, jobs.StateCancelled: 5, jobs.StateDiscarded: 5})
		for _, c := range cs {
			c.stop()
		}
	}
}

// checkHeldSequence checks what Client.Sequences and a listing by
// sequence key report of sequence key, held by job head, ended final
// without releasing it, with job next waiting behind it.
func checkHeldSequence(t *testing.T, c *jobs.Client, key string, head, next int64, final jobs.State) {
	t.Helper()
	ctx := context.Background()
	seqs, err := c.Sequences(ctx, jobs.SequenceParams{Key: key})
	if err != nil {
		t.Fatalf("sequences %s: %v", key, err)
	}
	if len(seqs) != 1 || seqs[0].Key != key || seqs[0].Head == nil || seqs[0].Head.ID != head || seqs[0].Head.State != final || seqs[0].Waiting != 1 {
		t.Fatalf("sequences %s: %+v; want one, head job %d %s, 1 waiting", key, seqs, head, final)
	}
	all, err := c.Sequences(ctx, jobs.SequenceParams{Limit: jobs.MaxListLimit})
	if err != nil {
		t.Fatalf("sequences: %v", err)
	}
	if !slices.ContainsFunc(all, func(s jobs.SequenceInfo) bool { return s.Key == key && s.Head != nil && s.Head.ID == head }) {
		t.Fatalf("sequences: %+v; want %s held by job %d among them", all, key, head)
	}
	rows, err := c.List(ctx, jobs.ListParams{SequenceKey: key, Ascending: true})
	if err != nil {
		t.Fatalf("list sequence %s: %v", key, err)
	}
	if len(rows) != 2 || rows[0].ID != head || rows[1].ID != next || rows[1].State != jobs.StatePending {
		t.Fatalf("list sequence %s: %d jobs %v; want jobs %d and %d (pending)", key, len(rows), rows, head, next)
	}
	if _, err := c.Sequences(ctx, jobs.SequenceParams{Limit: -1}); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("sequences with limit -1: %v, want dao.ErrInvalidArgument", err)
	}
}

// checkBatchInfo checks what Client.Batch and a listing by batch id
// report of batch res, of size jobs: the counts of its final jobs when
// final is set, else none final but cancelled ones (its jobs run or
// were cancelled; counted one state after another, a job cancelled
// meanwhile may be counted twice), and its callback pending until then.
func checkBatchInfo(t *testing.T, c *jobs.Client, res *jobs.BatchResult, size int, final map[jobs.State]int64) {
	t.Helper()
	ctx := context.Background()
	info, err := c.Batch(ctx, res.ID)
	if err != nil {
		t.Fatalf("batch %s: %v", res.ID, err)
	}
	if info.ID != res.ID || info.Total != size || info.Callback == nil || info.Callback.ID != res.Callback.ID {
		t.Fatalf("batch %s: %+v; want %d jobs and callback %d", res.ID, info, size, res.Callback.ID)
	}
	if final == nil {
		if info.Counts[jobs.StateCompleted]+info.Counts[jobs.StateDiscarded] != 0 || info.Callback.State != jobs.StatePending {
			t.Fatalf("batch %s while its jobs run: counts %v, callback %s; want none completed or discarded, callback pending", res.ID, info.Counts, info.Callback.State)
		}
	} else if !maps.Equal(info.Counts, final) {
		t.Fatalf("batch %s ended: counts %v, want %v", res.ID, info.Counts, final)
	}
	rows, err := c.List(ctx, jobs.ListParams{BatchID: res.ID, Limit: jobs.MaxListLimit})
	if err != nil {
		t.Fatalf("list batch %s: %v", res.ID, err)
	}
	if len(rows) != size+1 {
		t.Fatalf("list batch %s: %d jobs, want its %d and the callback", res.ID, len(rows), size)
	}
	if _, err := c.Batch(ctx, "no-such-batch"); !errors.Is(err, dao.ErrNotFound) {
		t.Fatalf("batch no-such-batch: %v, want dao.ErrNotFound", err)
	}
	if _, err := c.Batch(ctx, ""); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Fatalf("batch \"\": %v, want dao.ErrInvalidArgument", err)
	}
}

// testJobWaitsInvalid checks that bad sequence and batch input is
// refused with dao.ErrInvalidArgument and inserts nothing.
func testJobWaitsInvalid(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	l := newSeqLog()
	ws := jobs.NewWorkers()
	addSeqWorkers(t, ws, l)
	c := newJobClientWith(t, st, func(cfg *jobs.Config) { cfg.Workers = ws })
	ctx := context.Background()
	ok := jobs.InsertParams{Args: seqArgs{Key: "x"}}
	seq := func(o jobs.SequenceOpts) []jobs.InsertParams {
		return []jobs.InsertParams{ok, {Args: seqArgs{Key: "x"}, Opts: &jobs.InsertOpts{Sequence: o}}}
	}
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"sequence key too long", func() error {
			_, err := c.InsertMany(ctx, seq(jobs.SequenceOpts{Key: strings.Repeat("k", jobs.MaxSequenceKeyLen+1)}))
			return err
		}},
		{"sequence key with NUL", func() error { _, err := c.InsertMany(ctx, seq(jobs.SequenceOpts{Key: "a\x00b"})); return err }},
		{"sequence key not UTF-8", func() error { _, err := c.InsertMany(ctx, seq(jobs.SequenceOpts{Key: "a\xffb"})); return err }},
		{"continue without key", func() error {
			_, err := c.InsertMany(ctx, seq(jobs.SequenceOpts{ContinueOnDiscarded: true}))
			return err
		}},
		{"batch of no jobs", func() error {
			_, err := c.InsertBatch(ctx, nil, jobs.BatchOpts{Callback: batchDoneArgs{}})
			return err
		}},
		{"batch without callback", func() error { _, err := c.InsertBatch(ctx, []jobs.InsertParams{ok}, jobs.BatchOpts{}); return err }},
		{"unique job in a batch", func() error {
			_, err := c.InsertBatch(ctx, []jobs.InsertParams{ok, {Args: seqArgs{}, Opts: &jobs.InsertOpts{UniqueOpts: jobs.UniqueOpts{ByArgs: true}}}},
				jobs.BatchOpts{Callback: batchDoneArgs{}})
			return err
		}},
		{"callback in a sequence", func() error {
			_, err := c.InsertBatch(ctx, []jobs.InsertParams{ok}, jobs.BatchOpts{Callback: batchDoneArgs{},
				CallbackOpts: &jobs.InsertOpts{Sequence: jobs.SequenceOpts{Key: "x"}}})
			return err
		}},
		{"bad job in a batch", func() error {
			_, err := c.InsertBatch(ctx, []jobs.InsertParams{ok, {Args: seqArgs{}, Opts: &jobs.InsertOpts{Priority: 99}}}, jobs.BatchOpts{Callback: batchDoneArgs{}})
			return err
		}},
	} {
		if err := tc.run(); !errors.Is(err, dao.ErrInvalidArgument) {
			t.Errorf("%s: %v, want dao.ErrInvalidArgument", tc.name, err)
		}
	}
	n, err := st.Jobs.Count(ctx, dao.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d jobs inserted by refused calls, want 0", n)
	}
}
