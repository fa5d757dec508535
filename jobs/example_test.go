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
		Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {MaxWorkers: 10}},
		PollInterval: 20 * time.Millisecond,
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
	ran := make(chan error, 1)
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

// A subscription to a client's completions and failures: each event
// comes once the job's outcome is written, with the job as written and
// its durations.
func ExampleClient_Subscribe() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	workers := jobs.NewWorkers()
	_ = jobs.AddWorker(workers, jobs.WorkFunc[GreetArgs](func(ctx context.Context, j *jobs.Job[GreetArgs]) error {
		if j.Attempt == 1 {
			return errors.New("not yet")
		}
		return nil
	}), jobs.WithBackoff(func(int) time.Duration { return 10 * time.Millisecond }))
	client, err := jobs.NewClient(jobs.Config{
		Store: store, Workers: workers, PollInterval: 20 * time.Millisecond,
		Queues: map[string]jobs.QueueConfig{jobs.DefaultQueue: {}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	events, unsubscribe, err := client.Subscribe(jobs.EventJobCompleted, jobs.EventJobFailed)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer unsubscribe()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	if _, err := client.Insert(ctx, GreetArgs{Name: "Ada"}, nil); err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		ev := <-events
		fmt.Println(ev.Kind, ev.Job.State, ev.Job.Attempt, ev.Stats.Run >= 0)
	}
	stop()
	<-ran
	// Output:
	// job_failed retryable 1 true
	// job_completed completed 2 true
}

// Work middleware that logs every job's outcome, and an error handler
// that cancels a job whose work reports a permanent failure instead of
// retrying it.
func ExampleWorkMiddleware() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	errPermanent := errors.New("address does not exist")
	workers := jobs.NewWorkers()
	_ = jobs.AddWorker(workers, jobs.WorkFunc[GreetArgs](func(ctx context.Context, j *jobs.Job[GreetArgs]) error {
		return errPermanent
	}))
	logOutcome := jobs.WorkMiddlewareFunc(func(ctx context.Context, job *jobs.Row, next func(context.Context) error) error {
		err := next(ctx)
		fmt.Printf("job of kind %s, attempt %d: %v\n", job.Kind, job.Attempt, err)
		return err
	})
	client, err := jobs.NewClient(jobs.Config{
		Store: store, Workers: workers, PollInterval: 20 * time.Millisecond,
		Queues:       map[string]jobs.QueueConfig{jobs.DefaultQueue: {}},
		Middleware:   []jobs.Middleware{logOutcome},
		ErrorHandler: permanentErrors{errPermanent},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	events, unsubscribe, _ := client.Subscribe(jobs.EventJobCancelled)
	defer unsubscribe()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	if _, err := client.Insert(ctx, GreetArgs{Name: "nobody"}, nil); err != nil {
		fmt.Println(err)
		return
	}
	ev := <-events
	fmt.Println(ev.Job.State)
	stop()
	<-ran
	// Output:
	// job of kind greet, attempt 1: address does not exist
	// cancelled
}

// permanentErrors is an ErrorHandler that cancels the jobs failing with
// one of its errors.
type permanentErrors []error

func (p permanentErrors) HandleError(_ context.Context, _ *jobs.Row, err error) *jobs.ErrorHandlerResult {
	for _, perm := range p {
		if errors.Is(err, perm) {
			return &jobs.ErrorHandlerResult{SetCancelled: true}
		}
	}
	return nil
}

func (permanentErrors) HandlePanic(context.Context, *jobs.Row, any, string) *jobs.ErrorHandlerResult {
	return nil
}

// A queue added to a running client starts at once; removed, it drains
// and its later jobs wait for another client.
func ExampleClient_AddQueue() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	workers := jobs.NewWorkers()
	_ = jobs.AddWorker(workers, jobs.WorkFunc[GreetArgs](func(ctx context.Context, j *jobs.Job[GreetArgs]) error {
		return nil
	}))
	client, err := jobs.NewClient(jobs.Config{Store: store, Workers: workers, PollInterval: 20 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	completed, unsubscribe, _ := client.Subscribe(jobs.EventJobCompleted)
	defer unsubscribe()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()

	if err := client.AddQueue("mail", jobs.QueueConfig{MaxWorkers: 10}); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = client.Insert(ctx, GreetArgs{Name: "Ada"}, &jobs.InsertOpts{Queue: "mail"})
	ev := <-completed
	fmt.Println(ev.Job.Queue, ev.Job.State)
	fmt.Println(client.RemoveQueue(ctx, "mail"))
	fmt.Println(client.AddQueue("mail", jobs.QueueConfig{MaxWorkers: -1}) != nil)
	stop()
	fmt.Println(<-ran)
	// Output:
	// mail completed
	// <nil>
	// true
	// <nil>
}
