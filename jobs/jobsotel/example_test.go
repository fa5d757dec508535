package jobsotel_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobsotel"
)

// A client traced and measured by the middleware: the insert is a
// producer span, the job's work a consumer span whose parent it is. A
// program gives its own tracer and meter providers (or sets OpenTelemetry's
// global ones); here a span recorder shows the spans.
func ExampleNewMiddleware() {
	ctx := context.Background()
	store, _ := memstore.New[jobs.Row]()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	mw, err := jobsotel.NewMiddleware(jobsotel.Config{TracerProvider: tp})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan struct{})
	workers := jobs.NewWorkers()
	_ = jobs.AddWorker(workers, jobs.WorkFunc[mailArgs](func(ctx context.Context, j *jobs.Job[mailArgs]) error {
		defer close(done)
		return nil
	}))
	client, err := jobs.NewClient(jobs.Config{
		Store: store, Workers: workers, PollInterval: 20 * time.Millisecond,
		Queues:     map[string]jobs.QueueConfig{jobs.DefaultQueue: {}},
		Middleware: []jobs.Middleware{mw},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := client.Insert(ctx, mailArgs{To: "ada@example.com"}, nil); err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	<-done
	stop()
	<-ran
	spans := recorder.Ended()
	send, process := spans[0], spans[1]
	fmt.Println(send.Name(), send.SpanKind())
	fmt.Println(process.Name(), process.SpanKind(), process.Parent().SpanID() == send.SpanContext().SpanID())
	// Output:
	// send default producer
	// process default consumer true
}
