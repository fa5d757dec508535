package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/claimstore/claimstore/dispatch"
)

// collected holds one collection of a manual reader, by instrument name.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			c[m.Name] = m.Data
		}
	}
	return c
}

// sum returns the total of an integer sum over the data points whose
// attributes include want.
func (c collected) sum(name string, want ...attribute.KeyValue) int64 {
	s, ok := c[name].(metricdata.Sum[int64])
	if !ok {
		return -1
	}
	var n int64
	for _, dp := range s.DataPoints {
		match := true
		for _, kv := range want {
			if v, ok := dp.Attributes.Value(kv.Key); !ok || v != kv.Value {
				match = false
			}
		}
		if match {
			n += dp.Value
		}
	}
	return n
}

// TestMetrics: a worker's fires, failures by step, retries, skips, lag,
// in-flight, renewals, drains and released leases reach the meter
// provider.
func TestMetrics(t *testing.T) {
	store, _ := memBackend().open(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()
	sc := newSchedules(t, store, dispatch.SchedulesConfig{})
	past := time.Now().Add(-2 * time.Second)
	for _, sp := range []dispatch.Spec{
		{Key: "ok", At: past},
		{Key: "fails-for-good", At: past, MaxFailures: 1},
		{Key: "retried", At: past, MaxFailures: 3},
		{Key: "slow", At: past},
	} {
		if _, _, err := sc.Add(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	// A cron schedule due now that fails at its first failure: skipped.
	if _, _, err := sc.Add(ctx, dispatch.Spec{Key: "cron", Cron: "* * * * * *", MaxFailures: 1}); err != nil {
		t.Fatal(err)
	}
	slowStarted := make(chan struct{})
	w := newScheduleWorker(t, store, func(ctx context.Context, f dispatch.Fire) error {
		switch f.Schedule.Key {
		case "ok":
			return nil
		case "slow":
			close(slowStarted)
			<-ctx.Done() // past the lease renewal, then cancelled by the drain
			return context.Cause(ctx)
		}
		return errors.New("boom")
	}, dispatch.Policy{}, dispatch.Config[dispatch.Schedule]{
		WorkerID: "mw", PollInterval: 20 * time.Millisecond, Lease: 100 * time.Millisecond, DrainTimeout: 50 * time.Millisecond,
		MeterProvider: mp, Logger: slog.New(slog.DiscardHandler),
	})
	stop := runWorker(t, w.Run)
	<-slowStarted
	waitFor(t, 10*time.Second, "fires and renewals", func() bool {
		c := collect(t, reader)
		return c.sum(dispatch.MetricFires) == 1 && c.sum(dispatch.MetricSkips) >= 1 && c.sum(dispatch.MetricLeaseRenewals) >= 2 &&
			c.sum(dispatch.MetricFailures, attribute.String(dispatch.AttrStep, "failed")) == 1 &&
			c.sum(dispatch.MetricRetries) == 1
	})
	c := collect(t, reader)
	if n := c.sum(dispatch.MetricInFlight); n != 1 {
		t.Errorf("in flight %d, want 1 (the slow handler)", n)
	}
	stop()
	c = collect(t, reader)
	worker := attribute.String(dispatch.AttrWorker, "mw")
	for _, tc := range []struct {
		name string
		want int64
		kv   []attribute.KeyValue
	}{
		{dispatch.MetricFires, 1, []attribute.KeyValue{worker}},
		{dispatch.MetricRetries, 1, nil}, // not the drained fire
		{dispatch.MetricFailures, 1, []attribute.KeyValue{attribute.String(dispatch.AttrStep, "retry")}},
		{dispatch.MetricFailures, 1, []attribute.KeyValue{attribute.String(dispatch.AttrStep, "failed")}},
		{dispatch.MetricInFlight, 0, nil},
		{dispatch.MetricDrains, 1, []attribute.KeyValue{attribute.Bool(dispatch.AttrTimedOut, true)}},
		{dispatch.MetricDrainReleased, 1, nil},
	} {
		if got := c.sum(tc.name, tc.kv...); got != tc.want {
			t.Errorf("%s %v = %d, want %d", tc.name, tc.kv, got, tc.want)
		}
	}
	// The every-second cron schedule fails and skips ahead at each fire.
	skips := c.sum(dispatch.MetricSkips, attribute.String(dispatch.AttrReason, "max_failures"))
	if skipped := c.sum(dispatch.MetricFailures, attribute.String(dispatch.AttrStep, "skipped")); skips < 1 || skipped != skips || c.sum(dispatch.MetricSkips) != skips {
		t.Errorf("skips %d (all reasons %d), failures at step skipped %d; want equal and >= 1", skips, c.sum(dispatch.MetricSkips), skipped)
	}
	if got, want := c.sum(dispatch.MetricLeaseRenewals), w.Stats().Renewed; got != want || got < 2 {
		t.Errorf("renewals %d, worker counted %d; want equal and >= 2", got, want)
	}
	h, ok := c[dispatch.MetricFireLag].(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("no fire lag histogram: %#v", c[dispatch.MetricFireLag])
	}
	dp := h.DataPoints[0]
	// One per fire started: ok, fails-for-good, retried, slow (the
	// retried one's retry is 30 s away) and each cron fire.
	if dp.Count != uint64(4+skips) {
		t.Errorf("lag recorded %d times, want %d", dp.Count, 4+skips)
	}
	if mn, ok := dp.Min.Value(); !ok || mn < 0 {
		t.Errorf("lag min %v", mn)
	}
	if mx, ok := dp.Max.Value(); !ok || mx < 1.5 {
		t.Errorf("lag max %v s, want >= 1.5 (the once schedules were due 2 s before the worker started)", mx)
	}
}
