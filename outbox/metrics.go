package outbox

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Instrument names of the relay's OpenTelemetry metrics. Every measurement
// carries the attribute [AttrTargetBroker].
const (
	// MetricPublished counts messages acknowledged by the broker and
	// marked published ({message}).
	MetricPublished = "outbox.relay.published"
	// MetricFailed counts failed publish attempts that will be retried
	// ({message}).
	MetricFailed = "outbox.relay.failed"
	// MetricAbandoned counts messages abandoned after their last retry or
	// a permanent failure ({message}).
	MetricAbandoned = "outbox.relay.abandoned"
	// MetricClaimDuration is the latency of one claim, in seconds.
	MetricClaimDuration = "outbox.relay.claim.duration"
	// MetricBatchSize is the number of messages in each non-empty claimed
	// batch ({message}).
	MetricBatchSize = "outbox.relay.batch.size"
	// MetricOldestAge is the age of the oldest message of the relay's
	// target broker not yet published (pending, processing or failed), in
	// seconds; 0 when there is none. It is observed, with one query, each
	// time the meter provider collects, while the relay runs.
	MetricOldestAge = "outbox.oldest_unpublished.age"

	// AttrTargetBroker is the target broker of the relay.
	AttrTargetBroker = "outbox.target_broker"
)

// MeterName is the instrumentation scope name of the relay's meter.
const MeterName = "github.com/claimstore/claimstore/outbox"

type relayMetrics struct {
	attrs     metric.MeasurementOption
	published metric.Int64Counter
	failed    metric.Int64Counter
	abandoned metric.Int64Counter
	claimDur  metric.Float64Histogram
	batchSize metric.Int64Histogram
	oldest    metric.Float64ObservableGauge
	meter     metric.Meter
}

func newRelayMetrics(mp metric.MeterProvider, broker string) (*relayMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := &relayMetrics{
		meter: mp.Meter(MeterName),
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrTargetBroker, broker))),
	}
	var err error
	if m.published, err = m.meter.Int64Counter(MetricPublished, metric.WithUnit("{message}"),
		metric.WithDescription("Messages acknowledged by the broker and marked published.")); err != nil {
		return nil, err
	}
	if m.failed, err = m.meter.Int64Counter(MetricFailed, metric.WithUnit("{message}"),
		metric.WithDescription("Failed publish attempts that will be retried.")); err != nil {
		return nil, err
	}
	if m.abandoned, err = m.meter.Int64Counter(MetricAbandoned, metric.WithUnit("{message}"),
		metric.WithDescription("Messages abandoned after their last retry or a permanent failure.")); err != nil {
		return nil, err
	}
	if m.claimDur, err = m.meter.Float64Histogram(MetricClaimDuration, metric.WithUnit("s"),
		metric.WithDescription("Latency of one claim."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)); err != nil {
		return nil, err
	}
	if m.batchSize, err = m.meter.Int64Histogram(MetricBatchSize, metric.WithUnit("{message}"),
		metric.WithDescription("Messages in each non-empty claimed batch."),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)); err != nil {
		return nil, err
	}
	if m.oldest, err = m.meter.Float64ObservableGauge(MetricOldestAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest message not yet published.")); err != nil {
		return nil, err
	}
	return m, nil
}

// observeOldest registers the callback of the oldest-message gauge; the
// returned function unregisters it.
func (m *relayMetrics) observeOldest(repo *Repository, broker string) (func(), error) {
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		t, ok, err := repo.OldestUnpublished(ctx, broker)
		if err != nil {
			return fmt.Errorf("outbox: observe oldest message: %w", err)
		}
		age := 0.0
		if ok {
			age = max(repo.clock().Sub(t).Seconds(), 0)
		}
		o.ObserveFloat64(m.oldest, age, m.attrs)
		return nil
	}, m.oldest)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}
