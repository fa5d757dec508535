package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// GreetArgs is a typed job.
type GreetArgs struct {
	Name string `json:"name"`
}

// Kind names the job's kind.
func (GreetArgs) Kind() string { return "greet" }

// A job inserted, run by a client with one queue, failing its first
// attempt and completing on the retry, its first attempt's error kept.
// The memory store needs no database; a SQL store is opened with
// sqlstore.New[jobs.Row](db) and created with jobs.Migrate.
func Example() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	queues, _ := memstore.New[jobs.Queue]()
	if err := jobs.Migrate(ctx, store, queues); err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan struct{})
	workers := jobs.NewWorkers()
	err := jobs.AddWorker(workers, jobs.WorkFunc[GreetArgs](func(ctx context.Context, j *jobs.Job[GreetArgs]) error {
		if j.Attempt == 1 {
			return errors.New("not yet")
		}
		fmt.Printf("hello, %s (attempt %d)\n", j.Args.Name, j.Attempt)
		close(done)
		return nil
	}), jobs.WithBackoff(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := jobs.NewClient(jobs.Config{
		Store: store, QueueStore: queues, Workers: workers,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 10}},
		Tick:   20 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := client.Insert(ctx, GreetArgs{Name: "Ada"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- client.Run(runCtx) }()
	<-done
	stop() // drains: the completion is written before Run returns
	if err := <-ran; err != nil {
		fmt.Println(err)
		return
	}
	job, _ := client.Get(ctx, res.Job.ID)
	errs, _ := job.AttemptErrors()
	fmt.Println(job.State, job.Attempt, errs[0].Attempt, errs[0].Error)
	// Output:
	// hello, Ada (attempt 2)
	// completed 2 1 not yet
}
