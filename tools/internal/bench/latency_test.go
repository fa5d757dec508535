package bench

import (
	"testing"
	"time"
)

func TestLatencyPercentiles(t *testing.T) {
	var l Latencies
	if s := l.Summary(); s.N != 0 || s.P50 != 0 {
		t.Fatalf("empty summary %+v", s)
	}
	// 1..100 ms in reverse order: the nearest-rank p-th percentile is p ms.
	for i := 100; i >= 1; i-- {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	for _, p := range []float64{1, 50, 90, 99, 100} {
		if got, want := l.Percentile(p), time.Duration(p)*time.Millisecond; got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	var other Latencies
	other.Add(time.Second)
	l.Merge(&other)
	s := l.Summary()
	if s.N != 101 || s.Max != time.Second || s.P50 != 51*time.Millisecond {
		t.Fatalf("after merge %+v", s)
	}
}
