package bench

import (
	"math"
	"slices"
	"time"
)

// Latencies holds every latency sample of a run. Percentiles are exact
// (nearest rank over the sorted samples), not estimated from buckets: a run
// records one sample per claim call, 8 bytes each, which stays small for any
// table a benchmark loads. A Latencies is not safe for concurrent use; the
// burner keeps one per worker and merges them.
type Latencies struct {
	samples []time.Duration
	sorted  bool
}

// Add records one sample.
func (l *Latencies) Add(d time.Duration) {
	l.samples = append(l.samples, d)
	l.sorted = false
}

// Merge appends every sample of o.
func (l *Latencies) Merge(o *Latencies) {
	l.samples = append(l.samples, o.samples...)
	l.sorted = false
}

// Len returns the number of samples.
func (l *Latencies) Len() int { return len(l.samples) }

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// the samples: the smallest sample such that at least p percent of the
// samples are less than or equal to it. It returns 0 with no samples;
// p <= 0 gives the minimum and p > 100 the maximum.
func (l *Latencies) Percentile(p float64) time.Duration {
	if len(l.samples) == 0 {
		return 0
	}
	if !l.sorted {
		slices.Sort(l.samples)
		l.sorted = true
	}
	rank := int(math.Ceil(p / 100 * float64(len(l.samples))))
	rank = min(max(rank, 1), len(l.samples))
	return l.samples[rank-1]
}

// Summary returns the percentiles a report prints.
func (l *Latencies) Summary() LatencySummary {
	s := LatencySummary{N: len(l.samples)}
	if s.N == 0 {
		return s
	}
	var sum time.Duration
	for _, d := range l.samples {
		sum += d
	}
	s.Mean = sum / time.Duration(s.N)
	s.P50 = l.Percentile(50)
	s.P90 = l.Percentile(90)
	s.P99 = l.Percentile(99)
	s.Max = l.Percentile(100)
	return s
}

// LatencySummary is a set of percentiles of claim-call latency.
type LatencySummary struct {
	N                        int
	Mean, P50, P90, P99, Max time.Duration
}
