package ui_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobstest"
	"github.com/claimstore/claimstore/ui"
)

// limitUIArgs is the args of the limits test's jobs, whose work blocks
// until the test releases it.
type limitUIArgs struct {
	Part int `json:"part"`
}

func (limitUIArgs) Kind() string { return "ui_limit" }

// TestQueuesLimits: on each backend, a client runs queue limited, at
// most 1 running per partition (args field part) and 1 start an hour
// from a bucket of 5, its work blocked, over jobs of parts 0, 0 and 1:
// api/queues gives the queue's recorded limit, 2 running, partitions [0]
// and [1] with 1 running and 4 tokens each, and the queue's row its
// limit; the queues page shows the queue's use and the partitions'
// rows.
func TestQueuesLimits(t *testing.T) {
	forEachJobs(t, func(t *testing.T, e *jobEnv) {
		ctx := context.Background()
		gate := jobstest.NewGate(10)
		started := gate.Started()
		ws := jobs.NewWorkers()
		if err := jobs.AddWorker(ws, jobs.WorkFunc[limitUIArgs](func(ctx context.Context, j *jobs.Job[limitUIArgs]) error {
			return gate.Wait(ctx, j.ID)
		})); err != nil {
			t.Fatal(err)
		}
		c, err := jobs.NewClient(jobs.Config{Store: e.store, QueueStore: e.queues, Workers: ws, PollInterval: 50 * time.Millisecond, Lease: 30 * time.Second,
			Queues: map[string]jobs.QueueConfig{"limited": {MaxWorkers: 5, Limit: &jobs.Limit{Max: 1, Rate: 1, Period: time.Hour, Burst: 5, ByArgs: []string{"part"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(runCtx) }()
		defer func() {
			gate.Open()
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		for _, part := range []int{0, 0, 1} {
			if _, err := c.Insert(ctx, limitUIArgs{Part: part}, &jobs.InsertOpts{Queue: "limited"}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("2 jobs did not start within a minute")
			}
		}

		srv := e.serve(t, ui.Config{})
		type part struct {
			Key     string
			Running int
			Tokens  *float64
		}
		type limit struct {
			Queue      string
			Known      bool
			Max, Rate  int
			Period     string
			Burst      int
			ByArgs     []string
			RecordedAt *time.Time
			Running    int
			Partitions []part
			More       int
		}
		var qs struct {
			Tables []struct {
				Queues []struct {
					Name  string
					Limit *limit
				}
				Limits      []limit
				LimitsError string
				Error       string
			}
		}
		if code := getJSON(t, srv.URL+"/api/queues", &qs); code != http.StatusOK || len(qs.Tables) != 1 {
			t.Fatalf("api/queues: %d, %+v", code, qs)
		}
		tb := qs.Tables[0]
		t.Logf("api/queues: limits %+v, error %q", tb.Limits, tb.LimitsError)
		if tb.Error != "" || tb.LimitsError != "" || len(tb.Limits) != 1 {
			t.Fatalf("api/queues: %+v", tb)
		}
		l := tb.Limits[0]
		if l.Queue != "limited" || !l.Known || l.Max != 1 || l.Rate != 1 || l.Period != "1h0m0s" || l.Burst != 5 || len(l.ByArgs) != 1 || l.ByArgs[0] != "part" ||
			l.RecordedAt == nil || l.Running != 2 || l.More != 0 || len(l.Partitions) != 2 {
			t.Fatalf("api/queues: limit %+v", l)
		}
		for i, key := range []string{"[0]", "[1]"} {
			p := l.Partitions[i]
			if p.Key != key || p.Running != 1 || p.Tokens == nil || math.Abs(*p.Tokens-4) > 0.01 {
				t.Errorf("api/queues: partition %d: %+v, want %s, 1 running, 4 tokens", i, p, key)
			}
		}
		var row bool
		for _, q := range tb.Queues {
			if q.Name == "limited" {
				row = q.Limit != nil && q.Limit.Running == 2
			} else if q.Limit != nil {
				t.Errorf("api/queues: queue %s has a limit: %+v", q.Name, q.Limit)
			}
		}
		if !row {
			t.Errorf("api/queues: queue limited's row lacks its limit: %+v", tb.Queues)
		}
		_, _, page := get(t, client(t), srv.URL+"/queues")
		for _, want := range []string{
			`<span data-running="2" data-max="1">2 running, at most 1 per partition</span>, 1 per 1h0m0s, burst 5`,
			`<tr data-queue="limited" data-partition="[0]">`,
			`<tr data-queue="limited" data-partition="[1]">`,
			`<td class="num" data-tokens="4.0">4.0</td>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("queues page lacks %s", want)
			}
		}
		if t.Failed() {
			t.Logf("queues page:\n%s", page)
		}
	})
}
