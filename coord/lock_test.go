package coord_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/claimstore/claimstore/adapters/memstore"
	"github.com/claimstore/claimstore/coord"
	"github.com/claimstore/claimstore/dao"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestWithLockInvalidArguments(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLocker()
	ran := false
	fn := func(context.Context, any) error { ran = true; return nil }
	for _, key := range []string{"", "a\x00b", "bad\xffutf8", strings.Repeat("k", 256)} {
		got, err := coord.WithLock(ctx, l, key, fn)
		if !errors.Is(err, dao.ErrInvalidArgument) || got || ran {
			t.Errorf("WithLock(key %q) = %v, %v (fn ran: %v), want false and ErrInvalidArgument without running fn", key, got, err, ran)
		}
	}
	if _, err := coord.WithLock(ctx, nil, "k", fn); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil locker: %v, want ErrInvalidArgument", err)
	}
	if _, err := coord.WithLock(ctx, l, "k", nil); !errors.Is(err, dao.ErrInvalidArgument) {
		t.Errorf("nil fn: %v, want ErrInvalidArgument", err)
	}
	if got, err := coord.WithLock(ctx, l, strings.Repeat("k", 255), fn); err != nil || !got || !ran {
		t.Errorf("key of 255 bytes: %v, %v (fn ran: %v), want it run", got, err, ran)
	}
}

func TestWithLockHeldSkipsAndLogs(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLocker()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	opts := []coord.Option{coord.WithLogger(logger), coord.WithMeterProvider(mp)}

	ran, err := coord.WithLock(ctx, l, "cycle", func(ctx context.Context, _ any) error {
		inner, err := coord.WithLock(ctx, l, "cycle", func(context.Context, any) error {
			t.Error("the second holder ran while the first held the lock")
			return nil
		}, opts...)
		if inner || err != nil {
			t.Errorf("second attempt = %v, %v; want false, nil", inner, err)
		}
		other, err := coord.WithLock(ctx, l, "other", func(context.Context, any) error { return nil }, opts...)
		if !other || err != nil {
			t.Errorf("attempt on another key = %v, %v; want true, nil", other, err)
		}
		return nil
	}, opts...)
	if !ran || err != nil {
		t.Fatalf("first attempt = %v, %v; want true, nil", ran, err)
	}
	if !strings.Contains(logs.String(), `level=DEBUG msg="try-lock held by another, skipped" key=cycle`) {
		t.Errorf("log lacks the skip at Debug:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "skipped"); n != 1 {
		t.Errorf("%d skips logged, want 1:\n%s", n, logs.String())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]map[bool]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != coord.MeterName {
			continue
		}
		for _, m := range sm.Metrics {
			s, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T, want a sum", m.Name, m.Data)
			}
			sums[m.Name] = map[bool]int64{}
			for _, dp := range s.DataPoints {
				v, _ := dp.Attributes.Value(coord.AttrLockAcquired)
				sums[m.Name][v.AsBool()] += dp.Value
			}
		}
	}
	if a := sums[coord.MetricLockAttempts]; a[true] != 2 || a[false] != 1 {
		t.Errorf("attempts by acquired = %v, want 2 acquired and 1 not", a)
	}
	if a := sums[coord.MetricLockAcquisitions]; a[false] != 2 {
		t.Errorf("acquisitions = %v, want 2", a)
	}
}

func TestWithLockErrorAndPanicRelease(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLocker()
	boom := errors.New("boom")
	ran, err := coord.WithLock(ctx, l, "k", func(context.Context, any) error { return boom })
	if !ran || !errors.Is(err, boom) {
		t.Errorf("WithLock = %v, %v; want true and fn's error wrapped", ran, err)
	}
	func() {
		defer func() {
			if r := recover(); r != "fn panicked" {
				t.Errorf("recovered %v, want fn's panic re-raised", r)
			}
		}()
		coord.WithLock(ctx, l, "k", func(context.Context, any) error { panic("fn panicked") })
		t.Error("WithLock returned instead of re-raising fn's panic")
	}()
	if ran, err := coord.WithLock(ctx, l, "k", func(context.Context, any) error { return nil }); !ran || err != nil {
		t.Errorf("after a panic: %v, %v; want the lock free", ran, err)
	}
}
