package outbox_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/claimstore/claimstore/outbox"
)

func newMeter() (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	reader := sdkmetric.NewManualReader()
	return reader, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
}

// collected is one collection of the relay's metrics, by instrument name.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, reader *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != outbox.MeterName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func (c collected) counter(name string) int64 {
	s, _ := c[name].(metricdata.Sum[int64])
	var n int64
	for _, dp := range s.DataPoints {
		n += dp.Value
	}
	return n
}

func (c collected) histogram(name string) (count uint64, sum float64) {
	switch h := c[name].(type) {
	case metricdata.Histogram[int64]:
		for _, dp := range h.DataPoints {
			count += dp.Count
			sum += float64(dp.Sum)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range h.DataPoints {
			count += dp.Count
			sum += dp.Sum
		}
	}
	return count, sum
}

func (c collected) gauge(t *testing.T, name string) (float64, attribute.Set) {
	t.Helper()
	g, ok := c[name].(metricdata.Gauge[float64])
	if !ok || len(g.DataPoints) != 1 {
		t.Fatalf("gauge %s: %#v", name, c[name])
	}
	return g.DataPoints[0].Value, g.DataPoints[0].Attributes
}

func TestRelayMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, db := b.open(t)
		nb := startBroker(t)
		repo := newRepo(t, s)
		const n = 60
		ms := msgs("metric", testSubject, n)
		ms[0].CreatedAt = time.Now().Add(-time.Minute)
		write(t, repo, db, ms)
		reader, mp := newMeter()
		// Hold the first publish until the gauge has been read once, so the
		// oldest message is still unpublished then.
		observed := make(chan struct{})
		real := nb.publisher(t, 5*time.Second)
		gated := outbox.PublisherFunc(func(ctx context.Context, ms []outbox.Message) []error {
			<-observed
			return real.Publish(ctx, ms)
		})
		r, err := outbox.NewRelay(repo, gated, outbox.RelayConfig{
			BatchSize: 25, MeterProvider: mp, PollInterval: 10 * time.Millisecond, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		rr := runRelay(t, r)
		waitFor(t, 10*time.Second, "gauge registered", func() bool {
			_, ok := collect(t, reader)[outbox.MetricOldestAge]
			return ok
		})
		age, attrs := collect(t, reader).gauge(t, outbox.MetricOldestAge)
		if v, ok := attrs.Value(attribute.Key(outbox.AttrTargetBroker)); !ok || v.AsString() != "" {
			t.Fatalf("gauge attributes %v", attrs)
		}
		if age < 59 {
			t.Fatalf("oldest message age %.1fs, want >= 60s", age)
		}
		close(observed)
		waitFor(t, 30*time.Second, "all published", func() bool { return counts(t, repo)[outbox.StatusPublished] == n })
		got := collect(t, reader)
		if age, _ := got.gauge(t, outbox.MetricOldestAge); age != 0 {
			t.Fatalf("oldest age %v with nothing left, want 0", age)
		}
		rr.stop(t)
		got = collect(t, reader)
		if got.counter(outbox.MetricPublished) != n || got.counter(outbox.MetricFailed) != 0 || got.counter(outbox.MetricAbandoned) != 0 {
			t.Fatalf("counters: published %d failed %d abandoned %d", got.counter(outbox.MetricPublished),
				got.counter(outbox.MetricFailed), got.counter(outbox.MetricAbandoned))
		}
		if count, sum := got.histogram(outbox.MetricBatchSize); count < 3 || sum != n {
			t.Fatalf("batch size histogram: %d batches, %v messages; want >= 3 batches of 60 messages in all", count, sum)
		}
		if count, sum := got.histogram(outbox.MetricClaimDuration); count < 3 || sum <= 0 {
			t.Fatalf("claim duration histogram: %d claims, %vs", count, sum)
		}
		if _, ok := got[outbox.MetricOldestAge]; ok {
			t.Fatal("gauge still observed after the relay stopped")
		}
	})
}
