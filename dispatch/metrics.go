package dispatch

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Instrument names of the package's OpenTelemetry metrics, recorded on
// the MeterProvider of [Config], [RescueConfig] or [RetentionConfig] (none:
// nothing is recorded). Every measurement of a worker carries
// [AttrWorker].
const (
	// MetricFires counts successful fires of schedules ({fire}).
	MetricFires = "claimstore.dispatch.fires"
	// MetricFailures counts failed fires ({fire}), with [AttrStep]: retry
	// (below max failures), failed (a once schedule failed for good) or
	// skipped (a cron schedule advanced after max failures).
	MetricFailures = "claimstore.dispatch.failures"
	// MetricRetries counts failed fires that will be retried after the
	// backoff ({fire}).
	MetricRetries = "claimstore.dispatch.retries"
	// MetricSkips counts cron fires skipped ({fire}), with [AttrReason]:
	// max_failures (skip-and-advance) or misfire (MisfireSkip).
	MetricSkips = "claimstore.dispatch.skips"
	// MetricFireLag is how late each fire was claimed, claim time −
	// next_fire_at, in seconds (a histogram), recorded as the fire
	// starts (misfire skips included).
	MetricFireLag = "claimstore.dispatch.fire.lag"
	// MetricInFlight is the number of handlers running ({row}).
	MetricInFlight = "claimstore.dispatch.inflight"
	// MetricLeaseRenewals counts leases extended by the renewal ({row}).
	MetricLeaseRenewals = "claimstore.dispatch.lease.renewals"
	// MetricLeaseLost counts rows whose lease the worker lost: a renewal
	// or an outcome write refused by the fence, or a renewal failing
	// until the lease ended ({row}).
	MetricLeaseLost = "claimstore.dispatch.lease.lost"
	// MetricDrains counts drains, one per end of Run ({drain}), with
	// [AttrTimedOut] telling whether handlers were still running at the
	// drain timeout.
	MetricDrains = "claimstore.dispatch.drains"
	// MetricDrainReleased counts leases released by drains ({row}).
	MetricDrainReleased = "claimstore.dispatch.drain.released"
	// MetricRescued counts rows freed by a [Rescuer] ({row}).
	MetricRescued = "claimstore.dispatch.rescued"
	// MetricSwept counts schedules deleted by a [Retention] sweep ({row}).
	MetricSwept = "claimstore.dispatch.swept"

	// AttrWorker is the worker id.
	AttrWorker = "claimstore.dispatch.worker"
	// AttrStep is the outcome step of a failed fire.
	AttrStep = "claimstore.dispatch.step"
	// AttrReason is why a fire was skipped.
	AttrReason = "claimstore.dispatch.reason"
	// AttrTimedOut tells whether a drain reached its timeout.
	AttrTimedOut = "claimstore.dispatch.timed_out"
)

// MeterName is the instrumentation scope name of the package's meter.
const MeterName = "github.com/claimstore/claimstore/dispatch"

// metrics are the instruments of one worker, rescuer or sweep.
type metrics struct {
	attrs                                   []attribute.KeyValue
	fires, failures, retries, skips         metric.Int64Counter
	lag                                     metric.Float64Histogram
	inFlight                                metric.Int64UpDownCounter
	renewals, lost, drains, released        metric.Int64Counter
	rescued, swept                          metric.Int64Counter
	attrSet, stepRetry, stepFailed, stepSkp metric.MeasurementOption
	// addAttrs is attrSet as the options of an Add, made once: the
	// in-flight count changes twice a row, and a variadic argument built
	// at each call would be allocated there.
	addAttrs []metric.AddOption
}

func newMetrics(mp metric.MeterProvider, attrs ...attribute.KeyValue) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(MeterName)
	m := &metrics{attrs: attrs}
	counters := []struct {
		c          *metric.Int64Counter
		name, unit string
		desc       string
	}{
		{&m.fires, MetricFires, "{fire}", "Successful fires of schedules."},
		{&m.failures, MetricFailures, "{fire}", "Failed fires of schedules, by outcome step."},
		{&m.retries, MetricRetries, "{fire}", "Failed fires retried after the backoff."},
		{&m.skips, MetricSkips, "{fire}", "Cron fires skipped, by reason."},
		{&m.renewals, MetricLeaseRenewals, "{row}", "Leases extended by the renewal."},
		{&m.lost, MetricLeaseLost, "{row}", "Rows whose lease the worker lost."},
		{&m.drains, MetricDrains, "{drain}", "Drains of a worker."},
		{&m.released, MetricDrainReleased, "{row}", "Leases released by drains."},
		{&m.rescued, MetricRescued, "{row}", "Rows with a long-expired lease freed by the rescuer."},
		{&m.swept, MetricSwept, "{row}", "Terminal schedules deleted by retention sweeps."},
	}
	var err error
	for _, c := range counters {
		if *c.c, err = meter.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc)); err != nil {
			return nil, fmt.Errorf("metric %s: %w", c.name, err)
		}
	}
	if m.lag, err = meter.Float64Histogram(MetricFireLag, metric.WithUnit("s"),
		metric.WithDescription("How late fires were claimed: claim time minus next_fire_at."),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900)); err != nil {
		return nil, fmt.Errorf("metric %s: %w", MetricFireLag, err)
	}
	if m.inFlight, err = meter.Int64UpDownCounter(MetricInFlight, metric.WithUnit("{row}"),
		metric.WithDescription("Handlers running.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", MetricInFlight, err)
	}
	m.attrSet = metric.WithAttributes(attrs...)
	m.addAttrs = []metric.AddOption{m.attrSet}
	m.stepRetry = m.with(attribute.String(AttrStep, "retry"))
	m.stepFailed = m.with(attribute.String(AttrStep, "failed"))
	m.stepSkp = m.with(attribute.String(AttrStep, "skipped"))
	return m, nil
}

func (m *metrics) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(kv, m.attrs...)...)
}

// bg detaches ctx from cancellation: a measurement taken while draining
// is still recorded.
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// fireLag records how late a fire was claimed.
func (m *metrics) fireLag(ctx context.Context, lag time.Duration) {
	m.lag.Record(bg(ctx), max(lag, 0).Seconds(), m.attrSet)
}

// outcome records one fire's outcome step.
func (m *metrics) outcome(ctx context.Context, step string) {
	ctx = bg(ctx)
	switch step {
	case "fired", "advanced":
		m.fires.Add(ctx, 1, m.attrSet)
	case "retry":
		m.failures.Add(ctx, 1, m.stepRetry)
		m.retries.Add(ctx, 1, m.attrSet)
	case "failed":
		m.failures.Add(ctx, 1, m.stepFailed)
	case "skipped":
		m.failures.Add(ctx, 1, m.stepSkp)
		m.skips.Add(ctx, 1, m.with(attribute.String(AttrReason, "max_failures")))
	case "misfire-skipped":
		m.skips.Add(ctx, 1, m.with(attribute.String(AttrReason, "misfire")))
	}
}

func (m *metrics) drained(ctx context.Context, timedOut bool, released int64) {
	ctx = bg(ctx)
	m.drains.Add(ctx, 1, m.with(attribute.Bool(AttrTimedOut, timedOut)))
	if released > 0 {
		m.released.Add(ctx, released, m.attrSet)
	}
}

func (m *metrics) add(ctx context.Context, c metric.Int64Counter, n int64) {
	if n > 0 {
		c.Add(bg(ctx), n, m.attrSet)
	}
}
