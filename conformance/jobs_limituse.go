package conformance

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobstest"
)

// limitUseArgs is the args of the LimitUse check's jobs: Part is the
// field they are partitioned by.
type limitUseArgs struct {
	Part int `json:"part"`
}

func (limitUseArgs) Kind() string { return "conformance_limit_use" }

// testJobLimitUse runs a client of 20 workers over a queue limited to 2
// running per partition (args field part) and 1 start an hour from a
// bucket of 10 tokens, with 5, 1 and 3 jobs in partitions 0, 1 and 2
// whose work blocks until the check releases it. Once 5 jobs run (2, 1
// and 2) and no more start within three ticks, Client.Limits of another
// client must give the client's Limit, 5 running, and partitions [0]
// and [2] with 2 running and 8 tokens, then [1] with 1 running and 9
// tokens. Once every job completed: 0 running, and the tokens of 5, 1
// and 3 starts spent ([0] 5, [2] 7, [1] 9).
func testJobLimitUse(t *testing.T, h JobsHarness) {
	st := h.NewStores(t)
	admin := newJobClient(t, st)
	const queue = "limit_use"
	lim := jobs.Limit{Max: 2, Rate: 1, Period: time.Hour, Burst: 10, ByArgs: []string{"part"}}
	gate := jobstest.NewGate(100)
	started := gate.Started()
	defer gate.Open()
	startJobs(t, st, func(cfg *jobs.Config, ws *jobs.Workers) {
		err := jobs.AddWorker(ws, jobs.WorkFunc[limitUseArgs](func(ctx context.Context, j *jobs.Job[limitUseArgs]) error {
			return gate.Wait(ctx, j.ID)
		}))
		if err != nil {
			t.Fatal(err)
		}
		l := lim
		cfg.Queues = map[string]jobs.QueueConfig{queue: {MaxWorkers: 20, Limit: &l}}
		cfg.Lease = limitLease
	})
	var params []jobs.InsertParams
	for part, n := range []int{5, 1, 3} {
		for range n {
			params = append(params, jobs.InsertParams{Args: limitUseArgs{Part: part}, Opts: &jobs.InsertOpts{Queue: queue}})
		}
	}
	res, err := admin.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("insert %d jobs: %v", len(params), err)
	}
	run := 0
	deadline := time.After(time.Minute)
	for run < 5 {
		select {
		case <-started:
			run++
		case <-deadline:
			t.Fatalf("%d jobs started in a minute, want 5", run)
		}
	}
	time.Sleep(3 * jobsTick)
	if n := len(started); n > 0 {
		t.Fatalf("%d more jobs started past the limit of 2 per partition", n)
	}

	type part struct {
		key     string
		running int
		tokens  float64
	}
	check := func(when string, running int, want []part) {
		t.Helper()
		got, err := admin.Limits(context.Background(), jobs.LimitParams{Queue: queue})
		if err != nil {
			t.Fatalf("%s: Limits: %v", when, err)
		}
		if len(got) != 1 {
			t.Fatalf("%s: Limits: %+v, want queue %s alone", when, got, queue)
		}
		info := got[0]
		t.Logf("%s: limit %+v, running %d, more %d", when, info.Limit, info.Running, info.More)
		for _, p := range info.Partitions {
			tok := math.NaN()
			if p.Tokens != nil {
				tok = *p.Tokens
			}
			t.Logf("%s:   partition %s: running %d, tokens %.3f", when, p.Key, p.Running, tok)
		}
		if info.Limit == nil || info.Limit.Max != lim.Max || info.Limit.Rate != lim.Rate || info.Limit.Period != lim.Period ||
			info.Limit.Burst != lim.Burst || len(info.Limit.ByArgs) != 1 || info.Limit.ByArgs[0] != "part" {
			t.Errorf("%s: recorded limit %+v, want %+v", when, info.Limit, lim)
		}
		if info.Running != running || info.More != 0 || len(info.Partitions) != len(want) {
			t.Fatalf("%s: running %d, %d partitions, more %d; want %d, %d, 0", when, info.Running, len(info.Partitions), info.More, running, len(want))
		}
		for i, w := range want {
			p := info.Partitions[i]
			// A token an hour: under 0.02 comes back within a minute.
			if p.Key != w.key || p.Running != w.running || p.Tokens == nil || math.Abs(*p.Tokens-w.tokens) > 0.02 {
				t.Errorf("%s: partition %d: %s, running %d, tokens %v; want %s, %d, %v", when, i, p.Key, p.Running, p.Tokens, w.key, w.running, w.tokens)
			}
		}
	}
	check("5 blocked", 5, []part{{"[0]", 2, 8}, {"[2]", 2, 8}, {"[1]", 1, 9}})

	gate.Open()
	for _, r := range res {
		waitJob(t, admin, r.Job.ID, time.Minute, "completed", inState(jobs.StateCompleted))
	}
	check("all completed", 0, []part{{"[0]", 0, 5}, {"[2]", 0, 7}, {"[1]", 0, 9}})
}
