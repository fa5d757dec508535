package coord

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Instrument names of the elector's OpenTelemetry metrics. Every
// measurement carries [AttrElection] and [AttrCandidate].
const (
	// MetricLeaderAttempts counts acquisitions and renewals tried
	// ({attempt}), with [AttrAcquired] telling whether the candidate held
	// the lease afterwards.
	MetricLeaderAttempts = "claimstore.coord.leader.attempts"
	// MetricLeaderTerm is the election's current term as this candidate
	// last read it from the lease store ({term}).
	MetricLeaderTerm = "claimstore.coord.leader.term"
	// MetricLeaderChanges counts this candidate's changes of leadership
	// ({change}), with [AttrChange] "elected" or "deposed".
	MetricLeaderChanges = "claimstore.coord.leader.changes"

	// AttrElection is the election name.
	AttrElection = "claimstore.election"
	// AttrCandidate is the candidate id.
	AttrCandidate = "claimstore.candidate"
	// AttrAcquired tells whether an attempt left the candidate holding
	// the lease.
	AttrAcquired = "claimstore.acquired"
	// AttrChange is "elected" or "deposed".
	AttrChange = "claimstore.change"
)

const (
	changeElected = "elected"
	changeDeposed = "deposed"
)

type leaderMetrics struct {
	attrs    []attribute.KeyValue
	attempts metric.Int64Counter
	termG    metric.Int64Gauge
	changes  metric.Int64Counter
}

func newLeaderMetrics(mp metric.MeterProvider, name, id string) (*leaderMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter(MeterName)
	m := &leaderMetrics{attrs: []attribute.KeyValue{attribute.String(AttrElection, name), attribute.String(AttrCandidate, id)}}
	var err error
	if m.attempts, err = meter.Int64Counter(MetricLeaderAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Leader lease acquisitions and renewals tried.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", MetricLeaderAttempts, err)
	}
	if m.termG, err = meter.Int64Gauge(MetricLeaderTerm, metric.WithUnit("{term}"),
		metric.WithDescription("The election's current term as last read from the lease store.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", MetricLeaderTerm, err)
	}
	if m.changes, err = meter.Int64Counter(MetricLeaderChanges, metric.WithUnit("{change}"),
		metric.WithDescription("Terms won and ended by this candidate.")); err != nil {
		return nil, fmt.Errorf("metric %s: %w", MetricLeaderChanges, err)
	}
	return m, nil
}

func (m *leaderMetrics) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(kv, m.attrs...)...)
}

func (m *leaderMetrics) attempt(ctx context.Context, acquired bool) {
	m.attempts.Add(context.WithoutCancel(ctx), 1, m.with(attribute.Bool(AttrAcquired, acquired)))
}

func (m *leaderMetrics) term(ctx context.Context, term int64) {
	m.termG.Record(context.WithoutCancel(ctx), term, m.with())
}

func (m *leaderMetrics) changed(ctx context.Context, change string) {
	m.changes.Add(context.WithoutCancel(ctx), 1, m.with(attribute.String(AttrChange, change)))
}
