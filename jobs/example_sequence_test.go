package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// StepArgs is a job of an account's sequence.
type StepArgs struct {
	Account int `json:"account"`
	Step    int `json:"step"`
}

// Kind names the job's kind.
func (StepArgs) Kind() string { return "step" }

// InsertOpts puts every job of an account in the account's sequence.
func (a StepArgs) InsertOpts() jobs.InsertOpts {
	return jobs.InsertOpts{Sequence: jobs.SequenceOpts{Key: fmt.Sprintf("account:%d", a.Account)}}
}

// ReportArgs is the callback of a batch of steps.
type ReportArgs struct{}

// Kind names the job's kind.
func (ReportArgs) Kind() string { return "report" }

// Three steps of one account run one at a time in insertion order, as a
// batch whose callback runs once they are all final and reads their
// counts.
func Example_sequenceBatch() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	var (
		mu    sync.Mutex
		steps []int
	)
	done := make(chan *jobs.BatchCounts, 1)
	workers := jobs.NewWorkers()
	_ = jobs.AddWorker(workers, jobs.WorkFunc[StepArgs](func(ctx context.Context, j *jobs.Job[StepArgs]) error {
		mu.Lock()
		steps = append(steps, j.Args.Step)
		mu.Unlock()
		return nil
	}))
	_ = jobs.AddWorker(workers, jobs.WorkFunc[ReportArgs](func(ctx context.Context, j *jobs.Job[ReportArgs]) error {
		done <- j.BatchCounts()
		return nil
	}))
	client, err := jobs.NewClient(jobs.Config{
		Store: store, Workers: workers,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 10}},
		Tick:   20 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var params []jobs.InsertParams
	for step := range 3 {
		params = append(params, jobs.InsertParams{Args: StepArgs{Account: 42, Step: step}})
	}
	res, err := client.InsertBatch(ctx, params, jobs.BatchOpts{Callback: ReportArgs{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("callback:", res.Callback.State)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	bc := <-done
	stop()
	<-ran
	fmt.Println("steps:", steps)
	fmt.Printf("batch of %d: %d completed, %d cancelled, %d discarded\n", bc.Total, bc.Completed, bc.Cancelled, bc.Discarded)
	// Output:
	// callback: pending
	// steps: [0 1 2]
	// batch of 3: 3 completed, 0 cancelled, 0 discarded
}
