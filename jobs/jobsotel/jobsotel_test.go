package jobsotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/claimstore/claimstore/adapters/sqlstore"
	"github.com/claimstore/claimstore/dao"
	"github.com/claimstore/claimstore/jobs"
	"github.com/claimstore/claimstore/jobs/jobsotel"

	_ "github.com/claimstore/claimstore/adapters/sqlite"
)

// mailArgs is the job of the tests; Fail fails its first Fail attempts,
// Panic panics.
type mailArgs struct {
	To    string `json:"to"`
	Fail  int    `json:"fail,omitempty"`
	Panic bool   `json:"panic,omitempty"`
}

func (mailArgs) Kind() string { return "mail" }

// stores opens the job and queue tables of a fresh SQLite file, which
// two clients (two "processes") can share.
func stores(t *testing.T) (dao.Store[jobs.Row], dao.Store[jobs.Queue]) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, "sqlite", filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	js, err := sqlstore.New[jobs.Row](db)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := sqlstore.New[jobs.Queue](db)
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, js, qs); err != nil {
		t.Fatal(err)
	}
	return js, qs
}

// client starts a client over js and qs with mw, running the mail
// worker when run is true; done counts the jobs whose work ended.
func client(t *testing.T, js dao.Store[jobs.Row], qs dao.Store[jobs.Queue], mw *jobsotel.Middleware, run bool, done *atomic.Int64) *jobs.Client {
	t.Helper()
	ws := jobs.NewWorkers()
	err := jobs.AddWorker(ws, jobs.WorkFunc[mailArgs](func(ctx context.Context, j *jobs.Job[mailArgs]) error {
		defer done.Add(1)
		if j.Args.Panic {
			panic("mail server on fire")
		}
		if j.Attempt <= j.Args.Fail {
			return errors.New("mail server busy")
		}
		return nil
	}), jobs.WithBackoff(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobs.Config{Store: js, QueueStore: qs, Workers: ws, PollInterval: 20 * time.Millisecond, Middleware: []jobs.Middleware{mw}}
	if run {
		cfg.Queues = map[string]jobs.QueueConfig{jobs.DefaultQueue: {}}
	}
	c, err := jobs.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	return c
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attrs returns the attributes of kvs by key.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestTraceRunsFromInsertToWork inserts a job in a request's span
// through one client and works it in another with its own tracer
// provider, as another process would: the work span is a child of the
// insert span, in the request's trace, with the job's attributes.
func TestTraceRunsFromInsertToWork(t *testing.T) {
	js, qs := stores(t)
	prop := propagation.TraceContext{}
	insRec, workRec := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	insTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(insRec))
	workTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(workRec))
	insMW, err := jobsotel.NewMiddleware(jobsotel.Config{TracerProvider: insTP, MeterProvider: sdkmetric.NewMeterProvider(), Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	workMW, err := jobsotel.NewMiddleware(jobsotel.Config{TracerProvider: workTP, MeterProvider: sdkmetric.NewMeterProvider(), Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	inserter := client(t, js, qs, insMW, false, &done)
	ctx, request := insTP.Tracer("app").Start(context.Background(), "POST /signup")
	res, err := inserter.Insert(ctx, mailArgs{To: "ada@example.com"}, nil)
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]map[string]string
	if err := json.Unmarshal([]byte(res.Job.Metadata), &md); err != nil || md[jobsotel.MetadataKey]["traceparent"] == "" {
		t.Fatalf("inserted job's metadata %q (%v): want the trace context under %q", res.Job.Metadata, err, jobsotel.MetadataKey)
	}
	client(t, js, qs, workMW, true, &done)
	waitFor(t, "worked", func() bool { return len(workRec.Ended()) == 1 })

	ins := insRec.Ended()
	if len(ins) != 2 { // the request and the insert
		t.Fatalf("inserting process ended %d spans, want 2", len(ins))
	}
	var send sdktrace.ReadOnlySpan
	for _, s := range ins {
		if s.Name() == "send default" {
			send = s
		}
	}
	if send == nil || send.SpanKind() != trace.SpanKindProducer || send.Parent().SpanID() != request.SpanContext().SpanID() {
		t.Fatalf("insert span %v: want a producer span named \"send default\", child of the request", send)
	}
	a := attrs(send.Attributes())
	if a["messaging.system"].AsString() != jobsotel.System || a["messaging.operation.type"].AsString() != "send" ||
		a["messaging.destination.name"].AsString() != jobs.DefaultQueue || a["messaging.message.id"].AsString() != strconv.FormatInt(res.Job.ID, 10) {
		t.Errorf("insert span attributes %v", a)
	}
	work := workRec.Ended()[0]
	if work.Name() != "process default" || work.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("work span %q of kind %v", work.Name(), work.SpanKind())
	}
	if work.Parent().SpanID() != send.SpanContext().SpanID() || work.SpanContext().TraceID() != request.SpanContext().TraceID() {
		t.Errorf("work span's parent %v in trace %v; want the insert span %v in the request's trace %v",
			work.Parent().SpanID(), work.SpanContext().TraceID(), send.SpanContext().SpanID(), request.SpanContext().TraceID())
	}
	a = attrs(work.Attributes())
	if a["messaging.message.id"].AsString() != strconv.FormatInt(res.Job.ID, 10) || a[jobsotel.AttrKind].AsString() != "mail" ||
		a[jobsotel.AttrAttempt].AsInt64() != 1 || a[jobsotel.AttrOutcome].AsString() != jobsotel.OutcomeCompleted {
		t.Errorf("work span attributes %v", a)
	}
	if work.Status().Code == codes.Error {
		t.Errorf("work span of a completed job has status %v", work.Status())
	}
}

// TestMetricsCountEachOutcome runs a job that completes, one that fails
// once, and one that panics, and reads the metrics: jobs inserted, jobs
// worked by outcome, work durations and queue waits, and the gauge of
// jobs by state.
func TestMetricsCountEachOutcome(t *testing.T) {
	js, qs := stores(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	mw, err := jobsotel.NewMiddleware(jobsotel.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	c := client(t, js, qs, mw, true, &done)
	reg, err := jobsotel.ObserveJobs(c, mp, jobs.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	ctx := context.Background()
	if _, err := c.InsertMany(ctx, []jobs.InsertParams{
		{Args: mailArgs{To: "a"}},
		{Args: mailArgs{To: "b", Fail: 1}},
		{Args: mailArgs{To: "c", Panic: true}, Opts: &jobs.InsertOpts{MaxAttempts: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "worked 4 times", func() bool { return done.Load() == 4 })
	waitFor(t, "written", func() bool {
		n, err := c.Count(ctx, "")
		return err == nil && n[jobs.StateCompleted] == 2 && n[jobs.StateDiscarded] == 1
	})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]map[string]int64{} // metric -> attribute value -> sum or count
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			byAttr := map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					byAttr[label(p.Attributes)] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					byAttr[label(p.Attributes)] += int64(p.Count)
					if p.Sum < 0 {
						t.Errorf("%s: negative sum %v", m.Name, p.Sum)
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					byAttr[label(p.Attributes)] += p.Value
				}
			}
			sums[m.Name] = byAttr
		}
	}
	check := func(metric, label string, want int64) {
		t.Helper()
		if got := sums[metric][label]; got != want {
			t.Errorf("%s{%s} = %d, want %d (all: %v)", metric, label, got, want, sums[metric])
		}
	}
	check("messaging.client.sent.messages", "kind=mail", 3)
	check("messaging.client.operation.duration", "", 1)
	check("messaging.client.consumed.messages", "kind=mail,outcome=completed", 2)
	check("messaging.client.consumed.messages", "kind=mail,outcome=failed", 1)
	check("messaging.client.consumed.messages", "kind=mail,outcome=panicked", 1)
	check("messaging.process.duration", "kind=mail,outcome=completed", 2)
	check("claimstore.job.queue.wait", "kind=mail", 4)
	check("claimstore.jobs", "state=completed", 2)
	check("claimstore.jobs", "state=discarded", 1)
	check("claimstore.jobs", "state=available", 0)

	failed := 0
	for _, s := range rec.Ended() {
		if s.Status().Code == codes.Error {
			failed++
			if len(s.Events()) == 0 || s.Events()[0].Name != "exception" {
				t.Errorf("failed work span %q records no exception: %v", s.Name(), s.Events())
			}
		}
	}
	if failed != 2 {
		t.Errorf("%d spans with status Error, want 2 (the failed attempt and the panic)", failed)
	}
}

// label names the attributes of a data point that vary in the test:
// kind, outcome, state (the queue is always the default one).
func label(set attribute.Set) string {
	out := ""
	for _, k := range []attribute.Key{jobsotel.AttrKind, jobsotel.AttrOutcome, jobsotel.AttrState} {
		if v, ok := set.Value(k); ok {
			if out != "" {
				out += ","
			}
			out += string(k[len("claimstore.job."):]) + "=" + v.AsString()
		}
	}
	return out
}

// TestNoTraceContextWithoutRecordingSpan inserts with a tracer provider
// that records nothing: the job's metadata is left as given.
func TestNoTraceContextWithoutRecordingSpan(t *testing.T) {
	js, qs := stores(t)
	mw, err := jobsotel.NewMiddleware(jobsotel.Config{TracerProvider: noop.NewTracerProvider(), MeterProvider: sdkmetric.NewMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	c := client(t, js, qs, mw, false, &done)
	res, err := c.Insert(context.Background(), mailArgs{To: "a"}, &jobs.InsertOpts{Metadata: json.RawMessage(`{"tenant": 7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Metadata != `{"tenant":7}` {
		t.Errorf("metadata %q, want the caller's alone", res.Job.Metadata)
	}
}
