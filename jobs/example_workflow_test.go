package jobs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
)

// PriceArgs is a task of an order's workflow: it prices Item, or with
// Item "total" sums the prices of the dependencies Of names.
type PriceArgs struct {
	Item string   `json:"item"`
	Of   []string `json:"of,omitempty"`
}

// Kind names the job's kind.
func (PriceArgs) Kind() string { return "price" }

// A diamond of tasks: "fetch" runs first, "tax" (which reads its
// output) and "shipping" after it, "total" once all three completed.
func Example_workflow() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	total := make(chan int, 1)
	workers := jobs.NewWorkers()
	_ = jobs.AddWorker(workers, jobs.WorkFunc[PriceArgs](func(ctx context.Context, j *jobs.Job[PriceArgs]) error {
		price := 0
		switch j.Args.Item {
		case "fetch":
			price = 100
		case "tax":
			var base int
			if err := j.DependencyOutput("fetch", &base); err != nil {
				return err
			}
			price = base / 10
		case "shipping":
			price = 5
		case "total":
			for _, dep := range j.Args.Of {
				var p int
				if err := j.DependencyOutput(dep, &p); err != nil {
					return err
				}
				price += p
			}
			total <- price
		}
		return jobs.RecordOutput(ctx, price)
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
	res, err := client.InsertWorkflow(ctx, jobs.Workflow{Tasks: []jobs.WorkflowTask{
		{Name: "fetch", Args: PriceArgs{Item: "fetch"}},
		{Name: "tax", Args: PriceArgs{Item: "tax"}, Deps: []string{"fetch"}},
		{Name: "shipping", Args: PriceArgs{Item: "shipping"}, Deps: []string{"fetch"}},
		{Name: "total", Args: PriceArgs{Item: "total", Of: []string{"fetch", "tax", "shipping"}}, Deps: []string{"fetch", "tax", "shipping"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, t := range res.Tasks {
		fmt.Printf("inserted %s: %s\n", []string{"fetch", "tax", "shipping", "total"}[i], t.Job.State)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	fmt.Println("total:", <-total)
	stop()
	<-ran
	info, err := client.Workflow(ctx, res.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range info.Tasks {
		fmt.Printf("%s after %v: %s, output %s\n", t.Name, t.Deps, t.State, t.Job.Output())
	}
	// Output:
	// inserted fetch: available
	// inserted tax: pending
	// inserted shipping: pending
	// inserted total: pending
	// total: 115
	// fetch after []: completed, output 100
	// tax after [fetch]: completed, output 10
	// shipping after [fetch]: completed, output 5
	// total after [fetch tax shipping]: completed, output 115
}
