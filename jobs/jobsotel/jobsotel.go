package jobsotel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/semconv/v1.40.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/claimstore/claimstore/jobs"
)

// ScopeName is the instrumentation scope of the package's tracer and
// meter.
const ScopeName = "github.com/claimstore/claimstore/jobs/jobsotel"

// System is the messaging.system attribute of the package's spans and
// metrics.
const System = "claimstore"

// MetadataKey is the key of a job's metadata under which the insert
// writes its span's context (an object of the propagator's fields, e.g.
// {"traceparent": "00-…"}).
const MetadataKey = "otel"

// Attribute keys of the package beyond the semantic conventions'.
const (
	// AttrKind is the job's kind.
	AttrKind = attribute.Key("claimstore.job.kind")
	// AttrAttempt is the attempt's number, from 1.
	AttrAttempt = attribute.Key("claimstore.job.attempt")
	// AttrOutcome is what the work returned: completed, failed,
	// panicked, cancelled or snoozed.
	AttrOutcome = attribute.Key("claimstore.job.outcome")
	// AttrState is a job's state (claimstore.jobs).
	AttrState = attribute.Key("claimstore.job.state")
)

// Outcomes of a job's work, as AttrOutcome reports them.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomePanicked  = "panicked"
	OutcomeCancelled = "cancelled"
	OutcomeSnoozed   = "snoozed"
)

// Config configures a [Middleware]; zero fields take OpenTelemetry's
// global providers (otel.GetTracerProvider, otel.GetMeterProvider) and
// propagator (otel.GetTextMapPropagator), or W3C Trace Context
// (propagation.TraceContext) while no global propagator is set.
type Config struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator
}

// Middleware traces and measures a jobs.Client's inserts and work: it is
// a jobs.InsertMiddleware and a jobs.WorkMiddleware. Give it in
// jobs.Config.Middleware. It is safe for concurrent use.
type Middleware struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator // nil: see propagator
	sent     messagingconv.ClientSentMessages
	opDur    messagingconv.ClientOperationDuration
	consumed messagingconv.ClientConsumedMessages
	procDur  messagingconv.ProcessDuration
	wait     metric.Float64Histogram
}

var (
	_ jobs.InsertMiddleware = (*Middleware)(nil)
	_ jobs.WorkMiddleware   = (*Middleware)(nil)
)

// NewMiddleware returns the middleware of cfg. It fails only when the
// meter provider cannot create an instrument (its error, wrapped).
func NewMiddleware(cfg Config) (*Middleware, error) {
	tp, mp, prop := cfg.TracerProvider, cfg.MeterProvider, cfg.Propagator
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	m := &Middleware{tracer: tp.Tracer(ScopeName), prop: prop}
	var errs [5]error
	m.sent, errs[0] = messagingconv.NewClientSentMessages(meter)
	m.opDur, errs[1] = messagingconv.NewClientOperationDuration(meter)
	m.consumed, errs[2] = messagingconv.NewClientConsumedMessages(meter)
	m.procDur, errs[3] = messagingconv.NewProcessDuration(meter)
	m.wait, errs[4] = meter.Float64Histogram("claimstore.job.queue.wait",
		metric.WithUnit("s"), metric.WithDescription("Time from a job's scheduled time to the start of its work."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("jobsotel: new middleware: %w", err)
	}
	return m, nil
}

// propagator returns the configured propagator, else the global one
// when it is set, else W3C Trace Context.
func (m *Middleware) propagator() propagation.TextMapPropagator {
	if m.prop != nil {
		return m.prop
	}
	if g := otel.GetTextMapPropagator(); len(g.Fields()) > 0 {
		return g
	}
	return propagation.TraceContext{}
}

// InsertMany wraps one insert call in a producer span, writes the span's
// context into each job's metadata (when the span records), and counts
// the jobs inserted and the call's duration.
func (m *Middleware) InsertMany(ctx context.Context, rows []*jobs.Row, next func(ctx context.Context) ([]jobs.InsertResult, error)) ([]jobs.InsertResult, error) {
	queue := ""
	if len(rows) > 0 {
		queue = rows[0].Queue
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("insert"),
		semconv.MessagingDestinationName(queue),
	}
	if len(rows) > 1 {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(len(rows)))
	}
	ctx, span := m.tracer.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	defer span.End()
	if span.IsRecording() {
		carrier := propagation.MapCarrier{}
		m.propagator().Inject(ctx, carrier)
		if len(carrier) > 0 {
			for _, r := range rows {
				if md, err := withKey(r.Metadata, MetadataKey, carrier); err == nil {
					r.Metadata = md
				}
			}
		}
	}
	began := time.Now()
	res, err := next(ctx)
	var errAttr []attribute.KeyValue
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		errAttr = []attribute.KeyValue{semconv.ErrorType(err)}
	} else if len(res) == 1 && res[0].Job != nil {
		span.SetAttributes(semconv.MessagingMessageID(strconv.FormatInt(res[0].Job.ID, 10)))
	}
	m.opDur.Record(ctx, time.Since(began).Seconds(), "insert", System, append(errAttr, semconv.MessagingDestinationName(queue))...)
	counts := map[[2]string]int64{}
	for _, r := range rows {
		counts[[2]string{r.Queue, r.Kind}]++
	}
	for k, n := range counts {
		m.sent.Add(ctx, n, "insert", System, append(errAttr, semconv.MessagingDestinationName(k[0]), AttrKind.String(k[1]))...)
	}
	return res, err
}

// Work wraps the work of one job in a consumer span, a child of the span
// that inserted it when its metadata carries one, and records its
// duration, outcome and queue wait.
func (m *Middleware) Work(ctx context.Context, job *jobs.Row, next func(ctx context.Context) error) error {
	if carrier, ok := carrierOf(job.Metadata); ok {
		ctx = m.propagator().Extract(ctx, carrier)
	}
	common := []attribute.KeyValue{semconv.MessagingDestinationName(job.Queue), AttrKind.String(job.Kind)}
	if job.AttemptedAt != nil {
		m.wait.Record(ctx, max(job.AttemptedAt.Sub(job.ScheduledAt), 0).Seconds(), metric.WithAttributes(common...))
	}
	ctx, span := m.tracer.Start(ctx, "process "+job.Queue, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("work"),
		semconv.MessagingDestinationName(job.Queue),
		semconv.MessagingMessageID(strconv.FormatInt(job.ID, 10)),
		AttrKind.String(job.Kind),
		AttrAttempt.Int(job.Attempt),
	))
	defer span.End()
	began := time.Now()
	err := next(ctx)
	outcome := Outcome(ctx, err)
	attrs := append(common, AttrOutcome.String(outcome))
	span.SetAttributes(AttrOutcome.String(outcome))
	if outcome == OutcomeFailed || outcome == OutcomePanicked {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		attrs = append(attrs, semconv.ErrorType(err))
	}
	m.procDur.Record(ctx, time.Since(began).Seconds(), "work", System, attrs...)
	m.consumed.Add(ctx, 1, "work", System, attrs...)
	return err
}

// Outcome returns the outcome (OutcomeCompleted, …) of a job's work that
// returned err, ctx being its context.
func Outcome(ctx context.Context, err error) string {
	var (
		snooze *jobs.SnoozeError
		cancel *jobs.CancelError
		panicE *jobs.PanicError
	)
	switch {
	case err == nil:
		return OutcomeCompleted
	case errors.As(err, &snooze):
		return OutcomeSnoozed
	case errors.As(err, &cancel), errors.Is(context.Cause(ctx), jobs.ErrCancelled):
		return OutcomeCancelled
	case errors.As(err, &panicE):
		return OutcomePanicked
	}
	return OutcomeFailed
}

// withKey returns metadata (a JSON object, "" for none) with key set to
// v.
func withKey(metadata, key string, v any) (string, error) {
	obj := map[string]json.RawMessage{}
	if metadata != "" {
		if err := json.Unmarshal([]byte(metadata), &obj); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	obj[key] = b
	out, err := json.Marshal(obj)
	return string(out), err
}

// carrierOf returns the propagation fields stored in metadata under
// MetadataKey.
func carrierOf(metadata string) (propagation.MapCarrier, bool) {
	if metadata == "" {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(metadata), &obj) != nil {
		return nil, false
	}
	var fields map[string]string
	if json.Unmarshal(obj[MetadataKey], &fields) != nil || len(fields) == 0 {
		return nil, false
	}
	return propagation.MapCarrier(fields), true
}

// ObserveJobs reports, at each collection of mp's readers, the number of
// jobs of client in each state for each of queues (every queue together
// when none is given, without a queue attribute), as the gauge
// claimstore.jobs {job} with attributes messaging.destination.name and
// claimstore.job.state. Each collection counts with client.Count: one
// query per state and queue, so collect at an interval the database can
// afford (a minute, say). It returns the registration, whose Unregister
// stops it, or the meter's error.
func ObserveJobs(client *jobs.Client, mp metric.MeterProvider, queues ...string) (metric.Registration, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	gauge, err := meter.Int64ObservableGauge("claimstore.jobs", metric.WithUnit("{job}"), metric.WithDescription("Jobs by queue and state."))
	if err != nil {
		return nil, fmt.Errorf("jobsotel: observe jobs: %w", err)
	}
	if len(queues) == 0 {
		queues = []string{""}
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var errs []error
		for _, q := range queues {
			counts, err := client.Count(ctx, q)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for state, n := range counts {
				attrs := []attribute.KeyValue{AttrState.String(string(state))}
				if q != "" {
					attrs = append(attrs, semconv.MessagingDestinationName(q))
				}
				o.ObserveInt64(gauge, n, metric.WithAttributes(attrs...))
			}
		}
		return errors.Join(errs...)
	}, gauge)
	if err != nil {
		return nil, fmt.Errorf("jobsotel: observe jobs: %w", err)
	}
	return reg, nil
}
